package leasehold

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// goListDeps returns every package that pkgs import, directly or not (go list
// -deps, tests aside), with the package that pulls each in.
func goListDeps(t *testing.T, pkgs ...string) map[string][]string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	deps := make(map[string][]string)
	for _, p := range pkgs {
		out, err := exec.Command(goBin, "list", "-deps", p).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", p, err)
		}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = append(deps[d], p)
		}
	}
	return deps
}

// forbidden lists the deps that have one of prefixes (a prefix matches the
// package itself and everything below it).
func forbidden(deps map[string][]string, prefixes ...string) []string {
	var bad []string
	for d, by := range deps {
		for _, pre := range prefixes {
			if d == pre || strings.HasPrefix(d, pre+"/") {
				bad = append(bad, d+" (imported by "+strings.Join(by, ", ")+")")
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// TestLibraryImportsOTelAPIOnly keeps importing the library light: the core
// packages use the OpenTelemetry API only. The SDK, exporters, gRPC and the
// Prometheus client belong to a program's main, through tracing/otelsetup.
func TestLibraryImportsOTelAPIOnly(t *testing.T) {
	t.Parallel()
	deps := goListDeps(t, ".", "./lease", "./idempotency", "./compensation", "./fence", "./tracing")
	bad := forbidden(deps,
		"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "go.opentelemetry.io/contrib/exporters",
		"google.golang.org/grpc", "github.com/prometheus/client_golang")
	if len(bad) > 0 {
		t.Errorf("library packages pull in an OpenTelemetry SDK, exporter, gRPC or Prometheus (move the use to tracing/otelsetup):\n%s",
			strings.Join(bad, "\n"))
	}
}

// TestTeamBinaryHoldsNoDemo keeps cmd/worker's development parts out of a
// team's binary built with workercmd: no demo job types, payment stub,
// in-memory Kafka (kfake) or PostgreSQL driver (cmd/worker adds them through
// cli.DemoOptions).
func TestTeamBinaryHoldsNoDemo(t *testing.T) {
	t.Parallel()
	deps := goListDeps(t, "./workercmd", "./examples/myworker")
	bad := forbidden(deps,
		"github.com/leasehold/leasehold/internal/demo", "github.com/leasehold/leasehold/internal/paystub",
		"github.com/leasehold/leasehold/internal/devkafka", "github.com/twmb/franz-go/pkg/kfake",
		"github.com/jackc/pgx/v5")
	if len(bad) > 0 {
		t.Errorf("a program built with workercmd links cmd/worker's development parts (pass them through cli.DevParts instead):\n%s",
			strings.Join(bad, "\n"))
	}
}

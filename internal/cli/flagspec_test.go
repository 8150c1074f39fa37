package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFlagsDoc fails while docs/flags.md is not what the flag specs
// generate: run `go run ./internal/cli/gendocs` after changing a flag.
func TestFlagsDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "flags.md")
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := FlagsMarkdown(DemoOptions(testDevParts)...)
	if !bytes.Equal(have, want) {
		t.Errorf("docs/flags.md is out of date: run `go run ./internal/cli/gendocs` from the module root")
	}
	// The reference names what run reads, with its default.
	for _, s := range []string{"## worker run", "| `--brokers` | `LEASEHOLD_BROKERS` |", "| `--lease-ttl` | `LEASEHOLD_LEASE_TTL` | `" + (15 * time.Second).String()} {
		if !bytes.Contains(want, []byte(s)) {
			t.Errorf("generated reference lacks %q", s)
		}
	}
}

// TestFlagsHaveOneSource checks that every command's help shows each
// flag's environment variable as its spec names it, once, and that no flag
// of this package's commands writes "(env X)" by hand.
func TestFlagsHaveOneSource(t *testing.T) {
	a := newApp(DemoOptions(testDevParts)...)
	seen := 0
	describeCommands(a, func(name string, f *flags) {
		for _, d := range f.docs() {
			seen++
			if d.legacy {
				t.Errorf("%s --%s: \"(env %s)\" written by hand; define the flag with stringVar, intVar, durationVar or boolVar", name, d.name, d.env)
			}
			fl := f.Lookup(d.name)
			if n := strings.Count(fl.Usage, "(env "); d.env != "" && n != 1 || d.env == "" && n != 0 {
				t.Errorf("%s --%s: usage %q names an environment variable %d times, want it once as %q", name, d.name, fl.Usage, n, d.env)
			}
		}
	})
	if seen < 50 {
		t.Errorf("described %d flags in all: the commands were not described", seen)
	}
}

// TestFlagEnvironment checks a spec's env: it sets the default, a bad value
// is a usage error naming it, and the help says "(env X)".
func TestFlagEnvironment(t *testing.T) {
	r := run(context.Background(), t, map[string]string{"LEASEHOLD_LEASE_TTL": "soon"}, "run", "--embedded-kafka")
	wantFailure(t, r, 2, `LEASEHOLD_LEASE_TTL="soon": not a duration`)

	r = run(context.Background(), t, map[string]string{"LEASEHOLD_CONCURRENCY": "7", "PG_URL": "postgres://x"}, "run", "-h")
	for _, s := range []string{
		"usage: worker run [flags]",
		"-concurrency int\n    \thandlers running at once (env LEASEHOLD_CONCURRENCY) (default 7)",
		"(env PG_URL) (default \"postgres://x\")", // the demo's own flag, through WithFlags
	} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("run -h lacks %q:\n%s", s, r.stdout)
		}
	}
}

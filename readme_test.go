package leasehold_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestREADMEQuickstart copies the README's quickstart into a module of its own
// that requires this one (through a replace directive), as a newcomer would,
// runs it against the local Redis, and checks that it prints the handler's
// run once and the duplicate's replay.
func TestREADMEQuickstart(t *testing.T) {
	testkit.SkipShort(t, "the README quickstart built and run on an embedded Kafka")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	at := strings.Index(s, "## Quickstart")
	start := strings.Index(s[max(at, 0):], "```go\n")
	if at < 0 || start < 0 {
		t.Fatal("README.md has no quickstart Go block")
	}
	code := s[at+start+len("```go\n"):]
	end := strings.Index(code, "```\n")
	if end < 0 {
		t.Fatal("the README's quickstart block does not end")
	}
	code = code[:end]

	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module quickstart\n\ngo 1.26\n\nrequire github.com/leasehold/leasehold v0.0.0\n\n" +
		"replace github.com/leasehold/leasehold => " + root + "\n"
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"main.go": []byte(code), "go.mod": []byte(gomod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gocmd := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	gocmd("mod", "tidy")
	out := gocmd("run", ".")
	if n := strings.Count(out, "sending signup-"); n != 1 {
		t.Errorf("the handler ran %d times, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, `not run again; cached result "sent"`) {
		t.Errorf("no replay of the duplicate:\n%s", out)
	}
}

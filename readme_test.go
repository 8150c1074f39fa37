package leasehold_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestREADMEQuickstart runs the README's quickstart as a newcomer pastes it:
// main.go from its Go block, in a new directory, with the commands of its sh
// block, each as written. The one addition is a replace directive after `go
// mod init`, so that the module resolves to this tree rather than a release
// (and this module's go.sum, so that no checksum is fetched). It checks that
// stdout is the handler's run once and the duplicate's replay, and that every
// log line on stderr is one of the worker's own, as the README says.
func TestREADMEQuickstart(t *testing.T) {
	testkit.SkipShort(t, "the README quickstart built and run on an embedded Kafka")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	at := strings.Index(s, "## Quickstart")
	if at < 0 {
		t.Fatal("README.md has no quickstart")
	}
	s = s[at:]
	code, ok := fenced(s, "go")
	if !ok {
		t.Fatal("the README's quickstart has no Go block")
	}
	script, ok := fenced(s, "sh")
	if !ok || strings.Index(s, "```sh\n") > strings.Index(s, "```go\n") {
		t.Fatal("the README's quickstart does not say, before its code, how to run it (an sh block)")
	}

	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"main.go": []byte(code), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The budget is mostly the go commands' build of a fresh module: on a
	// loaded 2-core machine (a CI run beside a busy loop) that took more
	// than 3 minutes once; the program itself ends in seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stdout, stderr string
	gocmd := func(args ...string) {
		t.Helper()
		var o, e bytes.Buffer
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("go %s: %v\n%s%s", strings.Join(args, " "), err, o.String(), e.String())
		}
		stdout, stderr = o.String(), e.String()
	}
	last := ""
	for line := range strings.Lines(script) {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if f[0] != "go" {
			t.Fatalf("the quickstart's command %q is not a go command", line)
		}
		gocmd(f[1:]...)
		last = strings.Join(f[1:], " ")
		if strings.HasPrefix(last, "mod init") {
			gocmd("mod", "edit", "-replace", "github.com/leasehold/leasehold="+root)
		}
	}
	if !strings.HasPrefix(last, "run") {
		t.Fatalf("the quickstart's commands do not end with go run: %q", script)
	}

	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "sending signup-") ||
		!strings.Contains(lines[1], `not run again; cached result "sent"`) {
		t.Errorf("stdout is not the handler's run once and the duplicate's replay:\n%s", stdout)
	}
	own := []string{"kafka group timeouts", "worker started", "partitions assigned", "partitions revoked", "worker stopped"}
	for line := range strings.Lines(stderr) {
		if !containsAny(line, own) {
			t.Errorf("a log line that is not the worker's own: %s", line)
		}
	}
}

// fenced returns the first code block of s in language lang.
func fenced(s, lang string) (string, bool) {
	start := strings.Index(s, "```"+lang+"\n")
	if start < 0 {
		return "", false
	}
	code := s[start+len("```"+lang+"\n"):]
	end := strings.Index(code, "```\n")
	if end < 0 {
		return "", false
	}
	return code[:end], true
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

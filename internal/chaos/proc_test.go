package chaos

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func childProc(t *testing.T, extraEnv ...string) (*Proc, string) {
	t.Helper()
	dir := t.TempDir()
	ticks := filepath.Join(dir, "ticks")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proc{
		Name:    "child",
		Path:    self,
		Args:    []string{"-test.run=^$"},
		Env:     append([]string{childEnv + "=1", childTickEnv + "=" + ticks}, extraEnv...),
		LogPath: filepath.Join(dir, "child.log"),
	}
	t.Cleanup(func() { _ = p.Stop(time.Second) })
	return p, ticks
}

// waitFor polls cond every 5ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func tickCount(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

func TestProcLifecycle(t *testing.T) {
	t.Parallel()
	p, ticks := childProc(t)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Start: got %v, want ErrAlreadyRunning", err)
	}
	waitFor(t, 5*time.Second, "first ticks", func() bool { return tickCount(t, ticks) > 3 })

	// SIGSTOP: no tick is written while paused.
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if !p.Paused() {
		t.Fatal("Paused() = false after Pause")
	}
	time.Sleep(20 * time.Millisecond) // let a tick in flight land
	before := tickCount(t, ticks)
	time.Sleep(150 * time.Millisecond)
	if after := tickCount(t, ticks); after != before {
		t.Fatalf("paused child wrote %d ticks", after-before)
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "ticks after resume", func() bool { return tickCount(t, ticks) > before+3 })

	// SIGKILL: the process is gone and the exit is reported as a signal.
	pid := p.Pid()
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Fatal("Running() after Kill")
	}
	var ee *exec.ExitError
	if err := p.ExitErr(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("exit after Kill: %v, want killed by SIGKILL", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("pid %d still exists after Kill: %v", pid, err)
	}
	if err := p.Pause(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Pause of a dead process: %v, want ErrNotRunning", err)
	}

	// Restart after a kill, then a graceful stop: exit 0, both starts logged.
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if p.Pid() == pid || p.Starts() != 2 {
		t.Fatalf("restart: pid %d (old %d), starts %d", p.Pid(), pid, p.Starts())
	}
	// The child prints "ready" once its SIGTERM handler is installed.
	waitFor(t, 10*time.Second, "second start ready", func() bool {
		b, _ := os.ReadFile(p.LogPath)
		return strings.Count(string(b), "ready") >= 2
	})
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.ExitErr(); err != nil {
		t.Fatalf("graceful stop exit: %v, want clean exit", err)
	}
	log, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"start #1 of child", "start #2 of child", "ready", "terminated"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestProcStopEscalatesToKill(t *testing.T) {
	t.Parallel()
	p, ticks := childProc(t, childIgnoreTermEnv+"=1")
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "first ticks", func() bool { return tickCount(t, ticks) > 0 })
	begin := time.Now()
	if err := p.Stop(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < 200*time.Millisecond {
		t.Fatalf("Stop returned after %s, before the grace period", took)
	}
	if p.Running() {
		t.Fatal("process survived Stop")
	}
}

func TestProcStopPaused(t *testing.T) {
	t.Parallel()
	p, ticks := childProc(t)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "first ticks", func() bool { return tickCount(t, ticks) > 0 })
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.ExitErr(); err != nil {
		t.Fatalf("a paused process should be continued and exit cleanly on SIGTERM, got %v", err)
	}
}

func TestProcWait(t *testing.T) {
	t.Parallel()
	p, _ := childProc(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait on a never-started process: %v, want nil", err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a running process: %v, want deadline", err)
	}
}

func TestProcStartMissingBinary(t *testing.T) {
	t.Parallel()
	p := &Proc{Name: "nope", Path: filepath.Join(t.TempDir(), "missing"), LogPath: filepath.Join(t.TempDir(), "log")}
	if err := p.Start(); err == nil {
		t.Fatal("Start of a missing binary succeeded")
	}
	if p.Running() {
		t.Fatal("Running after failed Start")
	}
}

package spawn

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// retireThreads ends n goroutines while locked to their threads, which makes
// the runtime exit those threads: the event that fires the parent-death
// signal of any child forked on one of them.
func retireThreads(n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
		}()
	}
	wg.Wait()
}

func alive(t *testing.T, cmd *exec.Cmd) bool {
	t.Helper()
	// Signal 0 checks the process exists; a reaped or killed child fails.
	return cmd.Process.Signal(syscall.Signal(0)) == nil
}

// TestChildOutlivesRetiredThreads starts a child from a goroutine that then
// ends locked to its thread (retiring it), and retires many other threads:
// the child must live on.
func TestChildOutlivesRetiredThreads(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	started := make(chan error, 1)
	go func() {
		started <- Start(cmd)
		runtime.LockOSThread()
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Wait(cmd) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if err := <-done; err == nil {
			t.Error("sleep 60 ended cleanly")
		}
	})
	retireThreads(64)
	select {
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("child died when threads were retired: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if !alive(t, cmd) {
		t.Fatal("child not alive")
	}
}

// TestPlainStartDiesWithItsThread shows the hazard Start avoids: a child
// forked by a goroutine that then ends locked to its thread is killed.
func TestPlainStartDiesWithItsThread(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			done <- err
			return
		}
		go func() { done <- cmd.Wait() }()
		// Returning locked retires this thread, the child's parent thread.
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("sleep 60 exited cleanly")
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("a child forked on a retired thread was not killed")
	}
}

// TestKeepsSysProcAttr checks Start keeps the caller's other attributes.
func TestKeepsSysProcAttr(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = Wait(cmd) })
	pgid, err := syscall.Getpgid(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if pgid != cmd.Process.Pid {
		t.Fatalf("pgid %d, want the child's own %d", pgid, cmd.Process.Pid)
	}
	if cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL {
		t.Fatalf("Pdeathsig %v", cmd.SysProcAttr.Pdeathsig)
	}
}

func TestStartError(t *testing.T) {
	if err := Start(exec.Command("/nonexistent/leasehold-spawn-test")); err == nil {
		t.Fatal("starting a missing binary succeeded")
	}
}

// TestOnlySpawnSetsPdeathsig keeps every parent-death signal in this package:
// one set elsewhere is tied to whichever thread ran the fork.
func TestOnlySpawnSetsPdeathsig(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "vendor" || name == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path) //nolint:gosec // the repository's own files
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte("Pdeathsig:")) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	self := filepath.Join(root, "internal", "spawn", "spawn_test.go")
	if !slices.Contains(found, self) {
		t.Fatalf("the walk did not find %s's own Pdeathsig: it does not see the repository", self)
	}
	for _, f := range found {
		if f != self {
			t.Errorf("%s sets Pdeathsig: start the process with spawn.Start", f)
		}
	}
}

// TestMain checks that no spawning goroutine outlives the children: every
// test reaps what it started.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestServerEndsWithLastChild: the spawning goroutine ends when the last
// child is reaped, and a later Start begins another.
func TestServerEndsWithLastChild(t *testing.T) {
	for round := range 2 {
		a, b := exec.Command("sleep", "60"), exec.Command("sleep", "60")
		for _, c := range []*exec.Cmd{a, b} {
			if err := Start(c); err != nil {
				t.Fatal(err)
			}
		}
		_ = a.Process.Kill()
		_ = Wait(a)
		if err := goleak.Find(); err == nil {
			t.Fatalf("round %d: no spawning goroutine while a child still runs", round)
		}
		_ = b.Process.Kill()
		_ = Wait(b)
		if err := goleak.Find(); err != nil {
			t.Fatalf("round %d: after the last child: %v", round, err)
		}
	}
}

package spawn

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Pause sends SIGSTOP to pid (to its process group when group is true) and
// returns once every thread of pid is stopped. kill(2) only queues the
// signal: each thread stops when it is next scheduled, so on a busy machine a
// thread of the process can still answer a request sent right after kill
// returns. Tests that pause a server to see it not answer need the stop done.
// It gives up after timeout (a process that is not a child of this one may
// be traced or already gone).
func Pause(pid int, group bool, timeout time.Duration) error {
	target := pid
	if group {
		target = -pid
	}
	if err := syscall.Kill(target, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("spawn: SIGSTOP %d: %w", pid, err)
	}
	return WaitStopped(pid, timeout)
}

// WaitStopped waits until every thread of pid is in the stopped state
// (/proc/<pid>/task/*/stat), looking every millisecond, for up to timeout.
func WaitStopped(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		running, err := runningThreads(pid)
		if err != nil {
			return err
		}
		if running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("spawn: %d of process %d's threads still running %v after SIGSTOP", running, pid, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// runningThreads counts the threads of pid not stopped. A thread that exits
// while being read is not counted.
func runningThreads(pid int) (int, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("spawn: process %d: %w", pid, err)
	}
	n := 0
	for _, t := range tasks {
		stat, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat")) //nolint:gosec // a /proc path built from a pid and its task directory
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("spawn: process %d: %w", pid, err)
		}
		// "tid (comm) S ...": comm may hold spaces and parentheses, the
		// state follows the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) {
			return 0, fmt.Errorf("spawn: unreadable %s/%s/stat", dir, t.Name())
		}
		switch stat[i+2] {
		case 'T', 't', 'Z', 'X':
		default:
			n++
		}
	}
	return n, nil
}

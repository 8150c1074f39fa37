// Package spawn starts the child processes of tests, chaos runs and
// benchmarks (Kafka brokers, Redis servers, worker binaries) so that the
// kernel kills them if the process that started them dies without stopping
// them (a panic, a -timeout, a SIGKILL), and not before.
//
// Linux's parent-death signal (PR_SET_PDEATHSIG) fires when the thread that
// forked the child exits, not the process. The Go runtime retires a thread
// whenever a goroutine ends while locked to it (runtime.LockOSThread), and
// that goroutine may be running on any thread, including one that earlier
// forked a server from another goroutine: that server is then SIGKILLed in
// the middle of the run. So every child is started here, from one goroutine
// locked to its thread while any child it started runs. Reap a child with
// [Wait], not cmd.Wait: when the last one is reaped the goroutine ends (a
// test's leak check then finds nothing), and the next Start begins another.
package spawn

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

type request struct {
	cmd *exec.Cmd
	err chan error
}

// server is one goroutine locked to its thread and the children it forked.
type server struct {
	reqs chan request
	quit chan struct{}
}

var (
	mu   sync.Mutex
	cur  *server // nil when no child runs
	live int     // children started and not yet reaped by Wait
)

// Start starts cmd like cmd.Start, with SIGKILL as its parent-death signal
// (other SysProcAttr fields, such as Setpgid, are kept). The child lives until
// it exits, is stopped, or this process ends. Reap it with [Wait].
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	mu.Lock()
	if cur == nil {
		cur = &server{reqs: make(chan request), quit: make(chan struct{})}
		go cur.serve()
	}
	s := cur
	live++ // keeps s serving until this child is reaped
	mu.Unlock()
	r := request{cmd: cmd, err: make(chan error, 1)}
	s.reqs <- r
	err := <-r.err
	if err != nil {
		done()
	}
	return err
}

// Wait waits for a child started by [Start] to exit, like cmd.Wait, and ends
// the spawning goroutine when no other child runs.
func Wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	done()
	return err
}

// done counts a child gone; after the last, the server's thread has no child
// left to signal and may end.
func done() {
	mu.Lock()
	defer mu.Unlock()
	live--
	if live == 0 && cur != nil {
		close(cur.quit)
		cur = nil
	}
}

// serve forks children from one locked thread until told that none runs. It
// returns still locked, so the runtime retires the thread rather than hand
// it to other goroutines.
func (s *server) serve() {
	runtime.LockOSThread()
	for {
		select {
		case r := <-s.reqs:
			r.err <- r.cmd.Start()
		case <-s.quit:
			return
		}
	}
}

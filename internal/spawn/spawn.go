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
// locked to its thread for the life of the process.
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

var (
	once sync.Once
	reqs chan request
)

// Start starts cmd like cmd.Start, with SIGKILL as its parent-death signal
// (other SysProcAttr fields, such as Setpgid, are kept). The child lives until
// it exits, is stopped, or this process ends.
func Start(cmd *exec.Cmd) error {
	once.Do(func() {
		reqs = make(chan request)
		go serve()
	})
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	r := request{cmd: cmd, err: make(chan error, 1)}
	reqs <- r
	return <-r.err
}

// serve forks every child from one thread that never exits: the goroutine
// stays locked to it and never returns.
func serve() {
	runtime.LockOSThread()
	for r := range reqs {
		r.err <- r.cmd.Start()
	}
}

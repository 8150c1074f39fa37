package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/spawn"
)

// Proc supervises one child process: it starts it with its output appended to
// its own log file, and sends it the signals the fault schedule asks for.
// A Proc can be started again after it exited or was killed; every start
// appends to the same log file behind a header line.
//
// The child runs in its own process group and receives SIGKILL if the
// harness itself dies (Linux parent-death signal), so that a crashed run
// leaves no stray workers behind.
type Proc struct {
	// Name identifies the process in logs and figures.
	Name string
	// Path is the executable.
	Path string
	// Args are the arguments after the program name.
	Args []string
	// Env is added to the harness's environment.
	Env []string
	// Dir is the working directory (default: the harness's).
	Dir string
	// LogPath receives the child's stdout and stderr.
	LogPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current incarnation exited
	exitErr error
	paused  bool
	starts  int
}

// Start starts the process. It returns ErrAlreadyRunning if it is running.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.done) {
		return fmt.Errorf("%w: %s", ErrAlreadyRunning, p.Name)
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("chaos: open log of %s: %w", p.Name, err)
	}
	p.starts++
	_, _ = fmt.Fprintf(logf, "=== chaos: start #%d of %s at %s\n", p.starts, p.Name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(p.Path, p.Args...) //nolint:gosec,noctx // the harness runs the binaries it is configured with; Stop and Kill end them
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Dir = p.Dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := spawn.Start(cmd); err != nil {
		_ = logf.Close()
		return fmt.Errorf("chaos: start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.exitErr, p.paused = cmd, done, nil, false
	go func() {
		err := spawn.Wait(cmd)
		_ = logf.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Pid returns the process id of the running incarnation, or 0.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || isClosed(p.done) {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process has been started and has not exited.
func (p *Proc) Running() bool { return p.Pid() != 0 }

// Paused reports whether the process is stopped by Pause.
func (p *Proc) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused && p.cmd != nil && !isClosed(p.done)
}

// Starts returns how many times the process has been started.
func (p *Proc) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Done returns a channel closed when the current incarnation exits. It
// returns a closed channel if the process was never started.
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.done
}

// ExitErr returns the error of the last incarnation's exit (nil for a clean
// exit or while it runs).
func (p *Proc) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// Signal sends sig to the process group of the running incarnation.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || isClosed(p.done) {
		return fmt.Errorf("%w: %s", ErrNotRunning, p.Name)
	}
	var err error
	if sig == syscall.SIGSTOP {
		// Return once every thread is stopped (kill(2) only queues it).
		err = spawn.Pause(p.cmd.Process.Pid, true, 10*time.Second)
	} else {
		err = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
	if err != nil {
		if sig == syscall.SIGSTOP {
			p.paused = true // a SIGCONT is still owed
		}
		return fmt.Errorf("chaos: signal %v to %s: %w", sig, p.Name, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	}
	return nil
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Proc) Kill() error {
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-p.Done()
	return nil
}

// Pause stops the process with SIGSTOP; it keeps its sockets but runs no code.
func (p *Proc) Pause() error { return p.Signal(syscall.SIGSTOP) }

// Resume continues a paused process with SIGCONT.
func (p *Proc) Resume() error { return p.Signal(syscall.SIGCONT) }

// Stop asks the process to exit with SIGTERM (continuing it first if it is
// paused) and sends SIGKILL if it has not exited after grace. Stopping a
// process that is not running is not an error.
func (p *Proc) Stop(grace time.Duration) error {
	if !p.Running() {
		return nil
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		if errors.Is(err, ErrNotRunning) {
			return nil
		}
		return err
	}
	if p.Paused() {
		_ = p.Resume()
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.Done():
		return nil
	case <-t.C:
	}
	if err := p.Kill(); err != nil && !errors.Is(err, ErrNotRunning) {
		return err
	}
	return nil
}

// Restart stops the process (SIGTERM, then SIGKILL after grace) and starts it
// again.
func (p *Proc) Restart(grace time.Duration) error {
	if err := p.Stop(grace); err != nil {
		return err
	}
	return p.Start()
}

// Wait waits for the current incarnation to exit or ctx to end.
func (p *Proc) Wait(ctx context.Context) error {
	select {
	case <-p.Done():
		return p.ExitErr()
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

package leaseholdtest

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/jobenv"
)

// Env runs a job's handler without a worker, attempt after attempt. It is
// safe for concurrent use, but runs one attempt at a time.
type Env struct {
	mu        sync.Mutex
	cfg       config
	next      int    // number of the next attempt
	fence     uint64 // fence of the next attempt
	takeover  bool   // the next attempt takes over a lost lease
	last      []byte // the latest heartbeat details recorded (or given)
	listeners []func(*Attempt, []byte)
	running   *Attempt
}

// New returns an Env for the job that opts describe.
func New(opts ...Opt) *Env {
	var c config
	for _, o := range opts {
		o.apply(&c)
	}
	c.key = cmp.Or(c.key, "test-key")
	c.typ = cmp.Or(c.typ, "test.job")
	c.attempt = max(c.attempt, 1)
	c.fence = max(c.fence, 1)
	c.log = cmp.Or(c.log, slog.New(slog.DiscardHandler))
	c.maxRes = cmp.Or(c.maxRes, defaultMaxResult)
	return &Env{cfg: c, next: c.attempt, fence: c.fence, takeover: c.takeover, last: c.last}
}

// OnHeartbeat adds fn, which sees every heartbeat the handler records, in
// the handler's goroutine, before Heartbeat returns. It may call
// [Env.LoseLease] to take the lease away at that point.
func (e *Env) OnHeartbeat(fn func(a *Attempt, details []byte)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.listeners = append(e.listeners, fn)
}

// LoseLease takes the lease away from the running attempt, as a worker does
// when renewals fail: the job's context is cancelled with a
// *leasehold.LeaseLostError (matching leasehold.ErrLeaseLost), and its next
// heartbeats and saga steps are refused with it. The next run is a
// takeover. It does nothing when no attempt runs.
func (e *Env) LoseLease() {
	e.mu.Lock()
	a := e.running
	e.mu.Unlock()
	if a != nil {
		a.cancel(&leasehold.LeaseLostError{Key: a.job.Key, Fence: a.job.Fence(),
			Err: fmt.Errorf("%w (leaseholdtest.Env.LoseLease)", leasehold.ErrLeaseLost)})
	}
}

// Run runs h as the next attempt of the job: the first with the options'
// attempt, fence and last heartbeat; each later one with the next attempt
// number, a higher fence, and the last heartbeat details recorded so far. The
// handler's context is derived from ctx and is the job's
// (leasehold.Job.Context). A panic in h is returned as an error, as the
// worker does, and so is a result over the bound ([WithMaxResult]), which
// the worker's commit refuses. Run does not compensate the attempt's steps: call
// [Attempt.Compensate] where the worker would (see [Attempt.Outcome]).
func (e *Env) Run(ctx context.Context, h leasehold.Handler) *Attempt {
	jctx, a := e.begin(ctx)
	defer a.cancel(nil)
	res, err := call(jctx, a.job, h)
	a.finish(jctx, res, err)
	e.end(a)
	return a
}

// begin builds the next attempt, with its job's context, and marks it
// running.
func (e *Env) begin(ctx context.Context) (context.Context, *Attempt) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running != nil {
		panic("leaseholdtest: Env.Run called while an attempt runs")
	}
	jctx, cancel := context.WithCancelCause(ctx)
	a := &Attempt{env: e, cancel: cancel}
	a.job = jobenv.NewJob(jobenv.Spec{
		Key: e.cfg.key, Type: e.cfg.typ, Payload: e.cfg.payload, Headers: e.cfg.headers,
		Attempt: e.next, Takeover: e.takeover, Fence: e.fence, Last: e.last,
		Ctx: jctx, Env: (*attemptEnv)(a),
	}).(*leasehold.Job)
	e.running = a
	return jctx, a
}

// end advances the Env past a.
func (e *Env) end(a *Attempt) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running = nil
	e.next++
	e.fence++
	e.takeover = a.Outcome() == LeaseLost
	if hb := a.LastHeartbeat(); hb != nil {
		e.last = hb
	}
}

func call(ctx context.Context, job *leasehold.Job, h leasehold.Handler) (res []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("leasehold: handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return h(ctx, job)
}

func (e *Env) heartbeatListeners() []func(*Attempt, []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.listeners)
}

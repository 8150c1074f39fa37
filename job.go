package leasehold

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/internal/jobenv"
	"github.com/leasehold/leasehold/internal/jobtrace"
)

// MaxHeartbeatDetails bounds the size of the details a heartbeat stores.
const MaxHeartbeatDetails = 64 << 10

// Job is one delivery of a job to a handler. The exported fields describe the
// record; they must not be modified by handlers.
type Job struct {
	// Key is the idempotency key: every record with this key has its effect
	// once.
	Key string
	// Type is the registered job type.
	Type string
	// Payload is the record value.
	Payload []byte
	// Headers are the record headers other than the ones leasehold sets.
	Headers map[string]string
	// Attempt counts the runs of this key, starting at 1; it survives worker
	// crashes and takeovers because the idempotency record keeps it.
	Attempt int
	// Takeover is true when this run took the key over from an owner whose
	// lease expired.
	Takeover bool
	// Topic, Partition and Offset locate the record.
	Topic     string
	Partition int32
	Offset    int64

	fence uint64
	last  []byte
	ctx   context.Context // the job context (lease-bound)
	c     *claim
	d     *delivery
	w     *Worker
	act   *activeJob
	hb    heartbeats

	committing bool // its run slot was traded for a commit slot (pool.go)

	stopBridge func() bool // a store without leases: stops the bridge from its context (runningJob.watch)

	jmu     sync.Mutex
	journal *compensation.Journal // created by the first Step

	tj *jobtrace.Job // the attempt's span

	env jobenv.Env // set instead of w for a job built by package leaseholdtest
}

// Fence returns the job's fencing token: strictly greater than the fence of
// every earlier owner of the key. Pass it to downstream writes (see package
// fence) so that a zombie's late write is rejected.
func (j *Job) Fence() uint64 { return j.fence }

// LastHeartbeat returns the details the previous attempt stored with
// [Job.Heartbeat], or nil on a first attempt. Handlers resume from it.
func (j *Job) LastHeartbeat() []byte { return j.last }

// Context returns the job's context: cancelled with cause [ErrLeaseLost] when
// the lease is lost, and with [ErrShutdown] when a shutdown's drain timeout
// passes. It is the context the handler receives. When the attempt is over
// (its end recorded and reported), it ends with [context.Canceled] unless
// one of those ended it first.
func (j *Job) Context() context.Context {
	if j.ctx == nil {
		return context.Background() // a Job built by hand
	}
	return j.ctx
}

// Heartbeat records progress details, the checkpoint the next attempt reads
// back with [Job.LastHeartbeat]. Calls are throttled like Temporal's: the
// first is stored at once, later ones at most once per throttle interval
// ([WithHeartbeatThrottle]) with the latest details winning, written with
// the next lease renewal (batched for all the worker's jobs), and pending
// details are flushed when the handler fails. Details above
// [MaxHeartbeatDetails] are refused. It returns an error matching
// [ErrLeaseLost] once the lease is lost; the lease itself is renewed
// independently of heartbeats. On a Job not run by a worker (nor built by
// package leaseholdtest) it returns [ErrNoWorker].
func (j *Job) Heartbeat(ctx context.Context, details []byte) error {
	if j.w == nil && j.env == nil {
		return ErrNoWorker
	}
	if len(details) > MaxHeartbeatDetails {
		return fmt.Errorf("leasehold: heartbeat details of %d bytes exceed %d", len(details), MaxHeartbeatDetails)
	}
	//nolint:contextcheck // the job's own context carries the lease-lost cause
	if err := context.Cause(j.ctx); err != nil && errors.Is(err, ErrLeaseLost) {
		return err
	}
	d := append([]byte(nil), details...)
	if j.env != nil {
		return j.env.Heartbeat(ctx, d)
	}
	if j.act != nil {
		j.act.progress.Store(&d)
	}
	return j.hb.record(ctx, j, d)
}

// Step runs one saga step (requires [WithCompensation]): it journals the
// intent, the compensation handler undo (registered by name in the
// compensation registry) with args encoded as JSON, while the job's lease is
// held; then it runs do; then it marks the step done. If the intent cannot be
// journaled (the lease is lost) do does not run. If the attempt later fails,
// loses its lease or has its commit rejected, the worker runs the
// compensations of its steps in reverse order, each once, and a takeover of
// the key compensates the steps of older fences before the job runs again.
// Undo handlers must accept steps whose effect never happened (in doubt) and
// be idempotent (see compensation.StepInfo.IdempotencyKey).
//
// Deprecated: use [StepWith], which takes the typed handle that registering
// the handler returned (compensation.RegisterUndo, compensation.MustRegister):
// with a name, arguments of another type than the handler's decode into zero
// values, and an unregistered name is refused only when the step runs.
func (j *Job) Step(ctx context.Context, name string, do func(context.Context) error, undo string, args any) error {
	return j.step(ctx, name, do, undo, args)
}

func (j *Job) step(ctx context.Context, name string, do func(context.Context) error, undo string, args any) error {
	if j.env != nil {
		if j.env.Registry() == nil {
			return ErrNoCompensation
		}
		return j.env.Step(ctx, name, do, undo, args)
	}
	jr, err := j.journalFor()
	if err != nil {
		return err
	}
	return jr.Step(ctx, name, do, undo, args)
}

func (j *Job) journalFor() (*compensation.Journal, error) {
	if j.w == nil || j.w.comp == nil || j.c == nil || j.c.run == nil || j.c.run.Lease() == nil {
		return nil, ErrNoCompensation
	}
	j.jmu.Lock()
	defer j.jmu.Unlock()
	if j.journal == nil {
		j.journal = j.w.comp.Journal(j.c.run.Lease())
	}
	return j.journal, nil
}

// info describes the job's record and claim.
func (j *Job) info() ClaimInfo { return claimInfo(j.d, j.c) }

// stepped returns the journal if the job ran any step.
func (j *Job) stepped() *compensation.Journal {
	j.jmu.Lock()
	defer j.jmu.Unlock()
	return j.journal
}

// heartbeats throttles heartbeat writes for one job. With passThrough every
// call goes to the store, which keeps the latest details for the lease
// renewer's next round: the renewals throttle them, and no job holds a timer
// of its own (10,000 jobs heartbeating would wake 10,000 timers). With
// rounds (a throttle longer than the renew interval), details held back by
// the throttle wait in rounds, whose renew-round hook hands them to the store
// once the throttle has passed; only a throttle shorter than the renew
// interval holds them on a timer of the job's own.
type heartbeats struct {
	mu          sync.Mutex
	throttle    time.Duration
	passThrough bool
	rounds      *heartbeatRounds
	lastSent    time.Time
	pending     []byte
	dirty       bool
	timer       *time.Timer
	queued      bool // in rounds
	closed      bool
	err         error // last write error
}

func (h *heartbeats) record(ctx context.Context, j *Job, d []byte) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.pending, h.dirty = d, true
	wait := h.throttle - time.Since(h.lastSent)
	if h.passThrough || h.lastSent.IsZero() || wait <= 0 {
		h.mu.Unlock()
		return h.flush(ctx, j)
	}
	switch {
	case h.rounds != nil:
		if !h.queued {
			h.queued = true
			h.rounds.add(j)
		}
	case h.timer == nil:
		h.timer = time.AfterFunc(wait, func() { _ = h.flush(j.ctx, j) })
	}
	err := h.err
	h.mu.Unlock()
	return err
}

// takeDue reports whether held-back details wait and their throttle
// interval has passed at now; then, or when nothing waits any more, it takes
// j out of rounds. A job is in rounds exactly while queued (both change
// under h.mu; the lock order is h.mu, then rounds.mu).
func (h *heartbeats) takeDue(j *Job, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.queued {
		return false
	}
	due := !h.closed && h.dirty && now.Sub(h.lastSent) >= h.throttle
	if due || h.closed || !h.dirty {
		h.queued = false
		h.rounds.remove(j)
	}
	return due
}

// leaveRounds takes j out of rounds, if it is there, when the job ends.
func (h *heartbeats) leaveRounds(j *Job) {
	if h.rounds == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.queued {
		h.queued = false
		h.rounds.remove(j)
	}
}

// heartbeatRounds holds the jobs whose heartbeat details wait for their
// throttle interval (at most one entry a running job).
type heartbeatRounds struct {
	mu   sync.Mutex
	jobs map[*Job]struct{}
}

func (r *heartbeatRounds) add(j *Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs == nil {
		r.jobs = make(map[*Job]struct{})
	}
	r.jobs[j] = struct{}{}
}

func (r *heartbeatRounds) remove(j *Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.jobs, j)
}

// flushDue is the renewer's round hook: it hands the store the details whose
// throttle interval has passed; the store's own hook, next, writes them in
// this round's batch.
func (r *heartbeatRounds) flushDue(context.Context) {
	r.mu.Lock()
	jobs := make([]*Job, 0, len(r.jobs))
	for j := range r.jobs {
		jobs = append(jobs, j)
	}
	r.mu.Unlock()
	now := time.Now()
	for _, j := range jobs {
		if j.hb.takeDue(j, now) {
			_ = j.hb.flush(j.ctx, j) //nolint:contextcheck // the details belong to the job: written under its context, not the round's
		}
	}
}

// flush writes pending details, if any.
func (h *heartbeats) flush(ctx context.Context, j *Job) error {
	h.mu.Lock()
	h.timer = nil
	if !h.dirty {
		h.mu.Unlock()
		return nil
	}
	d := h.pending
	h.dirty = false
	h.lastSent = time.Now()
	h.mu.Unlock()

	err := j.c.run.SaveDetails(context.WithoutCancel(ctx), d)
	h.mu.Lock()
	h.err = err
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		// Keep the details for the next flush unless newer ones arrived.
		if !h.dirty {
			h.pending, h.dirty = d, true
		}
	}
	h.mu.Unlock()
	if err == nil {
		j.w.obs.heartbeated(ctx, j, d)
	}
	return err
}

// stop cancels a scheduled flush; with flushPending it writes pending details
// first (on failure, so that the next attempt resumes from them).
func (h *heartbeats) stop(j *Job, flushPending bool) {
	h.mu.Lock()
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	h.mu.Unlock()
	h.leaveRounds(j)
	if flushPending {
		_ = h.flush(context.Background(), j)
	}
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
}

package leasehold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/leasehold/leasehold/internal/jobtrace"
	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/retry"
	"github.com/leasehold/leasehold/outcome"
)

// Running a claimed record: run, then report (River's job executor shape).
// runJob builds the job, execute runs the handler and the commit and returns
// one attemptEnd value, and settle (settle.go) acts on it.

// runJob runs the handler for a claimed record and settles its end.
func (w *Worker) runJob(d *delivery, c *claim) {
	defer w.freeSlot(w.takeSlot(d))
	job := w.newJob(d, c)
	defer w.releaseJob(job)
	defer w.leavePool(job)
	w.settle(job, w.execute(job))
}

// runningJob is a job and its entry in Running, allocated together. It
// watches the job's lease (leasing.Watch): a lost lease cancels the job's
// context with a LeaseLostError, an operator's cancel with a CancelledError.
type runningJob struct {
	job Job
	act activeJob
}

// watch ties the job's context to its lease. A store without leases (the
// tests' fake) gives only a context: it is bridged with context.AfterFunc.
func (rj *runningJob) watch() {
	job := &rj.job
	if l := job.c.run.Lease(); l != nil {
		leasing.Watch(l, rj)
		return
	}
	lctx := job.c.run.Context()
	job.stopBridge = context.AfterFunc(lctx, func() { rj.LeaseEnded(context.Cause(lctx)) })
}

// unwatch stops the lease's news from reaching the job's context.
func (j *Job) unwatch() {
	if l := j.c.run.Lease(); l != nil {
		leasing.Unwatch(l)
	}
	if j.stopBridge != nil {
		j.stopBridge()
	}
}

// LeaseEnded cancels the job's context with a LeaseLostError: its lease was
// lost, or its Manager closed (leasing.Watcher). A lease ended by the
// attempt's own recorded end (leasing.ErrReleased: the store wrote the
// completion, the failure or the release for a retry, which it does only
// after the handler returned) is not a loss: the context stays live until
// releaseJob ends it with context.Canceled, after the end was reported, so
// that OnDone's context can still be used and no code reading the context
// later finds a lease lost that was not.
func (rj *runningJob) LeaseEnded(cause error) {
	if errors.Is(cause, leasing.ErrReleased) {
		return
	}
	rj.act.cancel(&LeaseLostError{Key: rj.job.Key, Fence: rj.job.fence, Err: cause})
}

// LeaseCancelled cancels the job's context: an operator cancelled the
// attempt (leasing.Watcher).
func (rj *runningJob) LeaseCancelled() {
	rj.act.cancel(&CancelledError{Key: rj.job.Key, Fence: rj.job.fence})
}

// newJob builds the job of a claim: its context is cancelled with a
// LeaseLostError when the lease is lost, and it is listed in Running until
// releaseJob.
func (w *Worker) newJob(d *delivery, c *claim) *Job {
	// w.baseCtx: the start context's values, never cancelled (the
	// dispatcher's stop does not end a running job).
	jctx, cancel := context.WithCancelCause(traceContext(w.baseCtx, w.baseSpan, d))
	rj := &runningJob{act: activeJob{cancel: cancel, started: time.Now()}}
	job := &rj.job
	*job = Job{
		Key: d.key, Type: d.typ, Payload: d.rec.Value, Headers: userHeaders(d.rec.Headers),
		Attempt: max(c.Attempt, 1), Takeover: c.Outcome == OutcomeTakeover,
		Topic: d.rec.Topic, Partition: d.rec.Partition, Offset: d.rec.Offset,
		fence: c.Fence, last: c.LastBeat, ctx: jctx, c: c, d: d, w: w, tj: d.tj,
		act: &rj.act,
	}
	job.hb.throttle, job.hb.passThrough, job.hb.rounds = w.cfg.hbThrottle, w.hbRideRenewals, w.hbRounds
	rj.watch()
	if c.LastBeat != nil {
		lb := c.LastBeat
		job.act.progress.Store(&lb)
	}
	w.activeMu.Lock()
	w.active[job] = job.act
	w.activeMu.Unlock()
	return job
}

// releaseJob takes job out of Running and ends its context.
func (w *Worker) releaseJob(job *Job) {
	w.activeMu.Lock()
	delete(w.active, job)
	w.activeMu.Unlock()
	job.unwatch()
	job.act.cancel(nil)
	job.hb.leaveRounds(job)
}

// execute runs job's handler and, when it succeeds with the lease held,
// commits its result. It returns how the attempt ended; nothing is recorded
// for a failure yet (settle does it).
func (w *Worker) execute(job *Job) attemptEnd {
	reg := w.handlers[job.Type]
	if job.Takeover {
		w.compensatePrevious(job)
	}
	if job.c.Cancelled {
		// An operator cancelled the attempt before this one, which ended
		// before it recorded the cancel: the cancel covers this attempt.
		job.act.cancel(&CancelledError{Key: job.Key, Fence: job.fence})
	}
	if err := context.Cause(job.ctx); err != nil {
		// The lease was lost before the handler could start (a slow
		// takeover compensation, a starved worker): do not start it.
		return w.classify(job, reg, err)
	}
	w.obs.started(job.ctx, job)
	res, err := w.runHandler(job, reg)
	w.handlerReturned(job)
	if err == nil && job.ctx.Err() == nil {
		job.hb.stop(job, false)
		if err = w.commit(job, res); err == nil {
			return attemptEnd{kind: endCompleted, job: job, info: job.info(), result: res}
		}
	}
	return w.classify(job, reg, err)
}

// compensatePrevious undoes the saga steps of the earlier owners of a key
// taken over, whose commit never landed, before the job runs again.
func (w *Worker) compensatePrevious(job *Job) {
	l := job.c.run.Lease()
	if w.comp == nil || l == nil {
		return
	}
	if err := w.comp.CompensatePrevious(job.ctx, l.Name(), job.fence); err != nil {
		w.log.Warn("compensating the previous attempts failed", slog.String("key", job.Key), slog.Any("err", err))
	}
}

// runHandler calls the handler under its span and timeout. An attempt past
// the job type's limit does not run: an earlier owner used the last attempt,
// dead-lettered the record and died before recording the failure.
func (w *Worker) runHandler(job *Job, reg *registration) (res []byte, err error) {
	ctx, span := startChild(job.ctx, job, (*jobtrace.Job).StartHandler)
	defer func() { span.End(spanOutcome(err, outcome.OK, outcome.Error), err) }()
	if job.Attempt > reg.cfg.maxAttempts {
		return nil, fmt.Errorf("%w: attempt %d of %d", ErrAttemptsExhausted, job.Attempt, reg.cfg.maxAttempts)
	}
	if reg.cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, reg.cfg.timeout)
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("leasehold: handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return reg.handler(ctx, job)
}

// commit seals the attempt's saga journal, if it ran steps, commits the
// result fenced, and closes the journal. The seal, like the commit, is
// retried while Redis is unreachable and the lease holds (sealing twice is
// harmless): failing it would compensate steps whose job succeeded. A commit
// refused as a lease loss that in fact landed (its answer was lost) is a
// success.
func (w *Worker) commit(job *Job, res []byte) (err error) {
	jr := job.stepped()
	if jr != nil {
		if err := w.retryStore(job.ctx, jr.Seal); err != nil {
			return err
		}
	}
	ctx, span := startChild(job.ctx, job, (*jobtrace.Job).StartCommit)
	err = w.retryStore(ctx, func(ctx context.Context) error { return job.c.run.Complete(ctx, res) })
	if err != nil && errors.Is(err, ErrLeaseLost) && w.commitLanded(job) {
		err = nil
	}
	span.End(spanOutcome(err, outcome.Committed, outcome.Rejected), err)
	if err == nil && jr != nil {
		if cerr := jr.Close(context.WithoutCancel(job.ctx)); cerr != nil {
			w.log.Warn("closing the saga journal failed; the sweep will see it sealed",
				slog.String("key", job.Key), slog.Any("err", cerr))
		}
	}
	return err
}

// spanOutcome is ok's name for a nil err, failed's otherwise.
func spanOutcome(err error, ok, failed outcome.Name) string {
	if err != nil {
		return string(failed)
	}
	return string(ok)
}

// classify tells how an attempt that did not complete ended: its lease was
// lost, it failed for good (a permanent error, a result too large, the
// last attempt used), or it is retried after a backoff.
func (w *Worker) classify(job *Job, reg *registration, herr error) attemptEnd {
	e := attemptEnd{job: job, info: job.info(), err: herr,
		delay: retry.Delay(job.Attempt, reg.cfg.backoffMin, reg.cfg.backoffMax)}
	if cause := context.Cause(job.ctx); errors.Is(cause, ErrCancelled) {
		e.kind, e.err = endCancelled, cause
		return e
	}
	if cause := context.Cause(job.ctx); cause != nil && errors.Is(cause, ErrLeaseLost) || errors.Is(herr, ErrLeaseLost) {
		e.kind, e.err = endLeaseLost, cause
		if cause == nil {
			e.err = &LeaseLostError{Key: job.Key, Fence: job.fence, Err: herr}
		}
		return e
	}
	tooLarge := errors.Is(herr, ErrResultTooLarge)
	undecodable := errors.Is(herr, ErrUndecodable)
	terminal := tooLarge || undecodable || errors.Is(herr, ErrPermanent) || (reg.cfg.retryable != nil && !reg.cfg.retryable(herr))
	switch {
	case tooLarge:
		e.kind, e.reason, e.dlqErr = endFailed, ReasonResultTooLarge, herr
	case undecodable:
		e.kind, e.reason, e.dlqErr = endFailed, ReasonUndecodable, herr
	case terminal:
		e.kind, e.reason, e.dlqErr = endFailed, ReasonPermanent, herr
	case job.Attempt >= reg.cfg.maxAttempts || w.lastDelivery(job.d):
		e.kind, e.reason = endFailed, ReasonAttemptsExceeded
		e.dlqErr = fmt.Errorf("%w after %d attempts: %w", ErrAttemptsExhausted, job.Attempt, herr)
	default:
		e.kind = endRetry
		var ra *RetryAfterError
		if errors.As(herr, &ra) {
			e.delay = ra.Delay
		}
	}
	return e
}

// commitLanded settles a commit that ended in a lease loss. The loss may
// have been seen after the commit landed: the complete script deletes the
// lease key in the step that writes the record, so when its answer is lost
// (a cut connection, a Redis restart after the write), the next renewal finds
// the key gone, or the local deadline passes, and the lease is reported lost.
// The record tells: COMPLETED under the job's fence means the commit landed
// and the job succeeded. Redis is asked for up to one lease TTL; when it does
// not answer, the loss stands. Either way nothing is undone twice: the saga
// journal was sealed before the commit, and the compensation of a sealed
// journal waits for the sweep, which settles it against the record.
func (w *Worker) commitLanded(job *Job) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(job.ctx), job.c.run.TTL())
	defer cancel()
	for attempt := 1; ; attempt++ {
		landed, err := job.c.run.Committed(ctx)
		switch {
		case err == nil:
			if landed {
				w.log.Info("commit landed though its answer was lost", slog.String("key", job.Key), slog.Uint64("fence", job.fence))
			}
			return landed
		case !errors.Is(err, ErrUnavailable) || !retry.Sleep(ctx, retry.Delay(attempt, w.cfg.probeMin, w.cfg.probeMax)):
			w.log.Warn("could not learn whether a commit landed", slog.String("key", job.Key),
				slog.Uint64("fence", job.fence), slog.Any("err", err))
			return false
		}
	}
}

// retryStore runs a fenced store write, retrying while Redis is unreachable
// until it succeeds or the job's lease is lost (the lease manager cancels the
// job at the local deadline even when Redis cannot be reached).
func (w *Worker) retryStore(jctx context.Context, f func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := f(context.WithoutCancel(jctx))
		if err == nil || !errors.Is(err, ErrUnavailable) {
			return err
		}
		if !retry.Sleep(jctx, retry.Delay(attempt, w.cfg.probeMin, w.cfg.probeMax)) {
			if cause := context.Cause(jctx); cause != nil {
				return cause
			}
			return err
		}
	}
}

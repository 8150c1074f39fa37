package leasehold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/lease"
)

// maxPollWait bounds one poll, so that parked records come due on time.
const maxPollWait = 250 * time.Millisecond

// loop is the dispatcher: it reserves pool slots, gathers parked records
// that are due and freshly polled ones, claims them in one batch, and starts
// a handler for every key it acquired.
func (w *Worker) loop() {
	defer close(w.loopDone)
	for {
		if err := w.sem.Acquire(w.stopCtx, 1); err != nil {
			return
		}
		n := 1
		for n < w.cfg.concurrency && w.sem.TryAcquire(1) {
			n++
		}
		batch, stop := w.gather(n)
		if stop {
			w.sem.Release(int64(n))
			return
		}
		used := w.dispatch(batch)
		w.sem.Release(int64(n - used))
	}
}

// gather returns up to n deliveries to claim: due parked ones first, then
// polled ones. stop is true when the worker is shutting down.
func (w *Worker) gather(n int) (batch []*delivery, stop bool) {
	for {
		if w.stopCtx.Err() != nil {
			return nil, true
		}
		batch = w.sched.takeDue(n, time.Now())
		if len(batch) == n {
			return batch, false
		}
		wait := maxPollWait
		if len(batch) > 0 {
			wait = time.Millisecond // take what is buffered, do not wait
		} else if due := w.sched.nextDue(); !due.IsZero() {
			wait = min(wait, max(time.Until(due), time.Millisecond))
		}
		pctx, cancel := context.WithTimeout(w.stopCtx, wait)
		w.pollMu.Lock()
		w.pollCancel = cancel
		w.pollMu.Unlock()
		fetches := w.cl.PollRecords(pctx, n-len(batch))
		w.pollMu.Lock()
		w.pollCancel = nil
		w.pollMu.Unlock()
		cancel()
		if fetches.IsClientClosed() {
			w.cl.AllowRebalance()
			return batch, true
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			w.log.Warn("fetch error", slog.String("topic", topic), slog.Int("partition", int(p)), slog.Any("err", err))
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if d := w.accept(r); d != nil {
				batch = append(batch, d)
			}
		})
		w.offs.highWatermarks(fetches)
		// Polled records are tracked: rebalances may proceed.
		w.cl.AllowRebalance()
		if len(batch) > 0 {
			return batch, false
		}
	}
}

// wakePoll interrupts a poll that waits, so that a newly due record is
// claimed without waiting for the poll timeout.
func (w *Worker) wakePoll() {
	w.pollMu.Lock()
	defer w.pollMu.Unlock()
	if w.pollCancel != nil {
		w.pollCancel()
	}
}

// accept tracks a polled record and validates it. It returns nil for a
// record that is a re-fetch, queued behind its ordering key, or poison (sent
// to the dead-letter topic).
func (w *Worker) accept(r *kgo.Record) *delivery {
	t, fresh := w.offs.track(r)
	if !fresh {
		return nil
	}
	d := &delivery{rec: r, tracker: t}
	d.key = string(headerValue(r.Headers, HeaderKey))
	d.typ = string(headerValue(r.Headers, HeaderType))
	d.orderKey = string(r.Key)
	if d.orderKey == "" {
		d.orderKey = d.key
	}
	var reason string
	var cause error
	switch {
	case d.key == "":
		reason, cause = ReasonMissingKey, fmt.Errorf("%w: no %s header", ErrInvalidKey, HeaderKey)
	case ValidateKey(d.key) != nil:
		reason, cause = ReasonInvalidKey, ValidateKey(d.key)
	case ValidateType(d.typ) != nil:
		reason, cause = ReasonInvalidType, ValidateType(d.typ)
	case w.handlers[d.typ] == nil:
		reason, cause = ReasonUnknownType, fmt.Errorf("%w: %q", ErrUnknownType, d.typ)
	case len(r.Value) > w.cfg.maxPayload:
		reason, cause = ReasonPayloadTooLarge, fmt.Errorf("%w: %d bytes > %d", ErrPayloadTooLarge, len(r.Value), w.cfg.maxPayload)
	}
	if reason != "" {
		if len(d.key) > MaxKeyLen || ValidateKey(d.key) != nil {
			d.key = "" // never log or label an invalid key
		}
		w.deadLetter(d, reason, cause)
		return nil
	}
	if !w.sched.admit(d) {
		return nil
	}
	return d
}

// dispatch claims a batch and acts on every outcome. It returns how many
// pool slots it used for handlers.
func (w *Worker) dispatch(batch []*delivery) int {
	// Parked records of partitions revoked meanwhile belong to the new owner.
	live := batch[:0]
	for _, d := range batch {
		if w.offs.alive(d.tracker) {
			live = append(live, d)
		} else {
			w.traceEnd(d, "revoked", nil)
			w.sched.finished(d)
		}
	}
	batch = live
	if len(batch) == 0 {
		return 0
	}
	reqs := make([]claimRequest, len(batch))
	for i, d := range batch {
		reqs[i] = claimRequest{Key: d.key, Type: d.typ, Payload: d.rec.Value, TTL: w.handlers[d.typ].cfg.leaseTTL}
	}
	claimStart := time.Now()
	claims, err := w.store.ClaimBatch(w.baseCtx, reqs)
	if err != nil {
		now := time.Now()
		for _, d := range batch {
			w.sched.park(d, now)
		}
		if w.stopCtx.Err() != nil {
			return 0
		}
		if errors.Is(err, ErrUnavailable) {
			w.failClosed(err)
		} else {
			w.log.Error("claim batch failed", slog.Any("err", err))
			sleepCtx(w.stopCtx, w.cfg.probeMin)
		}
		return 0
	}
	used := 0
	var unavailable error
	for i, d := range batch {
		c := &claims[i]
		info := d.info()
		info.Outcome, info.Fence, info.Attempt = c.Outcome, c.Fence, c.Attempt
		w.traceClaim(d, claimStart, c)
		if c.Err != nil && c.Outcome == OutcomeUndecodable {
			w.stats.claimed[OutcomeUndecodable].Add(1)
			w.deadLetter(d, ReasonUndecodable, c.Err)
			continue
		}
		if c.Err != nil {
			if errors.Is(c.Err, ErrUnavailable) {
				unavailable = c.Err
				w.sched.park(d, time.Now())
				continue
			}
			// Errors that belong to this record and do not pass with time:
			// retrying would hold the partition's commits back for ever.
			if reason := permanentClaimReason(c.Err); reason != "" {
				w.deadLetter(d, reason, c.Err)
				continue
			}
			d.held++
			delay := backoff(d.held, w.cfg.heldMin, w.cfg.heldMax)
			w.log.Warn("claim failed", slog.String("key", d.key), slog.Any("err", c.Err))
			w.hooks.retry(w.stopCtx, info, delay, c.Err)
			w.sched.park(d, time.Now().Add(delay))
			continue
		}
		if c.Outcome >= OutcomeAcquired && c.Outcome <= OutcomeUndecodable {
			w.stats.claimed[c.Outcome].Add(1)
		}
		w.hooks.claim(w.stopCtx, info)
		switch c.Outcome {
		case OutcomeAcquired, OutcomeTakeover:
			used++
			d.held = 0
			w.running.Add(1)
			go func() {
				defer w.running.Done()
				defer w.sem.Release(1)
				w.runJob(d, c)
			}()
		case OutcomeHeld:
			d.held++
			delay := backoff(d.held, w.cfg.heldMin, w.cfg.heldMax)
			if c.Remaining > 0 && c.Remaining < delay {
				delay = max(c.Remaining, w.cfg.heldMin)
			}
			w.hooks.retry(w.stopCtx, info, delay, nil)
			w.sched.park(d, time.Now().Add(delay))
		case OutcomeDuplicate:
			w.stats.replayed.Add(1)
			w.hooks.replay(w.stopCtx, info, c.Result, c.Failure)
			w.traceEnd(d, "duplicate", nil)
			w.finish(d)
		case OutcomeMismatch:
			w.deadLetter(d, ReasonMismatch, ErrFingerprintMismatch)
		default:
			w.log.Error("unknown claim outcome", slog.String("key", d.key), slog.Int("outcome", int(c.Outcome)))
			w.sched.park(d, time.Now().Add(w.cfg.heldMax))
		}
	}
	if unavailable != nil {
		w.failClosed(unavailable)
	}
	return used
}

// permanentClaimReason returns the dead-letter reason for a per-record claim
// error that no retry can clear, or "" for an error worth retrying.
func permanentClaimReason(err error) string {
	switch {
	case errors.Is(err, ErrCorruptRecord):
		return ReasonCorruptRecord
	case errors.Is(err, ErrInvalidKey):
		return ReasonInvalidKey
	}
	return ""
}

// failClosed pauses fetching while Redis is unreachable and probes it with
// backoff until it answers (or the worker stops), then resumes.
func (w *Worker) failClosed(cause error) {
	start := time.Now()
	w.paused.Store(true)
	w.stats.pauses.Add(1)
	w.cl.PauseFetchTopics(w.cfg.topics...)
	w.log.Warn("redis unreachable: fetching paused", slog.Any("err", cause))
	w.hooks.pause(cause)
	for attempt := 1; ; attempt++ {
		if !sleepCtx(w.stopCtx, backoff(attempt, w.cfg.probeMin, w.cfg.probeMax)) {
			return // shutting down: stay paused
		}
		pctx, cancel := context.WithTimeout(w.stopCtx, time.Second)
		err := w.store.Ping(pctx)
		cancel()
		if err == nil {
			break
		}
	}
	w.cl.ResumeFetchTopics(w.cfg.topics...)
	w.paused.Store(false)
	paused := time.Since(start)
	w.log.Info("redis answers again: fetching resumed", slog.Duration("paused", paused))
	w.hooks.resume(paused)
}

// runJob runs the handler for a claimed record and records its outcome.
func (w *Worker) runJob(d *delivery, c *claim) {
	reg := w.handlers[d.typ]
	jctx, cancel := context.WithCancelCause(traceContext(context.WithoutCancel(w.stopCtx), d))
	defer cancel(nil)
	stopBridge := context.AfterFunc(c.Context, func() {
		cancel(&LeaseLostError{Key: d.key, Fence: c.Fence, Err: context.Cause(c.Context)})
	})
	defer stopBridge()

	job := &Job{
		Key: d.key, Type: d.typ, Payload: d.rec.Value, Headers: userHeaders(d.rec.Headers),
		Attempt: max(c.Attempt, 1), Takeover: c.Outcome == OutcomeTakeover,
		Topic: d.rec.Topic, Partition: d.rec.Partition, Offset: d.rec.Offset,
		fence: c.Fence, last: c.LastHeartbeat, ctx: jctx, c: c, w: w, tj: d.tj,
	}
	job.hb.throttle = w.cfg.hbThrottle
	a := &activeJob{cancel: cancel, started: time.Now()}
	if c.LastHeartbeat != nil {
		lh := c.LastHeartbeat
		a.progress.Store(&lh)
	}
	job.act = a
	w.activeMu.Lock()
	w.active[job] = a
	w.activeMu.Unlock()
	defer func() {
		w.activeMu.Lock()
		delete(w.active, job)
		w.activeMu.Unlock()
	}()

	if job.Takeover && w.comp != nil && c.Lease != nil {
		// The previous owner's commit never landed: undo its steps first.
		if err := w.comp.CompensatePrevious(jctx, c.Lease.Name(), c.Fence); err != nil {
			w.log.Warn("compensating the previous attempts failed", slog.String("key", d.key), slog.Any("err", err))
		}
	}
	w.stats.started.Add(1)
	w.hooks.start(jctx, job)
	hctx, hspan := w.traceHandler(jctx, d)
	if reg.cfg.timeout > 0 {
		var hcancel context.CancelFunc
		hctx, hcancel = context.WithTimeout(hctx, reg.cfg.timeout)
		defer hcancel()
	}
	var res []byte
	var herr error
	if job.Attempt > reg.cfg.maxAttempts {
		// An earlier owner used the last attempt, dead-lettered the record
		// and died before recording the failure: do not run it again.
		herr = fmt.Errorf("%w: attempt %d of %d", ErrAttemptsExhausted, job.Attempt, reg.cfg.maxAttempts)
	} else {
		res, herr = callHandler(hctx, reg.handler, job)
	}
	if herr != nil {
		hspan.End("error", herr)
	} else {
		hspan.End("ok", nil)
	}

	if herr == nil && jctx.Err() == nil {
		job.hb.stop(job, false)
		jr := job.stepped()
		var err error
		if jr != nil {
			err = asLeaseLost(d.key, c.Fence, jr.Seal(jctx))
		}
		if err == nil {
			cctx, cspan := w.traceCommit(jctx, d)
			err = w.retryStore(cctx, func(ctx context.Context) error { return w.store.Complete(ctx, c, res) })
			if err != nil && errors.Is(err, ErrLeaseLost) && w.commitLanded(jctx, d.key, c) {
				err = nil
			}
			if err != nil {
				cspan.End("rejected", err)
			} else {
				cspan.End("committed", nil)
			}
		}
		if err == nil {
			if jr != nil {
				if cerr := jr.Close(context.WithoutCancel(jctx)); cerr != nil {
					w.log.Warn("closing the saga journal failed; the sweep will see it sealed",
						slog.String("key", d.key), slog.Any("err", cerr))
				}
			}
			w.stats.succeeded.Add(1)
			w.hooks.done(jctx, job, res, nil)
			w.traceEnd(d, "completed", nil)
			w.finish(d)
			return
		}
		herr = err
	}
	if cause := context.Cause(jctx); cause != nil && errors.Is(cause, ErrLeaseLost) || errors.Is(herr, ErrLeaseLost) {
		job.hb.stop(job, false)
		lost := context.Cause(jctx)
		if lost == nil {
			lost = &LeaseLostError{Key: d.key, Fence: c.Fence, Err: herr}
		}
		w.stats.leasesLost.Add(1)
		w.log.Warn("lease lost", slog.String("key", d.key), slog.Uint64("fence", c.Fence), slog.Any("cause", lost))
		w.store.Abandon(c)
		w.hooks.leaseLost(context.WithoutCancel(jctx), job, lost)
		if d.tj != nil {
			d.tj.LeaseLost(lost)
		}
		w.compensate(jctx, job)
		w.hooks.done(jctx, job, nil, lost)
		w.traceEnd(d, "lease_lost", lost)
		if w.stopCtx.Err() == nil {
			// Claim again: a takeover with a newer fence, or a duplicate if
			// another worker finished it meanwhile.
			delay := backoff(job.Attempt, reg.cfg.backoffMin, reg.cfg.backoffMax)
			w.hooks.retry(w.stopCtx, d.info(), delay, lost)
			w.sched.park(d, time.Now().Add(delay))
		}
		return
	}

	// The handler failed: keep its progress for the next attempt, and undo
	// the attempt's saga steps (an attempt is all or nothing).
	job.hb.stop(job, true)
	w.compensate(jctx, job)
	tooLarge := errors.Is(herr, ErrResultTooLarge)
	terminal := tooLarge || errors.Is(herr, ErrPermanent) || (reg.cfg.retryable != nil && !reg.cfg.retryable(herr))
	exhausted := !terminal && job.Attempt >= reg.cfg.maxAttempts
	if terminal || exhausted {
		reason, dlqErr := ReasonPermanent, herr
		switch {
		case tooLarge:
			reason = ReasonResultTooLarge
		case exhausted:
			reason = ReasonAttemptsExceeded
			dlqErr = fmt.Errorf("%w after %d attempts: %w", ErrAttemptsExhausted, job.Attempt, herr)
		}
		// The dead-letter copy is written first, the failure recorded
		// after it: a crash between the two leaves a lease that expires and
		// a record claimed again (whose copy exists: not written twice),
		// never a recorded failure whose record never reached the
		// dead-letter topic. The record runs past runJob, so the store
		// write retries under the lease's context, not jctx.
		dctx := context.WithoutCancel(jctx)
		w.deadLetterThen(d, reason, dlqErr, func() bool {
			err := w.retryStore(c.Context, func(ctx context.Context) error { return w.store.Fail(ctx, c, herr, true) }) //nolint:contextcheck // the failure is recorded under the lease's context: the record outlives runJob
			if err != nil {
				w.store.Abandon(c)
				w.log.Warn("recording a terminal failure failed; the key will be claimed again",
					slog.String("key", d.key), slog.Any("err", err))
				w.traceEnd(d, "error", err) //nolint:contextcheck // End counts the outcome under the span's own context
				if w.stopCtx.Err() == nil {
					w.sched.park(d, time.Now().Add(backoff(job.Attempt, reg.cfg.backoffMin, reg.cfg.backoffMax)))
				}
				return false
			}
			w.stats.failed.Add(1)
			w.hooks.done(dctx, job, nil, herr)
			return true
		})
		return
	}
	if err := w.store.Fail(context.WithoutCancel(jctx), c, herr, false); err != nil {
		w.store.Abandon(c) // the lease expires and the next claim takes over
	}
	w.stats.retried.Add(1)
	w.hooks.done(jctx, job, nil, herr)
	w.traceEnd(d, "retry", herr)
	if w.stopCtx.Err() == nil {
		delay := backoff(job.Attempt, reg.cfg.backoffMin, reg.cfg.backoffMax)
		info := d.info()
		info.Attempt, info.Fence = job.Attempt, job.fence
		w.hooks.retry(w.stopCtx, info, delay, herr)
		w.sched.park(d, time.Now().Add(delay))
	}
}

// compensate undoes the saga steps of job's attempt, if it ran any. It runs
// detached from jctx's cancellation, bounded by the runner's journal timeout.
func (w *Worker) compensate(jctx context.Context, job *Job) {
	jr := job.stepped()
	if jr == nil {
		return
	}
	if err := jr.Compensate(context.WithoutCancel(jctx)); err != nil {
		w.log.Error("compensation failed", slog.String("key", job.Key), slog.Uint64("fence", job.fence), slog.Any("err", err))
		w.hooks.compensated(jctx, job, err)
		return
	}
	w.hooks.compensated(jctx, job, nil)
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
func (w *Worker) commitLanded(jctx context.Context, key string, c *claim) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(jctx), c.Lease.TTL())
	defer cancel()
	for attempt := 1; ; attempt++ {
		landed, err := w.store.Committed(ctx, c)
		switch {
		case err == nil:
			if landed {
				w.log.Info("commit landed though its answer was lost", slog.String("key", key), slog.Uint64("fence", c.Fence))
			}
			return landed
		case !errors.Is(err, ErrUnavailable) || !sleepCtx(ctx, backoff(attempt, w.cfg.probeMin, w.cfg.probeMax)):
			w.log.Warn("could not learn whether a commit landed", slog.String("key", key),
				slog.Uint64("fence", c.Fence), slog.Any("err", err))
			return false
		}
	}
}

// asLeaseLost makes lease-level loss errors match ErrLeaseLost.
func asLeaseLost(key string, fence uint64, err error) error {
	if err != nil && errors.Is(err, lease.ErrLost) && !errors.Is(err, ErrLeaseLost) {
		return &LeaseLostError{Key: key, Fence: fence, Err: err}
	}
	return err
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
		if !sleepCtx(jctx, backoff(attempt, w.cfg.probeMin, w.cfg.probeMax)) {
			if cause := context.Cause(jctx); cause != nil {
				return cause
			}
			return err
		}
	}
}

func callHandler(ctx context.Context, h Handler, j *Job) (res []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("leasehold: handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return h(ctx, j)
}

// finish marks a record done: its offset may be committed.
func (w *Worker) finish(d *delivery) {
	w.offs.done(d.tracker, d.rec.Offset)
	w.sched.finished(d)
}

// onRevoked runs in franz-go's group loop when partitions are revoked: the
// partitions' trackers are removed first (no later mark can reach franz-go),
// then what is marked is committed, blocking. Jobs of revoked partitions keep
// running under their leases; the new owner sees their keys held, waits,
// then replays the result.
func (w *Worker) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	w.offs.remove(revoked)
	w.sched.dropRemoved(w.offs.alive)
	if w.dropCommits.Load() {
		return
	}
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		w.log.Warn("commit on revoke failed", slog.Any("err", err))
	}
	w.log.Info("partitions revoked", slog.Any("partitions", revoked))
}

// onAssigned logs newly assigned partitions; their trackers start with the
// first record fetched.
func (w *Worker) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	w.log.Info("partitions assigned", slog.Any("partitions", assigned))
}

// onLost runs when partitions are lost (fenced out of the group): nothing is
// committed, because another member may already own them.
func (w *Worker) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	w.offs.remove(lost)
	w.sched.dropRemoved(w.offs.alive)
	w.log.Warn("partitions lost; nothing committed", slog.Any("partitions", lost))
}

func userHeaders(hs []kgo.RecordHeader) map[string]string {
	var m map[string]string
	for _, h := range hs {
		if h.Key == HeaderKey || h.Key == HeaderType {
			continue
		}
		if m == nil {
			m = make(map[string]string, len(hs))
		}
		m[h.Key] = string(h.Value)
	}
	return m
}

// sleepCtx sleeps for d or until ctx is done; it reports whether it slept
// the whole time.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

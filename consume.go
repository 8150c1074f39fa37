package leasehold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/retry"
)

// maxPollWait bounds one poll, so that parked records come due on time.
const maxPollWait = 250 * time.Millisecond

// loop is the dispatcher: it reserves pool slots, gathers parked records
// that are due and freshly polled ones, claims them in one batch, and starts
// a handler for every key it acquired.
func (w *Worker) loop() {
	defer close(w.loopDone)
	if w.share != nil {
		w.shareLoop()
		return
	}
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
// polled ones, unless the worker holds what its memory budget allows. stop
// is true when the worker is shutting down.
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
		room, full := w.budgetRoom()
		if full {
			if len(batch) > 0 {
				return batch, false
			}
			w.waitWake(wait)
			continue
		}
		polled, closed := w.poll(min(n-len(batch), room), wait)
		batch = append(batch, polled...)
		if closed {
			return batch, true
		}
		if len(batch) > 0 {
			return batch, false
		}
	}
}

// poll polls up to n records, waiting up to wait, and accepts them. closed
// is true when the client is closed.
func (w *Worker) poll(n int, wait time.Duration) (batch []*delivery, closed bool) {
	pctx, cancel := context.WithTimeout(w.stopCtx, wait)
	w.pollMu.Lock()
	w.pollCancel = cancel
	w.pollMu.Unlock()
	fetches := w.cl.PollRecords(pctx, n)
	w.pollMu.Lock()
	w.pollCancel = nil
	w.pollMu.Unlock()
	cancel()
	if fetches.IsClientClosed() {
		w.cl.AllowRebalance()
		return nil, true
	}
	fetches.EachError(func(topic string, p int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		w.logFetchError(topic, p, err)
	})
	fetches.EachRecord(func(r *kgo.Record) {
		if d := w.accept(r); d != nil {
			batch = append(batch, d)
		}
	})
	w.offs.highWatermarks(fetches)
	// Polled records are tracked: rebalances may proceed.
	w.cl.AllowRebalance()
	return batch, false
}

// wakePoll interrupts a poll that waits, so that a newly due record is
// claimed without waiting for the poll timeout.
func (w *Worker) wakePoll() {
	w.pollMu.Lock()
	defer w.pollMu.Unlock()
	if w.pollCancel != nil {
		w.pollCancel()
	}
	select {
	case w.wakeCh <- struct{}{}:
	default:
	}
}

// waitWake waits, while the dispatcher does not poll, until a record may be
// due (wakePoll), wait has passed, or the worker stops.
func (w *Worker) waitWake(wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.wakeCh:
	case <-t.C:
	case <-w.stopCtx.Done():
	}
}

// accept tracks a polled record and validates it. It returns nil for a
// record that is a re-fetch, queued behind its ordering key, or poison (sent
// to the dead-letter topic).
func (w *Worker) accept(r *kgo.Record) *delivery {
	d := &delivery{rec: r}
	if w.share != nil {
		w.shareTrack(d) // a share group delivers each record to one member: no offsets to track
	} else if tracked, fresh := w.offs.track(r); fresh {
		d.tracker = tracked
	} else {
		return nil
	}
	d.key = string(headerValue(r.Headers, HeaderKey))
	// A registered type's name is the registration's string (its bytes
	// looked up without a copy); registered names are valid.
	typ := headerValue(r.Headers, HeaderType)
	reg := w.handlers[string(typ)]
	if reg != nil {
		d.typ = reg.typ
	} else {
		d.typ = string(typ)
	}
	switch {
	case len(r.Key) == 0:
		d.orderKey = d.key
	case string(r.Key) == d.key:
		d.orderKey = d.key // the usual case (Enqueue): one string
	default:
		d.orderKey = string(r.Key)
	}
	var reason string
	var cause error
	switch {
	case d.key == "":
		reason, cause = ReasonMissingKey, fmt.Errorf("%w: no %s header", ErrInvalidKey, HeaderKey)
	case ValidateKey(d.key) != nil:
		reason, cause = ReasonInvalidKey, ValidateKey(d.key)
	case reg == nil && ValidateType(d.typ) != nil:
		reason, cause = ReasonInvalidType, ValidateType(d.typ)
	case reg == nil:
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

// dispatch claims a batch and acts on every claim: it starts a handler for
// every key it acquired and settles the rest. It returns how many pool slots
// it used for handlers.
func (w *Worker) dispatch(batch []*delivery) int {
	batch = w.holdLimited(w.holdPaused(w.sched.join(w.dropRevoked(batch))))
	if len(batch) == 0 {
		return 0
	}
	reqs := make([]claimRequest, len(batch))
	for i, d := range batch {
		w.obs.claiming(d)
		reqs[i] = claimRequest{Key: d.key, Type: d.typ, Payload: d.rec.Value, TTL: w.handlers[d.typ].cfg.leaseTTL,
			Worker: workerIdentity()}
		if d.tj != nil {
			reqs[i].Span = d.tj.Span().SpanContext()
		}
	}
	start := time.Now()
	claims, err := w.store.ClaimBatch(w.baseCtx, reqs)
	if err != nil {
		w.giveBack(batch)
		w.claimBatchFailed(batch, err)
		return 0
	}
	used := 0
	var unavailable error
	var notRun []*delivery
	for i, d := range batch {
		c := &claims[i]
		w.obs.claimed(w.stopCtx, d, c, start)
		ran, err := w.route(d, c)
		if ran {
			used++
		} else if d.lim != nil {
			notRun = append(notRun, d)
		}
		if err != nil {
			unavailable = err
		}
	}
	w.giveBack(notRun)
	if unavailable != nil {
		w.failClosed(unavailable)
	}
	return used
}

// dropRevoked drops the parked records of partitions revoked meanwhile: they
// belong to the new owner.
func (w *Worker) dropRevoked(batch []*delivery) []*delivery {
	live := batch[:0]
	for _, d := range batch {
		if d.tracker == nil || w.offs.alive(d.tracker) {
			live = append(live, d)
		} else {
			w.report(w.stopCtx, d, attemptEnd{kind: endRevoked, info: d.info()})
		}
	}
	return live
}

// claimBatchFailed parks a batch whose claim failed as a whole, to be
// claimed again as soon as Redis answers (not a retry: no backoff).
func (w *Worker) claimBatchFailed(batch []*delivery, err error) {
	now := time.Now()
	for _, d := range batch {
		w.sched.park(d, now)
	}
	if w.stopCtx.Err() != nil {
		return
	}
	if errors.Is(err, ErrUnavailable) {
		w.failClosed(err)
		return
	}
	w.log.Error("claim batch failed", slog.Any("err", err))
	retry.Sleep(w.stopCtx, w.cfg.probeMin)
}

// route acts on one claim: it runs the job (ran), parks, replays or
// dead-letters the record. It returns the claim's error when it means that
// Redis cannot be reached (the record is parked; the caller pauses).
func (w *Worker) route(d *delivery, c *claim) (ran bool, unavailable error) {
	switch {
	case c.Err != nil && c.Outcome == OutcomeUndecodable:
		w.deadLetter(d, ReasonUndecodable, c.Err)
	case c.Err != nil:
		return false, w.claimFailed(d, c.Err)
	case c.Outcome == OutcomeAcquired || c.Outcome == OutcomeTakeover:
		d.held = 0
		w.running.Add(1)
		go func() {
			defer w.running.Done()
			w.runJob(d, c)
		}()
		return true, nil
	case c.Outcome == OutcomeHeld:
		d.held++
		delay := retry.Delay(d.held, w.cfg.heldMin, w.cfg.heldMax)
		if c.Remaining > 0 && c.Remaining < delay {
			delay = max(c.Remaining, w.cfg.heldMin)
		}
		w.park(w.stopCtx, d, claimInfo(d, c), delay, nil)
	case c.Outcome == OutcomeDuplicate:
		w.replay(d, c)
	case c.Outcome == OutcomeMismatch:
		w.deadLetter(d, ReasonMismatch, ErrFingerprintMismatch)
	default:
		w.log.Error("unknown claim outcome", slog.String("key", d.key), slog.Int("outcome", int(c.Outcome)))
		w.sched.park(d, time.Now().Add(w.cfg.heldMax))
	}
	return false, nil
}

// replay finishes d, whose claim found its key's outcome recorded, with the
// cached outcome, and the copies of d waiting on it (same key, type and
// payload) with the same answer: one claim for all of them.
func (w *Worker) replay(d *delivery, c *claim) {
	copies := w.sched.replaying(d)
	w.report(w.stopCtx, d, attemptEnd{kind: endDuplicate, info: claimInfo(d, c), result: c.Result, failure: c.Failure})
	now := time.Now()
	for _, cd := range copies {
		w.obs.claimed(w.stopCtx, cd, c, now)
		w.report(w.stopCtx, cd, attemptEnd{kind: endDuplicate, info: claimInfo(cd, c), result: c.Result, failure: c.Failure})
	}
}

// claimFailed handles a claim that failed for one record: parked at once
// when Redis cannot be reached (returned, so that fetching pauses),
// dead-lettered when no retry can clear the error (retrying would hold the
// partition's commits back for ever), parked with backoff otherwise.
func (w *Worker) claimFailed(d *delivery, err error) (unavailable error) {
	if errors.Is(err, ErrUnavailable) {
		w.sched.park(d, time.Now())
		return err
	}
	if reason := permanentClaimReason(err); reason != "" {
		w.deadLetter(d, reason, err)
		return nil
	}
	d.held++
	w.log.Warn("claim failed", slog.String("key", d.key), slog.Any("err", err))
	w.park(w.stopCtx, d, d.info(), retry.Delay(d.held, w.cfg.heldMin, w.cfg.heldMax), err)
	return nil
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
	w.fetch.set(pauseRedis, true)
	w.obs.paused(cause)
	for attempt := 1; ; attempt++ {
		if !retry.Sleep(w.stopCtx, retry.Delay(attempt, w.cfg.probeMin, w.cfg.probeMax)) {
			return // shutting down: stay paused
		}
		pctx, cancel := context.WithTimeout(w.stopCtx, time.Second)
		err := w.store.Ping(pctx)
		cancel()
		if err == nil {
			break
		}
	}
	w.fetch.set(pauseRedis, false)
	w.paused.Store(false)
	w.obs.resumed(time.Since(start))
}

// onRevoked runs in franz-go's group loop when partitions are revoked: the
// partitions' trackers are removed first (no later mark can reach franz-go),
// then what is marked is committed, blocking. Jobs of revoked partitions keep
// running under their leases; the new owner sees their keys held, waits,
// then replays the result.
func (w *Worker) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	w.offs.remove(revoked)
	w.endDropped(ctx, w.sched.dropRemoved(w.offs.alive))
	if err := w.cfg.commitMarked(ctx, cl); err != nil {
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
func (w *Worker) onLost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	w.offs.remove(lost)
	w.endDropped(ctx, w.sched.dropRemoved(w.offs.alive))
	w.log.Warn("partitions lost; nothing committed", slog.Any("partitions", lost))
}

// endDropped ends the attempts of records the schedule dropped (their
// partition revoked or lost, or the worker stopping) as revoked: a record
// parked for a held key or its limit group kept its span open while it
// waited, and the span ends here.
func (w *Worker) endDropped(ctx context.Context, dropped []*delivery) {
	for _, d := range dropped {
		w.obs.ended(ctx, d, attemptEnd{kind: endRevoked, info: d.info()})
	}
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

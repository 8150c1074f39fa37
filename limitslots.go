package leasehold

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/limit"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/lease"
)

// The dispatcher's and the renewer's use of the limits (limits.go).

// limitCallTimeout bounds a slot release or a hold, made outside the
// dispatcher's batch.
const limitCallTimeout = 5 * time.Second

// holdLimited takes a running slot for every limited delivery of batch (one
// pipeline), parks those whose group refuses one, and returns the others.
func (w *Worker) holdLimited(batch []*delivery) []*delivery {
	if !w.lim.on || len(batch) == 0 {
		return batch
	}
	var reqs []limit.Request
	var asked []*delivery
	keep := batch[:0]
	for _, d := range batch {
		w.lim.unwait(w.baseCtx, d)
		g, spec := w.limitGroup(d)
		if g == "" {
			keep = append(keep, d)
			continue
		}
		member := limit.Member(d.key, w.lim.instance+"."+strconv.FormatUint(w.lim.seq.Add(1), 36))
		reqs = append(reqs, limit.Request{Group: g, Member: member, TTL: w.jobTTL(d), Spec: spec})
		asked = append(asked, d)
	}
	if len(reqs) == 0 {
		return keep
	}
	answers, err := limit.Acquire(w.baseCtx, w.rdb, w.cfg.keyPrefix, reqs)
	if err != nil {
		w.claimBatchFailed(asked, mapStoreErr(err))
		return keep
	}
	for i, d := range asked {
		if w.limitAnswer(d, reqs[i], answers[i]) {
			keep = append(keep, d)
		}
	}
	return keep
}

// limitAnswer acts on the answer to d's slot request: it reports whether d
// got its slot (d.lim is set); otherwise d is parked.
func (w *Worker) limitAnswer(d *delivery, r limit.Request, a limit.Answer) bool {
	w.lim.touch(r.Group, r.Spec)
	if a.Err != nil {
		w.log.Warn("taking a limit slot failed", slog.String("key", d.key), slog.String("group", r.Group), slog.Any("err", a.Err))
		d.held++
		w.sched.park(d, time.Now().Add(min(w.cfg.heldMin<<min(d.held, 6), w.pauseEvery)))
		return false
	}
	if a.Status == scripts.LimitAcquired {
		d.lim = &limit.Slot{Group: r.Group, Member: r.Member, TTL: r.TTL, Spec: r.Spec}
		return true
	}
	wait, reason := a.Wait, "held"
	switch a.Status {
	case scripts.LimitFull:
		wait, reason = min(wait, w.pauseEvery), "full"
	case scripts.LimitRated:
		reason = "rate"
	}
	w.limitWait(d, r.Group, reason, wait)
	w.lim.wait(w.baseCtx, r.Group, d, a.Status == scripts.LimitFull)
	w.sched.park(d, time.Now().Add(max(wait, time.Millisecond)))
	return false
}

// limitWait records on d's span and in the log that d waits for its group.
func (w *Worker) limitWait(d *delivery, group, reason string, wait time.Duration) {
	w.obs.claiming(d) // starts d's attempt span
	if d.tj != nil {
		d.tj.Span().AddEvent(EventLimitWait, trace.WithAttributes(attribute.String(AttrLimitGroup, group),
			attribute.String(AttrLimitReason, reason), attribute.Int64(AttrLimitWait, wait.Milliseconds())))
	}
	w.log.Debug("job waits for its limit group", slog.String("key", d.key), slog.String("group", group),
		slog.String("reason", reason), slog.Duration("wait", wait))
}

// jobTTL is the lease TTL of d's job type.
func (w *Worker) jobTTL(d *delivery) time.Duration {
	if reg := w.handlers[d.typ]; reg != nil && reg.cfg.leaseTTL > 0 {
		return reg.cfg.leaseTTL
	}
	return w.cfg.leaseTTL
}

// giveBack returns the slots of deliveries whose claim did not run them.
func (w *Worker) giveBack(ds []*delivery) {
	var slots []limit.Slot
	for _, d := range ds {
		if d.lim != nil {
			slots = append(slots, *d.lim)
			d.lim = nil
		}
	}
	w.releaseSlots(slots)
}

// takeSlot moves d's slot to the running ones (renewed each round); the
// job's goroutine calls it before anything may park d again.
func (w *Worker) takeSlot(d *delivery) *limit.Slot {
	s := d.lim
	if s == nil {
		return nil
	}
	d.lim = nil
	w.lim.mu.Lock()
	w.lim.running[s] = time.Now() // limitAnswer touched its group
	w.lim.mu.Unlock()
	return s
}

// freeSlot gives a running job's slot back, and wakes the deliveries of its
// group waiting for a slot in this worker.
func (w *Worker) freeSlot(s *limit.Slot) {
	if s == nil {
		return
	}
	w.lim.mu.Lock()
	delete(w.lim.running, s)
	var wake []*delivery
	for d, onFree := range w.lim.waiting[s.Group] {
		if onFree {
			wake = append(wake, d)
		}
	}
	w.lim.mu.Unlock()
	w.releaseSlots([]limit.Slot{*s})
	if len(wake) > 0 {
		w.sched.hurry(wake)
	}
}

func (w *Worker) releaseSlots(slots []limit.Slot) {
	if len(slots) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(w.baseCtx, limitCallTimeout)
	defer cancel()
	if err := limit.Release(ctx, w.rdb, w.cfg.keyPrefix, slots); err != nil {
		w.log.Warn("giving limit slots back failed; they lapse one lease TTL after their last renewal",
			slog.Int("slots", len(slots)), slog.Any("err", err))
	}
}

// hurry makes parked deliveries due now (those still parked).
func (s *schedule) hurry(ds []*delivery) {
	s.mu.Lock()
	now := time.Now()
	for _, d := range ds {
		if d.index >= 0 && d.index < len(s.ready) && s.ready[d.index] == d && d.due.After(now) {
			d.due = now
			heap.Fix(&s.ready, d.index)
		}
	}
	s.mu.Unlock()
	s.wake()
}

// holdRetryAfter holds the job's limit group fleet-wide when its handler
// answered RetryAfter.
func (w *Worker) holdRetryAfter(job *Job, e attemptEnd) {
	if !w.lim.on || (e.kind != endRetry && e.kind != endFailed) || e.err == nil {
		return
	}
	var ra *RetryAfterError // declared past the common case: errors.As moves it to the heap
	if !errors.As(e.err, &ra) || ra.Delay <= 0 {
		return
	}
	g, _ := w.limitGroup(job.d)
	if g == "" {
		return
	}
	ctx, cancel := context.WithTimeout(w.baseCtx, limitCallTimeout)
	defer cancel()
	left, err := limit.Hold(ctx, w.rdb, w.cfg.keyPrefix, g, ra.Delay)
	if err != nil {
		w.log.Warn("holding a limit group for a Retry-After failed", slog.String("group", g), slog.Any("err", err))
		return
	}
	w.log.Info("limit group held for a Retry-After", slog.String("key", job.Key), slog.String("group", g),
		slog.Duration("for", left))
}

// watchLimits renews the running slots with every renew round of m (one
// script a group), records the groups used in the registry, prunes one page
// of it, and forgets waiting deliveries whose partition went away.
func (w *Worker) watchLimits(m *lease.Manager) {
	leasing.OnRenewRound(m, func(ctx context.Context) {
		now := time.Now()
		slots, touched := w.lim.round(ctx, w.offs.alive, now)
		if len(slots) > 0 {
			if _, err := limit.Renew(ctx, w.rdb, w.cfg.keyPrefix, slots); err != nil {
				w.log.Warn("renewing limit slots failed", slog.Int("slots", len(slots)), slog.Any("err", err))
			}
		}
		if err := limit.Register(ctx, w.rdb, w.cfg.keyPrefix, touched, now); err != nil {
			w.lim.retouch(touched)
		}
		w.pruneLimits(ctx, now)
	})
}

// pruneLimits removes from the registry the groups of its next HSCAN page
// that no worker registered for limit.PruneAge before now (the clock
// Register's times are read from). A failure only leaves the page for the
// next round: the registry is an operator's listing, no job depends on it.
func (w *Worker) pruneLimits(ctx context.Context, now time.Time) {
	next, n, err := limit.Prune(ctx, w.rdb, w.cfg.keyPrefix, w.lim.pruneCursor, now.Add(-limit.PruneAge))
	if err != nil {
		w.log.Debug("pruning the limit-group registry failed; the next round tries again", slog.Any("err", err))
		return
	}
	w.lim.pruneCursor = next
	if n > 0 {
		w.log.Debug("limit groups unused for the prune age left the registry", slog.Int("groups", n),
			slog.Duration("prune_age", limit.PruneAge))
	}
}

// round returns the running slots and the groups touched since the last
// round, with the groups of slots not registered for limitRefresh before
// now, and drops the waiting deliveries alive no longer reports.
func (l *limiter) round(ctx context.Context, alive func(*partTracker) bool, now time.Time) ([]limit.Slot, map[string]limit.Spec) {
	l.mu.Lock()
	defer l.mu.Unlock()
	slots := make([]limit.Slot, 0, len(l.running))
	for s, registered := range l.running {
		slots = append(slots, *s)
		if now.Sub(registered) >= limitRefresh {
			if _, ok := l.touched[s.Group]; !ok {
				l.touched[s.Group] = s.Spec
			}
			l.running[s] = now
		}
	}
	touched := l.touched
	l.touched = make(map[string]limit.Spec)
	for g, ds := range l.waiting {
		for d := range ds {
			if d.tracker != nil && !alive(d.tracker) {
				delete(ds, d)
				l.addHeld(ctx, -1)
			}
		}
		if len(ds) == 0 {
			delete(l.waiting, g)
		}
	}
	return slots, touched
}

func (l *limiter) retouch(groups map[string]limit.Spec) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for g, s := range groups {
		if _, ok := l.touched[g]; !ok {
			l.touched[g] = s
		}
	}
}

func (l *limiter) touch(group string, s limit.Spec) {
	l.mu.Lock()
	l.touched[group] = s
	l.mu.Unlock()
}

// wait records d as parked by its group.
func (l *limiter) wait(ctx context.Context, group string, d *delivery, onFree bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ds := l.waiting[group]
	if ds == nil {
		ds = make(map[*delivery]bool)
		l.waiting[group] = ds
	}
	if _, ok := ds[d]; !ok {
		l.addHeld(ctx, 1)
	}
	ds[d] = onFree
	d.limWait = group
}

// unwait forgets that d was parked by its group (it is looked at again).
func (l *limiter) unwait(ctx context.Context, d *delivery) {
	if d.limWait == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ds := l.waiting[d.limWait]; ds != nil {
		if _, ok := ds[d]; ok {
			delete(ds, d)
			l.addHeld(ctx, -1)
		}
		if len(ds) == 0 {
			delete(l.waiting, d.limWait)
		}
	}
	d.limWait = ""
}

// HeldByLimit returns how many records the worker holds because their limit
// group is full, held until a time, or over its rate.
func (w *Worker) HeldByLimit() int { return int(w.lim.held.Load()) }

// addHeld counts a delivery parked by its limit group in, or out.
func (l *limiter) addHeld(ctx context.Context, delta int64) {
	l.held.Add(delta)
	l.metrics.LimitHeld(ctx, delta)
}

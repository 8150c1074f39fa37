package leasehold

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/pause"
	"github.com/leasehold/leasehold/lease"
)

// Pausing job types (worker pause TYPE, inspect's Inspector.Pause). The
// paused types are one Redis hash that the worker reads once when it starts
// (before its first batch) and then once per lease renew round, in the
// renewer goroutine (leasing.OnRenewRound), so that a pause costs one call
// per round whatever the number of records held. The
// dispatcher holds the records of a paused type: parked, not claimed, their
// offsets not committed, counted in the memory budget; it looks again one
// renew interval later. Running jobs finish. In share mode a worker holding
// such records polls nothing else until the resume (warnSharePaused).

// pausedSet is the paused job types as last read; nil before the first read.
type pausedSet = map[string]time.Time

// watchPaused reads the paused types with every renew round of m.
func (w *Worker) watchPaused(m *lease.Manager) {
	w.pauseEvery = m.RenewInterval()
	leasing.OnRenewRound(m, func(ctx context.Context) {
		p, err := pause.Read(ctx, w.rdb, w.cfg.keyPrefix)
		if err != nil {
			return // the last read stands until Redis answers
		}
		w.setPaused(p)
	})
}

// The messages setPaused logs.
const (
	logPaused  = "job type paused: holding its records"
	logResumed = "job type resumed"
)

// setPaused keeps p as the paused types and logs each type that this read
// paused or resumed, so that an operator sees every worker follow a pause.
func (w *Worker) setPaused(p pausedSet) {
	old := w.typesPaused.Swap(&p)
	var was pausedSet
	if old != nil {
		was = *old
	}
	for typ, at := range p {
		if _, ok := was[typ]; !ok {
			w.log.Info(logPaused, slog.String("type", typ), slog.Time("paused_at", at))
		}
	}
	for typ := range was {
		if _, ok := p[typ]; !ok {
			w.log.Info(logResumed, slog.String("type", typ))
		}
	}
}

// loadPaused reads the paused types once before the dispatcher starts (a
// worker with a Redis store: watchPaused set pauseEvery), so that a type
// paused before Start is held from the first batch; the renew rounds read
// them from one renew interval on, and until then nothing would be held.
func (w *Worker) loadPaused(ctx context.Context) error {
	if w.pauseEvery == 0 {
		return nil
	}
	p, err := pause.Read(ctx, w.rdb, w.cfg.keyPrefix)
	if err != nil {
		return fmt.Errorf("leasehold: reading the paused job types: %w", mapStoreErr(err))
	}
	w.setPaused(p)
	return nil
}

// holdPaused parks the records of batch whose job type is paused, and
// returns the others. In share mode the worker then polls nothing until
// the type is resumed; it says so once per pause (warnSharePaused).
func (w *Worker) holdPaused(batch []*delivery) []*delivery {
	p := w.typesPaused.Load()
	if p == nil || len(*p) == 0 {
		return batch
	}
	keep := batch[:0]
	due := time.Now().Add(w.pauseEvery)
	for _, d := range batch {
		if at, ok := (*p)[d.typ]; ok {
			w.sched.park(d, due)
			w.warnSharePaused(d.typ, at)
			continue
		}
		keep = append(keep, d)
	}
	return keep
}

// PausedTypes returns the job types paused across the fleet, as the worker
// last read them (at most one renew interval ago).
func (w *Worker) PausedTypes() []string {
	p := w.typesPaused.Load()
	if p == nil {
		return nil
	}
	out := make([]string, 0, len(*p))
	for t := range *p {
		out = append(out, t)
	}
	return out
}

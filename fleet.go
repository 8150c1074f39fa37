package leasehold

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/internal/buildinfo"
	"github.com/leasehold/leasehold/internal/fleet"
)

// WithFleet sets whether a started worker publishes itself to the fleet in
// Redis (its identity, load and counters at the lease renew interval, kept
// for a few intervals), which `worker fleet`, the console's fleet charts and
// the Inspector read; Shutdown deletes what it published. Default: true,
// for a Worker embedded in a program of its own as for the worker binary.
func WithFleet(publish bool) Opt { return optFunc(func(c *config) { c.noFleet = !publish }) }

// startFleet starts the worker's fleet publisher (unless WithFleet(false)).
// A first publish that fails is logged; the worker runs regardless.
func (w *Worker) startFleet(ctx context.Context) {
	c := &w.cfg
	if c.noFleet {
		return
	}
	p, err := fleet.NewPublisher(fleet.Config{Redis: w.rdb, Prefix: c.keyPrefix, Interval: c.leaseTTL / 3, Log: w.log,
		Identity: fleet.Identity{Version: buildinfo.Version(), Topics: c.topics, Group: c.group, Concurrency: c.concurrency},
		Load:     w.fleetLoad})
	if err != nil {
		w.log.Warn("fleet: this worker will not be listed", slog.Any("err", err))
		return
	}
	if err := p.Start(context.WithoutCancel(ctx)); err != nil {
		w.log.Warn("fleet: first publish failed; retrying at each renew interval", slog.Any("err", err))
	}
	w.fleet = p
}

// stopFleet deletes the worker's fleet status (it expires by itself when
// Redis cannot be reached).
func (w *Worker) stopFleet(ctx context.Context) {
	if w.fleet == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := w.fleet.Shutdown(sctx); err != nil {
		w.log.Warn("fleet: status not deleted; it expires by itself", slog.Any("err", err))
	}
}

// fleetLoad is what the worker does now, as the fleet shows it.
func (w *Worker) fleetLoad() fleet.Load {
	s := w.Stats()
	n := len(w.Running())
	return fleet.Load{Running: n, LeasesHeld: n, CommitLag: w.commitLag(), Counters: fleet.Counters{
		Succeeded: s.Succeeded, Failed: s.Failed, Retried: s.Retried, DeadLettered: s.DeadLettered,
		Duplicates: s.Replayed, Takeovers: s.Claimed[OutcomeTakeover], LeasesLost: s.LeasesLost,
	}}
}

// commitLag sums the commit lag of the worker's assigned partitions (what
// leasehold.commit.lag reports per partition).
func (w *Worker) commitLag() int64 {
	if w.offs == nil || w.cl == nil {
		return 0
	}
	var n int64
	for _, p := range w.offs.commitLag(w.cl.CommittedOffsets()) {
		n += p.Lag
	}
	return n
}

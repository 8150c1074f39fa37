package leasing

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// renewLoop is the Manager's one renewer goroutine. Every renew interval it
// renews all held leases in batches; after a round with transient failures it
// comes back sooner (a quarter interval) so that a short outage costs little
// of the lease's margin. Loss on the local deadline does not depend on this
// loop: the deadline watcher (deadline.go) runs apart from it.
func (m *Manager) renewLoop(ctx context.Context, t Timer) {
	defer close(m.loopDone)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		// Rounds start every interval (not an interval after the previous
		// round ended), and renew leases in the same order each time, so
		// that each lease is renewed about every interval whatever a round
		// costs.
		started := m.clock.Now()
		next := m.cfg.interval
		if failed := m.renewRound(ctx); failed {
			next = max(m.cfg.interval/4, time.Millisecond)
		}
		if ctx.Err() != nil {
			return
		}
		t.Reset(max(next-m.clock.Now().Sub(started), 0))
	}
}

// renewRound renews every held lease once and releases leases abandoned
// earlier. It reports whether any renewal failed transiently.
func (m *Manager) renewRound(ctx context.Context) (failed bool) {
	var firstErr error
	m.mu.Lock()
	leases := make([]*Lease, 0, len(m.held))
	for l := range m.held {
		leases = append(leases, l)
	}
	slices.SortFunc(leases, func(a, b *Lease) int { return cmp.Compare(a.seq, b.seq) })
	abandoned := m.abandoned
	m.abandoned = nil
	hooks := m.rounds
	m.mu.Unlock()
	defer m.runRoundHooks(ctx, hooks)
	if len(leases) == 0 && len(abandoned) == 0 {
		return false
	}
	ctx, span := m.tracer.Start(ctx, "lease.renew", trace.WithAttributes(attribute.Int("lease.count", len(leases))))
	defer span.End()

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		renewed int
		sem     = make(chan struct{}, max(1, m.cfg.parallel))
	)
	batch := max(1, m.cfg.batch)
	for start := 0; start < len(leases); start += batch {
		part := leases[start:min(start+batch, len(leases))]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ok, err := m.renewBatch(ctx, part)
			mu.Lock()
			renewed += ok
			if err != nil {
				failed = true
				firstErr = cmp.Or(firstErr, err)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	m.logRenewals(ctx, len(leases), renewed, firstErr)
	if failed {
		span.SetAttributes(attribute.Bool("lease.renew.failed", true))
	}
	if len(abandoned) > 0 {
		m.releaseAbandoned(ctx, abandoned)
	}
	return failed
}

// logRenewals logs the transitions of the renewals, not every retry of an
// outage: the first round with a failure, and the first round after that
// in which a renewal succeeded (a round that renewed nothing, e.g. one that
// only found leases lost on their deadline, says nothing of the backend).
func (m *Manager) logRenewals(ctx context.Context, held, renewed int, firstErr error) {
	switch {
	case firstErr != nil:
		if !m.renewFailing && ctx.Err() == nil {
			m.log.Warn("lease renewals failing; retrying until each lease's local deadline",
				slog.Int("leases", held), slog.String("error", firstErr.Error()))
		}
		m.renewFailing = true
	case renewed > 0 && m.renewFailing:
		m.log.Info("lease renewals succeed again", slog.Int("renewed", renewed), slog.Int("leases", held))
		m.renewFailing = false
	}
}

// OnRenewRound registers f to run in the renewer goroutine after each renew
// round, with a context that ends after one renew interval (and on
// Shutdown), so that work that can wait for the next round rides the
// renewer's cadence and batching instead of a call of its own: package
// idempotency flushes coalesced heartbeat details so. f must return when its
// context ends: the next round starts after it returns.
func OnRenewRound(m *Manager, f func(ctx context.Context)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rounds = append(m.rounds, f)
}

// OnRenewRoundFirst registers f like [OnRenewRound], to run before the
// hooks registered with OnRenewRound: what f hands them rides the same
// round (the worker hands throttled heartbeat details to package
// idempotency's flush so).
func OnRenewRoundFirst(m *Manager, f func(ctx context.Context)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rounds = append([]func(context.Context){f}, m.rounds...)
}

func (m *Manager) runRoundHooks(ctx context.Context, hooks []func(context.Context)) {
	if len(hooks) == 0 || ctx.Err() != nil {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, m.cfg.interval)
	defer cancel()
	for _, f := range hooks {
		f(hctx)
	}
}

// renewBatch sends one batch, bounded by the renew interval so that a hung
// backend does not hold up later rounds. It returns how many leases the
// backend renewed and the first transient error.
func (m *Manager) renewBatch(ctx context.Context, leases []*Lease) (renewed int, firstErr error) {
	rs := make([]Renewal, len(leases))
	for i, l := range leases {
		rs[i] = Renewal{Name: l.name, Token: l.token, Fence: l.fence, TTL: l.ttl}
	}
	bctx, cancel := context.WithTimeout(ctx, m.cfg.interval)
	defer cancel()
	sent := m.clock.Now()
	res := m.b.RenewBatch(bctx, rs)
	took := m.clock.Now().Sub(sent)
	for i, l := range leases {
		var r RenewResult
		if i < len(res) {
			r = res[i]
		} else {
			r.Err = ErrUnavailable
		}
		if l.renewed(sent, r) && firstErr == nil {
			firstErr = r.Err
		}
		if r.Err == nil {
			renewed++
		}
	}
	outcome := "ok"
	if firstErr != nil {
		outcome = "error"
	}
	m.met.renew.Record(ctx, took.Seconds(), metric.WithAttributes(attribute.String("outcome", outcome)))
	return renewed, firstErr
}

// releaseAbandoned gives back leases lost locally on their deadline; those it
// cannot reach yet are queued again until they would have expired anyway.
func (m *Manager) releaseAbandoned(ctx context.Context, as []abandonedLease) {
	bctx, cancel := context.WithTimeout(ctx, m.cfg.interval)
	defer cancel()
	var again []abandonedLease
	for _, a := range as {
		if !m.clock.Now().Before(a.until) {
			continue
		}
		err := m.b.Release(bctx, a.Name, a.Token, a.Fence)
		if err != nil && !errors.Is(err, ErrLost) {
			again = append(again, a)
		}
	}
	if len(again) == 0 {
		return
	}
	m.mu.Lock()
	if !m.closed && len(m.abandoned)+len(again) <= maxAbandoned {
		m.abandoned = append(m.abandoned, again...)
	}
	m.mu.Unlock()
}

package leasehold

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/lease"
)

// redisStore adapts idempotency.Store (over a lease.Manager) to the worker.
type redisStore struct {
	rdb  redis.UniversalClient
	m    *lease.Manager
	s    *idempotency.Store
	comp *compensation.Runner // nil without WithCompensation
}

// newRedisStore builds and starts the lease manager, the idempotency store
// and, with WithCompensation, the compensation runner. It returns the store
// and its shutdown function (runner first, then the lease manager).
func newRedisStore(ctx context.Context, rdb redis.UniversalClient, c *config) (*redisStore, func(context.Context) error, error) {
	lopts := []lease.Opt{lease.WithTTL(c.leaseTTL), lease.WithPrefix(c.keyPrefix), lease.WithLogger(c.logger)}
	lopts = append(lopts, c.leaseOpts...)
	m, err := lease.NewManager(rdb, lopts...)
	if err != nil {
		return nil, nil, fmt.Errorf("leasehold: %w", err)
	}
	if err := m.Start(ctx); err != nil {
		return nil, nil, mapStoreErr(fmt.Errorf("leasehold: %w", err))
	}
	iopts := []idempotency.Opt{idempotency.WithPrefix(c.keyPrefix), idempotency.WithRetention(c.retention),
		idempotency.WithLogger(c.logger), idempotency.WithMaxKeyLen(MaxKeyLen)}
	iopts = append(iopts, c.idemOpts...)
	s, err := idempotency.New(ctx, rdb, m, iopts...)
	if err != nil {
		_ = m.Shutdown(context.WithoutCancel(ctx))
		return nil, nil, mapStoreErr(fmt.Errorf("leasehold: %w", err))
	}
	rs := &redisStore{rdb: rdb, m: m, s: s}
	if c.compReg == nil {
		return rs, m.Shutdown, nil
	}
	copts := []compensation.Opt{compensation.WithPrefix(c.keyPrefix), compensation.WithLogger(c.logger)}
	r, err := compensation.NewRunner(rdb, m, c.compReg, append(copts, c.compOpts...)...)
	if err == nil {
		err = r.Start(ctx)
	}
	if err != nil {
		_ = m.Shutdown(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("leasehold: compensation: %w", err)
	}
	rs.comp = r
	return rs, func(ctx context.Context) error {
		return errors.Join(r.Shutdown(ctx), m.Shutdown(ctx))
	}, nil
}

// mapStoreErr makes errors of the lease and idempotency packages match the
// worker's sentinels.
func mapStoreErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrUnavailable):
		return err
	case errors.Is(err, idempotency.ErrLeaseLost), errors.Is(err, lease.ErrLost):
		return fmt.Errorf("%w: %w", ErrLeaseLost, err)
	case errors.Is(err, idempotency.ErrUnavailable), errors.Is(err, lease.ErrUnavailable):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var re redis.Error
	if errors.As(err, &re) {
		return err // a server reply: Redis answers
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	// Network failures (dial, reset, timeout) mean Redis cannot be reached.
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

func (rs *redisStore) ClaimBatch(ctx context.Context, reqs []claimRequest) ([]claim, error) {
	out := make([]claim, len(reqs))
	ireqs := make([]idempotency.Request, 0, len(reqs))
	idx := make([]int, 0, len(reqs))
	for i, r := range reqs {
		fp, err := rs.s.Fingerprint(r.Payload)
		if err != nil {
			out[i].Outcome, out[i].Err = OutcomeUndecodable, err
			continue
		}
		ireqs = append(ireqs, idempotency.Request{Key: r.Key, Fingerprint: fp})
		idx = append(idx, i)
	}
	unavailable := 0
	for j, ic := range rs.s.ClaimBatch(ctx, ireqs) {
		i := idx[j]
		c := &out[i]
		c.ref = ic
		switch ic.Outcome {
		case idempotency.Acquired, idempotency.Takeover:
			c.Outcome = OutcomeAcquired
			if ic.Outcome == idempotency.Takeover {
				c.Outcome = OutcomeTakeover
			}
			c.Fence, c.Attempt, c.LastHeartbeat = ic.Fence, ic.Attempt, ic.Details
			c.Context, c.Lease = ic.Lease.Context(), ic.Lease
		case idempotency.Held:
			c.Outcome, c.Remaining = OutcomeHeld, ic.Remaining
		case idempotency.Duplicate:
			c.Outcome, c.Fence = OutcomeDuplicate, ic.Fence
			if ic.Record != nil {
				c.Attempt = ic.Record.Attempt
				if ic.Record.State == idempotency.Failed {
					c.Failure = string(ic.Record.Result)
				} else {
					c.Result = ic.Record.Result
				}
			}
		case idempotency.Mismatch:
			c.Outcome = OutcomeMismatch
		default:
			c.Err = mapStoreErr(ic.Err)
			if c.Err == nil {
				c.Err = fmt.Errorf("leasehold: claim of %q answered nothing", reqs[i].Key)
			}
			if errors.Is(c.Err, ErrUnavailable) {
				unavailable++
			}
		}
	}
	if unavailable > 0 && unavailable == len(ireqs) {
		return nil, out[idx[0]].Err
	}
	return out, nil
}

func (rs *redisStore) Complete(ctx context.Context, c *claim, result []byte) error {
	return mapStoreErr(rs.s.Complete(ctx, c.ref.(*idempotency.Claim), result))
}

func (rs *redisStore) Fail(ctx context.Context, c *claim, cause error, terminal bool) error {
	p := idempotency.Retryable
	if terminal {
		p = idempotency.Terminal
	}
	return mapStoreErr(rs.s.Fail(ctx, c.ref.(*idempotency.Claim), p, cause))
}

func (rs *redisStore) Heartbeat(ctx context.Context, c *claim, details []byte) error {
	return mapStoreErr(rs.s.SaveDetails(ctx, c.ref.(*idempotency.Claim), details))
}

func (rs *redisStore) Abandon(c *claim) {
	ic, ok := c.ref.(*idempotency.Claim)
	if !ok || ic.Lease == nil || ic.Lease.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), rs.m.TTL())
	defer cancel()
	_ = ic.Lease.Release(ctx) // best effort: otherwise it expires after the TTL
}

func (rs *redisStore) Ping(ctx context.Context) error {
	return mapStoreErr(rs.rdb.Ping(ctx).Err())
}

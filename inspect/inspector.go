package inspect

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/lease"
)

// Inspector reads and acts on the keys, leases, journals and histories the
// workers keep in Redis. Build it with [New]; [Inspector.Close] it when done.
type Inspector struct {
	rdb redis.UniversalClient
	cfg cfg

	mu     sync.Mutex
	closed bool
	be     *backend // built at the first call that finds Redis answering
}

// backend is what an Inspector names and reads keys with.
type backend struct {
	m    *lease.Manager // holds no lease; names keys as the workers do
	s    *idempotency.Store
	comp *compensation.Runner
}

// New returns an Inspector over rdb (a single node, Sentinel or Cluster
// client). It touches no server: Redis is reached by the first call.
func New(rdb redis.UniversalClient, opts ...Opt) *Inspector {
	return &Inspector{rdb: rdb, cfg: newCfg(opts)}
}

// Prefix returns the Redis key prefix of the Inspector ([WithPrefix]).
func (i *Inspector) Prefix() string { return i.cfg.prefix }

// Close releases what the Inspector opened (a lease manager that holds no
// lease, and the compensation runner). Methods return [ErrClosed] afterwards.
func (i *Inspector) Close(ctx context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.closed = true
	if i.be == nil {
		return nil
	}
	err := errors.Join(i.be.comp.Shutdown(ctx), i.be.m.Shutdown(ctx))
	i.be = nil
	return err
}

func (i *Inspector) backend(ctx context.Context) (*backend, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return nil, ErrClosed
	}
	if i.be != nil {
		return i.be, nil
	}
	c := &i.cfg
	m, err := lease.NewManager(i.rdb, lease.WithPrefix(c.prefix), lease.WithLogger(c.logger))
	if err != nil {
		return nil, err
	}
	// The manager outlives this call's context: it lives until Close.
	if err := m.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	iopts := append([]idempotency.Opt{idempotency.WithPrefix(c.prefix), idempotency.WithLogger(c.logger)}, c.storeOpts...)
	s, err := idempotency.New(ctx, i.rdb, m, iopts...)
	if err != nil {
		_ = m.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	reg := c.reg
	if reg == nil {
		reg = compensation.NewRegistry()
	}
	comp, err := compensation.NewRunner(i.rdb, m, reg, compensation.WithPrefix(c.prefix), compensation.WithLogger(c.logger))
	if err != nil {
		_ = m.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	i.be = &backend{m: m, s: s, comp: comp}
	return i.be, nil
}

// Store returns the idempotency store the Inspector reads with, for reads
// it does not offer (capacity). It holds no lease.
func (i *Inspector) Store(ctx context.Context) (*idempotency.Store, error) {
	be, err := i.backend(ctx)
	if err != nil {
		return nil, err
	}
	return be.s, nil
}

// LeaseKey returns the Redis key of idempotency key key's lease.
func (i *Inspector) LeaseKey(ctx context.Context, key string) (string, error) {
	be, err := i.backend(ctx)
	if err != nil {
		return "", err
	}
	return be.m.Key(be.s.LeaseName(key)), nil
}

// OwnerDigest returns the digest of a lease owner token that the Inspector
// shows: the first 8 hex digits of its SHA-256, or "-" for none.
func OwnerDigest(token string) string { return leasing.OwnerDigest(token) }

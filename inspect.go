package leasehold

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
)

// KeyInfo is what [Worker.Inspect] reads about one idempotency key: its
// record, its lease, its last heartbeat details and its saga journals (see
// [inspect.KeyInfo]).
type KeyInfo = inspect.KeyInfo

// OwnerDigest returns the digest of a lease owner token that [KeyInfo.Owner]
// shows: the first 8 hex digits of its SHA-256, or "-" for none.
func OwnerDigest(token string) string { return inspect.OwnerDigest(token) }

// Inspector returns an [inspect.Inspector] over the worker's Redis client,
// with its key prefix, store options, logger and tracer, reading its
// dead-letter topic with its Kafka options: the operator layer
// that the CLI and the console present. It works before [Worker.Start],
// while the worker runs and after it stopped; Close it when done.
func (w *Worker) Inspector() *inspect.Inspector {
	c := &w.cfg
	opts := []inspect.Opt{inspect.WithPrefix(c.keyPrefix), inspect.WithLogger(w.log),
		inspect.WithStoreOptions(append([]idempotency.Opt{idempotency.WithRetention(c.retention),
			idempotency.WithMaxKeyLen(MaxKeyLen)}, c.idemOpts...)...), inspect.WithDeadLetters(deadLetterSource{w})}
	if c.tracer != nil {
		opts = append(opts, inspect.WithTracer(c.tracer))
	}
	return inspect.New(w.rdb, opts...)
}

// Inspect reads the record, lease and heartbeat details of idempotency key
// key, with the worker's Redis client, key prefix and store options.
//
// Deprecated: use [Worker.Inspector] and [inspect.Inspector.Key], which the
// CLI and the console use too.
func (w *Worker) Inspect(ctx context.Context, key string) (KeyInfo, error) {
	if err := ValidateKey(key); err != nil {
		return KeyInfo{}, err
	}
	in := w.Inspector()
	defer func() { _ = in.Close(context.WithoutCancel(ctx)) }()
	ki, err := in.Key(ctx, key)
	return ki, mapStoreErr(err)
}

// withView runs fn with an idempotency store over the worker's Redis
// client, built with the worker's options and closed when fn returns. It
// holds no lease.
func (w *Worker) withView(ctx context.Context, fn func(*idempotency.Store) error) error {
	in := w.Inspector()
	defer func() { _ = in.Close(context.WithoutCancel(ctx)) }()
	s, err := in.Store(ctx)
	if err != nil {
		return mapStoreErr(fmt.Errorf("leasehold: %w", err))
	}
	return fn(s)
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/idempotency"
)

// operatorWorker opens Redis and builds a worker (never started) with the
// ops flags, logging to stderr and tracing where OTEL_* says, for the
// commands that act through the Worker's API (reset, dlq replay). close
// flushes the traces and closes Redis.
func operatorWorker(ctx context.Context, e *Env, o opsFlags, extra ...leasehold.Opt) (*leasehold.Worker, func(), error) {
	policy, err := policyOpts(*o.policy)
	if err != nil {
		return nil, nil, err
	}
	rdb, err := openRedis(ctx, o.redisURL)
	if err != nil {
		return nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(e.Stderr, nil))
	_, tracer, stopTracing, err := startTracing(ctx, "leasehold-worker", log)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	closeAll := func() {
		stopTracing()
		_ = rdb.Close()
	}
	opts := append([]leasehold.Opt{leasehold.WithKeyPrefix(o.prefix), leasehold.WithLogger(log),
		leasehold.WithTracing(tracer), leasehold.WithIdempotencyOptions(policy...)}, extra...)
	w, err := leasehold.New(rdb, opts...)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return w, closeAll, nil
}

func cmdReset(ctx context.Context, e *Env, args []string) error {
	f := newFlags(e, "reset", "KEY")
	var o opsFlags
	o.define(f)
	force := f.Bool("force", false, "reset even while a lease on the key is live: the lease ends, its holder loses it and its commit is refused")
	if err := f.parse(args); err != nil {
		return err
	}
	k, err := keyArg(f)
	if err != nil {
		return err
	}
	w, closeAll, err := operatorWorker(ctx, e, o)
	if err != nil {
		return err
	}
	defer closeAll()
	in := w.Inspector()
	defer func() { _ = in.Close(context.WithoutCancel(ctx)) }()
	r, err := in.Reset(ctx, k, *force)
	var he *idempotency.ResetHeldError
	switch {
	case errors.As(err, &he):
		return fmt.Errorf("key %q is held by a live lease (fence %d, %s left): wait for it to end, or pass --force to end it",
			k, he.Fence, he.Remaining.Round(time.Millisecond))
	case err != nil:
		return policyHint(err)
	case r.State == idempotency.Absent && !r.LeaseEnded:
		_, _ = fmt.Fprintf(e.Stdout, "key %s had no record; nothing to reset\n", k)
		return nil
	}
	_, _ = fmt.Fprintf(e.Stdout, "reset %s: it was %s (fence %d)", k, r.State, r.Fence)
	if r.LeaseEnded {
		_, _ = fmt.Fprint(e.Stdout, "; its lease was ended, its holder loses it")
	}
	_, _ = fmt.Fprintln(e.Stdout, "; its next delivery runs again")
	return nil
}

package leasehold

import (
	"context"
	"errors"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/tracing"
)

// ResetResult is what [Worker.Reset] forgot.
type ResetResult struct {
	Key        string
	State      idempotency.State // the record's state before the reset (Absent: none)
	Fence      uint64            // the key's highest fence; later claims get higher ones
	LeaseEnded bool              // a live lease was ended (forced)
}

// Reset forgets the record of idempotency key key, so that its next
// delivery runs again as a first attempt: a cached result or terminal
// failure is no longer replayed, and a fixed payload (another fingerprint)
// is no longer refused as a mismatch. Its heartbeat details go too.
//
// A live lease refuses the reset with an error matching
// idempotency.ErrResetHeld unless force is set; forced, the lease ends: its
// holder loses it at its next renewal (its job is cancelled with
// ErrLeaseLost and its compensations run) and its commit is refused by the
// fence. The fence never goes backwards: every claim after the reset gets a
// fence above every earlier one of the key (the reset is refused with
// idempotency.ErrResetClock when the Redis clock is behind the key's fence).
//
// Every reset is logged (warn) and, with [WithTracing], traced as a `reset`
// span. Reset works before [Worker.Start], like [Worker.Inspect].
func (w *Worker) Reset(ctx context.Context, key string, force bool) (ResetResult, error) {
	if err := ValidateKey(key); err != nil {
		return ResetResult{}, err
	}
	var sp *tracing.Span
	if tr := w.cfg.tracer; tr != nil {
		ctx, sp = tr.StartOperator(ctx, tracing.SpanReset, key, attribute.Bool(tracing.AttrForce, force))
	}
	var r idempotency.ResetResult
	err := w.withView(ctx, func(s *idempotency.Store, _ *lease.Manager) error {
		var err error
		r, err = s.Reset(ctx, key, force)
		return err
	})
	res := ResetResult{Key: key, State: r.State, Fence: r.Fence, LeaseEnded: r.LeaseEnded}
	switch {
	case err == nil:
		w.log.Warn("idempotency key reset by operator", slog.String("key", key), slog.Bool("force", force),
			slog.String("state", r.State.String()), slog.Uint64("fence", r.Fence), slog.Bool("lease_ended", r.LeaseEnded))
		if sp != nil {
			sp.SetFence(r.Fence)
			sp.End("reset", nil) //nolint:contextcheck // ending a span needs no context
		}
		return res, nil
	case errors.Is(err, idempotency.ErrResetHeld), errors.Is(err, idempotency.ErrResetClock):
		w.log.Debug("idempotency key reset refused", slog.String("key", key), slog.Bool("force", force), slog.Any("err", err))
		sp.End("refused", err) //nolint:contextcheck // ending a span needs no context
	default:
		err = mapStoreErr(err)
		w.log.Error("idempotency key reset failed", slog.String("key", key), slog.Any("err", err))
		sp.End(tracing.OutcomeError, err) //nolint:contextcheck // ending a span needs no context
	}
	return res, err
}

package inspect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/tracing"
)

// ResetResult is what [Inspector.Reset] forgot.
type ResetResult struct {
	Key        string
	State      idempotency.State // the record's state before the reset (Absent: none)
	Fence      uint64            // the key's highest fence; later claims get higher ones
	LeaseEnded bool              // a live lease was ended (forced)
}

// Reset forgets the record of idempotency key key, so that its next
// delivery runs again as a first attempt: a cached result or terminal
// failure is no longer replayed, and a fixed payload (another fingerprint)
// is no longer refused as a mismatch. Its heartbeat details go too; its
// attempt history stays, to tell what happened before the reset.
//
// A live lease refuses the reset with an error matching
// idempotency.ErrResetHeld unless force is set; forced, the lease ends: its
// holder loses it at its next renewal and its commit is refused by the
// fence. The fence never goes backwards (idempotency.ErrResetClock when the
// Redis clock is behind the key's fence). Every reset is logged (warn) and
// traced as a `reset` span with [WithTracer].
func (i *Inspector) Reset(ctx context.Context, key string, force bool) (ResetResult, error) {
	be, err := i.backend(ctx)
	if err != nil {
		return ResetResult{Key: key}, err
	}
	var sp *tracing.Span
	if tr := i.cfg.tracer; tr != nil {
		ctx, sp = tr.StartOperator(ctx, tracing.SpanReset, key, attribute.Bool(tracing.AttrForce, force))
	}
	r, err := be.s.Reset(ctx, key, force)
	res := ResetResult{Key: key, State: r.State, Fence: r.Fence, LeaseEnded: r.LeaseEnded}
	log := i.cfg.logger
	switch {
	case err == nil:
		log.Warn("idempotency key reset by operator", slog.String("key", key), slog.Bool("force", force),
			slog.String("state", r.State.String()), slog.Uint64("fence", r.Fence), slog.Bool("lease_ended", r.LeaseEnded))
		if sp != nil {
			sp.SetFence(r.Fence)
			sp.End("reset", nil) //nolint:contextcheck // ending a span needs no context
		}
	case errors.Is(err, idempotency.ErrResetHeld), errors.Is(err, idempotency.ErrResetClock):
		log.Debug("idempotency key reset refused", slog.String("key", key), slog.Bool("force", force), slog.Any("err", err))
		sp.End("refused", err) //nolint:contextcheck // ending a span needs no context
	default:
		log.Error("idempotency key reset failed", slog.String("key", key), slog.Any("err", err))
		sp.End(tracing.OutcomeError, err) //nolint:contextcheck // ending a span needs no context
	}
	return res, err
}

// DeadCompensations lists up to limit dead-lettered saga journals (whose
// compensation failed on every attempt), oldest first.
func (i *Inspector) DeadCompensations(ctx context.Context, limit int) ([]compensation.DeadLetter, error) {
	be, err := i.backend(ctx)
	if err != nil {
		return nil, err
	}
	return be.comp.List(ctx, limit)
}

// RetryCompensation runs again the dead-lettered compensations of
// idempotency key key with the handlers of [WithCompensations], and returns
// how many journals it compensated. None dead-lettered:
// [ErrNothingToRetry]; no handlers: [ErrNoHandlers].
func (i *Inspector) RetryCompensation(ctx context.Context, key string) (int, error) {
	if i.cfg.reg == nil {
		return 0, ErrNoHandlers
	}
	be, err := i.backend(ctx)
	if err != nil {
		return 0, err
	}
	ctx, sp := i.startSpan(ctx, "retry compensation", key)
	n, err := be.comp.Retry(ctx, key)
	switch {
	case n == 0 && err == nil:
		err = ErrNothingToRetry
	case err != nil:
		err = fmt.Errorf("retried %d journals of %q: %w", n, key, err)
	default:
		i.cfg.logger.Warn("compensation retried by operator", slog.String("key", key), slog.Int("journals", n))
	}
	i.endSpan(sp, 0, "compensated", err) //nolint:contextcheck // ending a span needs no context
	return n, err
}

// CompensationCounts reads how many saga journals are unsettled (open,
// sealed or being compensated) and how many are dead-lettered.
func (i *Inspector) CompensationCounts(ctx context.Context) (compensation.Counts, error) {
	be, err := i.backend(ctx)
	if err != nil {
		return compensation.Counts{}, err
	}
	return be.comp.Counts(ctx)
}

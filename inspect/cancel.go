package inspect

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"go.opentelemetry.io/otel/attribute"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/tracing"
)

// CancelResult is the attempt [Inspector.Cancel] asked to stop.
type CancelResult struct {
	Key   string
	Fence uint64 // the fence of the attempt to cancel (a claim after it, if it ends first, is covered too)
}

// Cancel asks the worker running idempotency key key to cancel it, with a
// reason that is logged and traced. The request is stored with the key's
// lease, for the fence running now; the holder learns it from its next
// lease renewal (within one renew interval), cancels the job's context with
// a cause matching leasehold.ErrCancelled, compensates its saga steps and
// records the key as cancelled: later deliveries replay that outcome until
// the key is reset ([Inspector.Reset]). Asking twice is harmless. If the
// attempt ends before it records the cancel (its lease lost, or released
// for a retry), the next claim of the key is covered by the cancel: that
// worker compensates the earlier attempts and records the key as cancelled
// without running the job. Only a commit that landed first wins over it.
//
// A key with no record is refused with [ErrUnknownKey], one that completed
// or failed with [ErrFinished], one waiting for a retry with
// [ErrNotRunning], and a lease that changed while it was read with
// [ErrLeaseChanged].
func (i *Inspector) Cancel(ctx context.Context, key, reason string) (CancelResult, error) {
	be, err := i.backend(ctx)
	if err != nil {
		return CancelResult{Key: key}, err
	}
	var sp *tracing.Span
	if tr := i.cfg.tracer; tr != nil {
		ctx, sp = tr.StartOperator(ctx, "cancel", key, attribute.String(tracing.AttrReason, reason))
	}
	res, err := i.cancel(ctx, be, key, reason)
	i.endSpan(sp, res.Fence, "cancel_requested", err) //nolint:contextcheck // ending a span needs no context
	if err != nil {
		return res, err
	}
	i.cfg.logger.Warn("job cancel requested by operator", slog.String("key", key), slog.Uint64("fence", res.Fence),
		slog.String("reason", reason))
	return res, nil
}

func (i *Inspector) cancel(ctx context.Context, be *backend, key, reason string) (CancelResult, error) {
	res := CancelResult{Key: key}
	info, err := be.s.Lookup(ctx, key)
	if err != nil {
		return res, err
	}
	switch {
	case info.State == idempotency.Absent:
		return res, ErrUnknownKey
	case info.State == idempotency.Completed || info.State == idempotency.Failed:
		return res, fmt.Errorf("%w (%s)", ErrFinished, info.State)
	case info.State != idempotency.Processing || !info.Leased:
		return res, fmt.Errorf("%w (%s)", ErrNotRunning, info.State)
	case info.LeaseFence != info.Fence:
		return res, fmt.Errorf("%w (lease fence %d, record fence %d)", ErrLeaseChanged, info.LeaseFence, info.Fence)
	}
	res.Fence = info.LeaseFence
	lk, mk := be.m.Key(be.s.LeaseName(key)), be.s.CancelMarkKey(key)
	code, err := scripts.LeaseCancel.Run(ctx, i.rdb, []string{lk, mk}, strconv.FormatUint(res.Fence, 10),
		be.s.Retention().Milliseconds()).Int64()
	switch {
	case err != nil:
		return res, err
	case code == scripts.LeaseCancelStored:
		return res, nil
	case code == scripts.LeaseNoOwner:
		return res, fmt.Errorf("%w (its attempt ended while it was being cancelled)", ErrNotRunning)
	default:
		return res, fmt.Errorf("%w (while cancelling it)", ErrLeaseChanged)
	}
}

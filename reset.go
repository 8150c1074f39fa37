package leasehold

import (
	"context"
	"errors"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
)

// ResetResult is what [Worker.Reset] forgot (see [inspect.ResetResult]).
type ResetResult = inspect.ResetResult

// Reset forgets the record of idempotency key key, so that its next
// delivery runs again as a first attempt (see [inspect.Inspector.Reset]: a
// live lease refuses it with idempotency.ErrResetHeld unless force is set;
// the fence never goes backwards). Reset works before [Worker.Start].
//
// Deprecated: use [Worker.Inspector] and [inspect.Inspector.Reset], which
// the CLI and the console use too.
func (w *Worker) Reset(ctx context.Context, key string, force bool) (ResetResult, error) {
	if err := ValidateKey(key); err != nil {
		return ResetResult{}, err
	}
	in := w.Inspector()
	defer func() { _ = in.Close(context.WithoutCancel(ctx)) }()
	r, err := in.Reset(ctx, key, force)
	if err != nil && !errors.Is(err, idempotency.ErrResetHeld) && !errors.Is(err, idempotency.ErrResetClock) {
		err = mapStoreErr(err)
	}
	return r, err
}

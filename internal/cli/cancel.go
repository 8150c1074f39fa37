package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/inspect"
)

func cmdCancel(ctx context.Context, e *Env, args []string) error {
	var reason string
	k, ops, err := openKeyCommand(ctx, e, "cancel", args, func(f *flags) {
		f.StringVar(&reason, "reason", "", "why the job is cancelled: logged and traced with the request")
	})
	if err != nil {
		return err
	}
	defer ops.close(ctx)
	r, err := ops.in.Cancel(ctx, k, reason)
	switch {
	case errors.Is(err, inspect.ErrUnknownKey):
		return fmt.Errorf("key %q has no record: it never ran, or its record left the retention", k)
	case errors.Is(err, inspect.ErrFinished):
		return fmt.Errorf("key %q has already finished (%w); nothing to cancel: 'reset' forgets its outcome", k, err)
	case errors.Is(err, inspect.ErrNotRunning):
		return fmt.Errorf("key %q is not running now (%w): cancel it while it runs", k, err)
	case errors.Is(err, inspect.ErrLeaseChanged):
		return fmt.Errorf("the lease of %q changed while it was read: run cancel again", k)
	case err != nil:
		return err
	}
	_, _ = fmt.Fprintf(e.Stdout, "cancel of %s requested (fence %d): its worker stops it at its next lease renewal, "+
		"compensates its saga steps and records it as cancelled ('reset' makes it runnable again)\n", k, r.Fence)
	return nil
}

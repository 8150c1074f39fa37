package console

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/leasehold/leasehold/inspect"
)

// cancel asks the worker running the key to cancel it, as `worker cancel`
// does (the same Inspector action): the holder stops the job at its next
// lease renewal, compensates its saga steps and records the key as
// cancelled until it is reset.
func (c *Console) cancel(ctx context.Context, req actionRequest) (actionResult, error) {
	r, err := c.in.Cancel(ctx, req.Key, req.Reason)
	switch {
	case errors.Is(err, inspect.ErrUnknownKey), errors.Is(err, inspect.ErrFinished),
		errors.Is(err, inspect.ErrNotRunning), errors.Is(err, inspect.ErrLeaseChanged):
		return actionResult{}, &conflictError{oneLine(err)}
	case err != nil:
		return actionResult{}, err
	}
	c.seen.add(req.Key, r.Fence)
	return actionResult{Outcome: "cancel_requested", Message: fmt.Sprintf("asked the worker running %s (fence %d) to cancel it: "+
		"it stops at its next lease renewal, compensates its saga and records the key as cancelled", req.Key, r.Fence)}, nil
}

// readPaused puts the job types paused across the fleet into ov.
func (c *Console) readPaused(ctx context.Context, ov *overview) {
	p, err := c.in.Paused(ctx)
	if err != nil {
		ov.PausedErr = oneLine(err)
		return
	}
	ov.Paused = make([]string, 0, len(p))
	for t := range p {
		ov.Paused = append(ov.Paused, t)
	}
	sort.Strings(ov.Paused)
}

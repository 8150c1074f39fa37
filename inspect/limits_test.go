package inspect_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/limit"
	"github.com/leasehold/leasehold/internal/scripts"
)

// The limit actions act on the groups the workers use: a group named
// without its kind (the job type alone), or empty, is refused rather than
// held where no worker looks; a key group longer than the workers keep as
// it is held under the name they keep it under.
func TestLimitActionsGroupNames(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	for _, g := range []string{"", "demo.sleep", "type:", "key:", "sha256:xyz"} {
		if _, err := e.in.HoldLimit(ctx, g, time.Minute); !errors.Is(err, inspect.ErrBadGroup) {
			t.Errorf("HoldLimit(%q) = %v, want ErrBadGroup", g, err)
		}
		if _, err := e.in.ReleaseLimitHold(ctx, g); !errors.Is(err, inspect.ErrBadGroup) {
			t.Errorf("ReleaseLimitHold(%q) = %v, want ErrBadGroup", g, err)
		}
		if _, err := e.in.Limits(ctx, g); !errors.Is(err, inspect.ErrBadGroup) {
			t.Errorf("Limits(%q) = %v, want ErrBadGroup", g, err)
		}
	}

	long := "key:" + strings.Repeat("tenant-", 50) // as WithLimitKey's function may return
	if _, err := e.in.HoldLimit(ctx, long, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The worker asks for a slot under the name it keeps the group under.
	a, err := limit.Acquire(ctx, e.rdb, e.prefix, []limit.Request{{Group: limit.Name(long), Member: "k|w", TTL: time.Minute}})
	if err != nil || a[0].Err != nil {
		t.Fatal(err, a)
	}
	if a[0].Status != scripts.LimitHeld {
		t.Fatalf("a worker's slot of the held long group: status %d, want held (%d)", a[0].Status, scripts.LimitHeld)
	}
	gs, err := e.in.Limits(ctx, long)
	if err != nil || len(gs) != 1 || gs[0].HeldUntil.IsZero() {
		t.Fatalf("Limits(long group) = %+v, %v; want it held", gs, err)
	}
	was, err := e.in.ReleaseLimitHold(ctx, long)
	if err != nil || !was {
		t.Fatalf("ReleaseLimitHold(long group) = %v, %v; want it was held", was, err)
	}
}

// A hold that is not positive is refused, not turned into a hold of 1 ms
// reported as done.
func TestHoldLimitRefusesNonPositive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, d := range []time.Duration{0, -time.Minute} {
		if left, err := e.in.HoldLimit(t.Context(), "type:t.x", d); !errors.Is(err, inspect.ErrBadHold) {
			t.Errorf("HoldLimit(%s) = %s, %v; want ErrBadHold", d, left, err)
		}
	}
	gs, err := e.in.Limits(t.Context(), "type:t.x")
	if err != nil || len(gs) != 1 || !gs[0].HeldUntil.IsZero() {
		t.Fatalf("Limits = %+v, %v; want the group not held", gs, err)
	}
}

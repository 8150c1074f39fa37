package leaseholdtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/outcome"
)

// TestOutcomeNames: an attempt's outcome is named as the worker names it
// (package outcome).
func TestOutcomeNames(t *testing.T) {
	want := map[leaseholdtest.Outcome]outcome.Name{leaseholdtest.Completed: outcome.Completed,
		leaseholdtest.Retry: outcome.Retry, leaseholdtest.Failed: outcome.Failed, leaseholdtest.LeaseLost: outcome.LeaseLost}
	for o, n := range want {
		if o.String() != string(n) {
			t.Errorf("%d.String() = %q, want %q", int(o), o.String(), n)
		}
	}
}

// TestOutcomeUndecodable: a payload that leasehold.Typed cannot decode is
// a terminal failure, as the worker dead-letters it (reason undecodable),
// not a retry.
func TestOutcomeUndecodable(t *testing.T) {
	t.Parallel()
	h := leasehold.Typed(func(context.Context, *leasehold.Job, struct{ N int }) (string, error) { return "ok", nil })
	a := leaseholdtest.New(leaseholdtest.WithPayload([]byte("not json"))).Run(context.Background(), h)
	if !errors.Is(a.Err, leasehold.ErrUndecodable) || a.Outcome() != leaseholdtest.Failed {
		t.Fatalf("outcome %v (err %v), want failed with ErrUndecodable", a.Outcome(), a.Err)
	}
}

// TestOutcomeResultTooLarge: a result over the idempotency store's bound
// (64 KiB, or WithMaxResult's) fails the attempt for good, as the worker's
// commit refuses it; one at the bound completes.
func TestOutcomeResultTooLarge(t *testing.T) {
	t.Parallel()
	ret := func(n int) leasehold.Handler {
		return func(context.Context, *leasehold.Job) ([]byte, error) { return make([]byte, n), nil }
	}
	cases := []struct {
		name string
		opts []leaseholdtest.Opt
		size int
		want leaseholdtest.Outcome
	}{
		{"default bound", nil, 64 << 10, leaseholdtest.Completed},
		{"over the default bound", nil, 64<<10 + 1, leaseholdtest.Failed},
		{"raised bound", []leaseholdtest.Opt{leaseholdtest.WithMaxResult(1 << 20)}, 64<<10 + 1, leaseholdtest.Completed},
		{"lowered bound", []leaseholdtest.Opt{leaseholdtest.WithMaxResult(10)}, 11, leaseholdtest.Failed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := leaseholdtest.New(c.opts...).Run(context.Background(), ret(c.size))
			if a.Outcome() != c.want || (c.want == leaseholdtest.Failed) != errors.Is(a.Err, leasehold.ErrResultTooLarge) {
				t.Fatalf("result of %d bytes: outcome %v (err %v), want %v", c.size, a.Outcome(), a.Err, c.want)
			}
			var tl *idempotency.TooLargeError
			if c.want == leaseholdtest.Failed && (!errors.As(a.Err, &tl) || tl.Size != c.size) {
				t.Fatalf("err %v does not unwrap to the store's TooLargeError of %d bytes", a.Err, c.size)
			}
		})
	}
}

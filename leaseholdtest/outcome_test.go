package leaseholdtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/leasehold/leasehold"
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

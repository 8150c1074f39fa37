package leaseholdtest_test

import (
	"testing"

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

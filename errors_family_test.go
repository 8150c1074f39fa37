package leasehold

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/lease"
)

// TestErrorFamily checks that the sentinels of every layer are one family:
// an error of any package matches the worker's sentinels with errors.Is, with
// no mapper in between.
func TestErrorFamily(t *testing.T) {
	t.Parallel()
	lost := []error{lease.ErrLost, lease.ErrStolen, lease.ErrExpired, lease.ErrRenewDeadline,
		idempotency.ErrLeaseLost, idempotency.ErrRefused, ErrShutdown,
		&LeaseLostError{Key: "k", Fence: 1, Err: lease.ErrExpired}}
	for _, err := range lost {
		for _, target := range []error{ErrLeaseLost, lease.ErrLost, idempotency.ErrLeaseLost} {
			if !errors.Is(fmt.Errorf("wrapped: %w", err), target) {
				t.Errorf("errors.Is(%q, %q) = false, want true", err, target)
			}
		}
		if errors.Is(err, ErrUnavailable) {
			t.Errorf("errors.Is(%q, ErrUnavailable) = true, want false", err)
		}
	}
	down := []error{lease.ErrUnavailable, idempotency.ErrUnavailable, idempotency.ErrOutcomeUnknown,
		compensation.ErrUnavailable}
	for _, err := range down {
		for _, target := range []error{ErrUnavailable, lease.ErrUnavailable, idempotency.ErrUnavailable, compensation.ErrUnavailable} {
			if !errors.Is(fmt.Errorf("wrapped: %w", err), target) {
				t.Errorf("errors.Is(%q, %q) = false, want true", err, target)
			}
		}
		if errors.Is(err, ErrLeaseLost) {
			t.Errorf("errors.Is(%q, ErrLeaseLost) = true, want false", err)
		}
	}
	for _, c := range []struct{ err, target error }{
		{&idempotency.KeyError{Key: "a b", Reason: "space"}, ErrInvalidKey},
		{fmt.Errorf("%w: bad", idempotency.ErrCorrupt), ErrCorruptRecord},
		{fmt.Errorf("%w: too short", idempotency.ErrInvalidTTL), ErrInvalidLeaseTTL},
	} {
		if !errors.Is(c.err, c.target) {
			t.Errorf("errors.Is(%q, %q) = false, want true", c.err, c.target)
		}
	}
	// A sentinel narrowing another reads as one sentence, not a chain.
	for _, err := range []error{ErrShutdown, idempotency.ErrRefused, idempotency.ErrOutcomeUnknown, lease.ErrStolen} {
		if s := err.Error(); strings.Contains(s, ErrLeaseLost.Error()) || strings.Contains(s, ErrUnavailable.Error()) {
			t.Errorf("%q repeats its parent's text", s)
		}
	}
}

package lease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/lease"
)

// CheckTTL accepts a TTL only when the renew interval is shorter than the TTL
// minus its drift margin, both on a Manager and from options alone, and its
// bound is the one NewManager applies to the Manager's own TTL.
func TestCheckTTL(t *testing.T) {
	t.Parallel()
	opts := []lease.Opt{lease.WithTTL(3 * time.Second), lease.WithRenewInterval(time.Second),
		lease.WithDrift(100 * time.Millisecond)}
	m, _, _ := fakeManager(t, opts...)
	for _, tc := range []struct {
		ttl time.Duration
		ok  bool
	}{
		{time.Minute, true},
		{1101 * time.Millisecond, true}, // 1s + 100ms drift + 1ms
		{1100 * time.Millisecond, false},
		{time.Second, false},
		{500 * time.Millisecond, false},
		{0, false},
		{-time.Second, false},
	} {
		for name, err := range map[string]error{
			"Manager.CheckTTL": m.CheckTTL(tc.ttl),
			"CheckTTL":         lease.CheckTTL(tc.ttl, opts...),
		} {
			if tc.ok && err != nil {
				t.Errorf("%s(%s) = %v, want nil", name, tc.ttl, err)
			}
			if !tc.ok && !errors.Is(err, lease.ErrInvalid) {
				t.Errorf("%s(%s) = %v, want ErrInvalid", name, tc.ttl, err)
			}
		}
	}
	// The default drift grows with the TTL (TTL/100 + 2ms): with a 1s
	// interval, 1.01s is too short (drift 12.1ms) and 1.02s is enough.
	def := []lease.Opt{lease.WithTTL(3 * time.Second), lease.WithRenewInterval(time.Second)}
	if err := lease.CheckTTL(1010*time.Millisecond, def...); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("CheckTTL(1.01s) with the default drift = %v, want ErrInvalid", err)
	}
	if err := lease.CheckTTL(1020*time.Millisecond, def...); err != nil {
		t.Errorf("CheckTTL(1.02s) with the default drift = %v, want nil", err)
	}
	// NewManager applies the same bound to its own TTL.
	if _, err := lease.NewManagerWithBackend(newFakeBackend(newFakeClock()), lease.WithTTL(1100*time.Millisecond),
		lease.WithRenewInterval(time.Second), lease.WithDrift(100*time.Millisecond)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("NewManager with a TTL its interval cannot keep = %v, want ErrInvalid", err)
	}
}

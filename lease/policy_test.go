package lease_test

import (
	"context"
	"errors"
	"testing"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// TestEvictionPolicyFromInfo: where CONFIG is renamed away (managed
// services), Start reads maxmemory-policy from INFO memory and still refuses
// an evicting one; noeviction starts.
func TestEvictionPolicyFromInfo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy string
		refuse bool
	}{{"allkeys-lru", true}, {"volatile-lfu", true}, {"noeviction", false}} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			srv := testkit.StartRedis(t, testkit.WithRedisConfig(`rename-command CONFIG ""`,
				"maxmemory 64mb", "maxmemory-policy "+tc.policy))
			m, err := lease.NewManager(srv.Client(t))
			if err != nil {
				t.Fatal(err)
			}
			err = m.Start(context.Background())
			if got := errors.Is(err, lease.ErrEvictionPolicy); got != tc.refuse {
				t.Fatalf("Start on %s without CONFIG = %v, want refused %v", tc.policy, err, tc.refuse)
			}
			if err == nil {
				_ = m.Shutdown(context.Background())
			}
		})
	}
}

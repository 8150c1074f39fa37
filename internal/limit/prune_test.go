package limit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/limit"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testkit"
)

// register writes groups into the registry as a worker would at seen.
func register(ctx context.Context, t *testing.T, c *redis.Client, prefix string, seen time.Time, groups ...string) {
	t.Helper()
	m := make(map[string]limit.Spec, len(groups))
	for _, g := range groups {
		m[g] = limit.Spec{Limit: 2}
	}
	if err := limit.Register(ctx, c, prefix, m, seen); err != nil {
		t.Fatal(err)
	}
}

// registry returns the groups the registry holds.
func registry(ctx context.Context, t *testing.T, c *redis.Client, prefix string) map[string]string {
	t.Helper()
	m, err := c.HGetAll(ctx, limit.RegistryKey(prefix)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Prune removes the groups last registered before the cutoff and keeps the
// ones registered since, and a value not of Register's form.
func TestPruneRemovesStaleGroups(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	now := time.Now()
	register(ctx, t, c, prefix, now.Add(-limit.PruneAge-time.Minute), "key:stale", "type:stale")
	register(ctx, t, c, prefix, now.Add(-limit.PruneAge+time.Minute), "key:fresh")
	register(ctx, t, c, prefix, now, "type:fresh")
	if err := c.HSet(ctx, limit.RegistryKey(prefix), "key:odd", "not a registration").Err(); err != nil {
		t.Fatal(err)
	}
	next, n, err := limit.Prune(ctx, c, prefix, 0, now.Add(-limit.PruneAge))
	if err != nil || n != 2 || next != 0 {
		t.Fatalf("Prune = cursor %d, %d removed, %v; want cursor 0 (one page), 2 removed", next, n, err)
	}
	got := registry(ctx, t, c, prefix)
	for _, g := range []string{"key:fresh", "type:fresh", "key:odd"} {
		if _, ok := got[g]; !ok {
			t.Errorf("%s was removed", g)
		}
	}
	for _, g := range []string{"key:stale", "type:stale"} {
		if _, ok := got[g]; ok {
			t.Errorf("%s, last registered before the cutoff, is still there", g)
		}
	}
}

// A group registered again after Prune read its page is kept: the script
// reads each candidate again. It is given the page as read before, when
// both candidates were stale, after a worker registered one of them anew.
func TestPruneKeepsAGroupRegisteredMeanwhile(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	now := time.Now()
	cutoff := now.Add(-limit.PruneAge)
	register(ctx, t, c, prefix, cutoff.Add(-time.Hour), "key:back", "key:gone")
	register(ctx, t, c, prefix, now, "key:back")
	n, err := scripts.LimitPrune.Run(ctx, c, []string{limit.RegistryKey(prefix)},
		cutoff.UnixMilli(), "key:back", "key:gone", "key:never").Int()
	if err != nil || n != 1 {
		t.Fatalf("limit_prune.lua = %d, %v; want 1 removed", n, err)
	}
	got := registry(ctx, t, c, prefix)
	if _, ok := got["key:back"]; !ok {
		t.Error("key:back, registered again after its page was read, was removed")
	}
	if _, ok := got["key:gone"]; ok {
		t.Error("key:gone, still stale, was kept")
	}
}

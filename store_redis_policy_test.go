package leasehold

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// TestStartRefusesEvictingRedis: a Redis whose maxmemory-policy evicts keys
// answers; Start refuses it as a configuration to fix, never as an outage
// (ErrUnavailable would tell the caller to wait and retry).
func TestStartRefusesEvictingRedis(t *testing.T) {
	t.Parallel()
	srv := testkit.StartRedis(t, testkit.WithRedisConfig("maxmemory 64mb", "maxmemory-policy allkeys-lru"))
	rdb := redis.NewClient(srv.Options())
	t.Cleanup(func() { _ = rdb.Close() })
	w, err := New(rdb, WithTopics("t"))
	must(t, err)
	must(t, w.Register("t", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = w.Start(ctx)
	if !errors.Is(err, lease.ErrEvictionPolicy) || errors.Is(err, ErrUnavailable) {
		t.Errorf("Start on allkeys-lru = %v; want lease.ErrEvictionPolicy, not ErrUnavailable", err)
	}
	_ = w.Shutdown(ctx)
}

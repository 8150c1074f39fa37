package testkit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
)

func TestRedisServer(t *testing.T) {
	srv := testkit.StartRedis(t)
	c := srv.Client(t)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	srv.Restart(true)
	if v := c.Get(ctx, "k").Val(); v != "v" {
		t.Fatalf("after Restart(true): %q, want the data kept", v)
	}
	srv.Restart(false)
	if n := c.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("after Restart(false): %d keys, want none", n)
	}

	srv.Pause()
	pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := c.Ping(pctx).Err()
	cancel()
	if err == nil {
		t.Fatal("a paused server answered")
	}
	srv.Resume()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("after Resume: %v", err)
	}

	srv.Kill()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("a killed server answered")
	}
	srv.Restart(false)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("restart after Kill: %v", err)
	}
}

func TestRedisConfigLines(t *testing.T) {
	srv := testkit.StartRedis(t, testkit.WithRedisConfig("maxmemory-policy allkeys-lru"))
	got := srv.Client(t).ConfigGet(context.Background(), "maxmemory-policy").Val()["maxmemory-policy"]
	if got != "allkeys-lru" {
		t.Fatalf("maxmemory-policy = %q", got)
	}
}

func TestSharedRedisPrefixCleanedUp(t *testing.T) {
	var prefix string
	t.Run("user", func(t *testing.T) {
		c, p := testkit.SharedRedis(t)
		prefix = p
		if !strings.HasPrefix(p, "t:") || !strings.HasSuffix(p, ":") {
			t.Fatalf("prefix %q", p)
		}
		for _, k := range []string{"a", "b", "{c}d"} {
			c.Set(context.Background(), p+k, 1, time.Minute)
		}
	})
	c, _ := testkit.SharedRedis(t)
	if keys := c.Keys(context.Background(), prefix+"*").Val(); len(keys) != 0 {
		t.Fatalf("keys left under %s: %v", prefix, keys)
	}
}

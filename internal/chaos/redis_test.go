package chaos

import (
	"context"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func startRedis(t *testing.T) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is required: %v", err)
	}
	r, err := NewRedis(t.Context(), bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.StartReady(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(5 * time.Second) })
	return r
}

func TestRedisAOFSurvivesBounceAndKill(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer func() { _ = c.Close() }()

	cfg, err := c.ConfigGet(ctx, "appendonly").Result()
	if err != nil || cfg["appendonly"] != "yes" {
		t.Fatalf("appendonly = %v (%v), want yes", cfg, err)
	}
	if err := c.Set(ctx, "before-bounce", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	down := 300 * time.Millisecond
	outage, err := r.Bounce(ctx, 5*time.Second, down)
	if err != nil {
		t.Fatal(err)
	}
	if outage < down {
		t.Fatalf("outage %s shorter than the time Redis was kept down (%s)", outage, down)
	}
	if got, err := c.Get(ctx, "before-bounce").Result(); err != nil || got != "1" {
		t.Fatalf("after bounce: %q, %v; want the key kept by the AOF", got, err)
	}

	// SIGKILL: what Redis has written to the append-only file survives (the
	// file's pages outlive the process; fsync, every second, matters for a
	// crash of the machine). Redis writes a command there before it answers,
	// unless an fsync in flight postpones the write (up to 2 s): wait until
	// the file has grown.
	size := func() int64 {
		info, err := c.InfoMap(ctx, "persistence").Result()
		if err != nil {
			t.Fatal(err)
		}
		v := info["Persistence"]["aof_current_size"]
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("INFO persistence: aof_current_size %q: %v", v, err)
		}
		return n
	}
	before := size()
	if err := c.Set(ctx, "before-kill", "2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for size() <= before {
		if ctx.Err() != nil {
			t.Fatalf("the append-only file did not grow after SET: %v", ctx.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered after SIGKILL")
	}
	if err := r.StartReady(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "before-kill").Result(); err != nil || got != "2" {
		t.Fatalf("after kill: %q, %v; want the key kept by the AOF", got, err)
	}
}

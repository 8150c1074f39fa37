package benchkit

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestStartRedis(t *testing.T) {
	r, err := StartRedis("")
	if err != nil {
		t.Fatalf("StartRedis: %v", err)
	}
	defer r.Stop()
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	defer func() { _ = c.Close() }()
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET = %q, %v", v, err)
	}
	cfg, err := c.ConfigGet(ctx, "*").Result()
	if err != nil {
		t.Fatalf("CONFIG GET: %v", err)
	}
	for name, want := range map[string]string{
		"save": "", "appendonly": "no", "maxmemory-policy": "noeviction", "bind": "127.0.0.1", "dir": r.Dir(),
	} {
		if cfg[name] != want {
			t.Errorf("%s = %q, want %q", name, cfg[name], want)
		}
	}

	r.Stop()
	r.Stop() // a second Stop is a no-op
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("the server answers after Stop")
	}
	if _, err := os.Stat(r.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("its temporary directory is still there after Stop: %v", err)
	}
}

func TestStartRedisInDirKeepsDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	r, err := StartRedis(dir)
	if err != nil {
		t.Fatalf("StartRedis: %v", err)
	}
	r.Stop()
	if r.Dir() != dir {
		t.Fatalf("Dir() = %q, want %q", r.Dir(), dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "redis.log")); err != nil {
		t.Fatalf("the server's log in the given directory: %v", err)
	}
}

func TestStartRedisWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	r, err := StartRedis("")
	if err == nil {
		r.Stop()
		t.Fatal("StartRedis succeeded without redis-server on PATH")
	}
	if !strings.Contains(err.Error(), "is it on PATH?") {
		t.Fatalf("StartRedis error %q does not say what is missing", err)
	}
}

func TestStartOnTakenPort(t *testing.T) {
	other, err := StartRedis("")
	if err != nil {
		t.Fatalf("StartRedis: %v", err)
	}
	defer other.Stop()
	_, port, _ := net.SplitHostPort(other.Addr())
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	r, err := startOn(t.TempDir(), p)
	if err == nil {
		r.Stop()
		t.Fatal("startOn a port another redis-server holds succeeded")
	}
	if !errors.Is(err, ErrPortTaken) {
		t.Fatalf("startOn a taken port: %v, want ErrPortTaken", err)
	}
	// The other server is left alone.
	c := redis.NewClient(&redis.Options{Addr: other.Addr(), MaxRetries: -1})
	defer func() { _ = c.Close() }()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("the other server after the failed start: %v", err)
	}
}

func TestStartOnServerThatExits(t *testing.T) {
	// A port that cannot be bound: redis-server exits at once.
	_, err := startOn(t.TempDir(), 70000)
	if !errors.Is(err, ErrExited) {
		t.Fatalf("startOn port 70000: %v, want ErrExited", err)
	}
}

func TestKeyPrefix(t *testing.T) {
	a, b := KeyPrefix("bench:renew:"), KeyPrefix("bench:renew:")
	if a == b {
		t.Fatalf("two prefixes are equal: %q", a)
	}
	for _, p := range []string{a, b} {
		rest, ok := strings.CutPrefix(p, "bench:renew:")
		if !ok || len(rest) != 11 || !strings.HasSuffix(rest, ":") {
			t.Fatalf("KeyPrefix = %q, want bench:renew: + 10 characters + ':'", p)
		}
		if strings.ToLower(rest) != rest || strings.ContainsAny(rest, `*?[]\`) {
			t.Fatalf("KeyPrefix = %q, want lower case without glob characters", p)
		}
	}
}

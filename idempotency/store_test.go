package idempotency

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

func TestRedisStoppedIsUnavailable(t *testing.T) {
	t.Parallel()
	srv := testkit.StartRedis(t)
	c := srv.Client(t)
	// A TTL long enough that the lease outlives the outage locally.
	e := setupOn(t, c, "u:", nil, lease.WithTTL(20*time.Second))
	ctx := t.Context()
	held := e.claim(t, "running", fp("a"), Acquired)
	srv.Stop()

	got, err := e.s.Claim(ctx, "new", fp("a"))
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, lease.ErrUnavailable) || got.Outcome != 0 || got.Lease != nil {
		t.Fatalf("Claim with Redis stopped = %v, %v; want ErrUnavailable and no outcome", got.Outcome, err)
	}
	for i, c := range e.s.ClaimBatch(ctx, []Request{{Key: "b1", Fingerprint: fp("a")}, {Key: "b2", Fingerprint: fp("a")}}) {
		if !errors.Is(c.Err, ErrUnavailable) {
			t.Fatalf("ClaimBatch[%d] with Redis stopped: %v", i, c.Err)
		}
	}
	if err := e.s.Complete(ctx, held, []byte("r")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Complete with Redis stopped = %v, want ErrUnavailable", err)
	}
	if err := e.s.Fail(ctx, held, Terminal, errors.New("x")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Fail with Redis stopped = %v, want ErrUnavailable", err)
	}
	if n := len(e.m.Held()); n != 1 {
		t.Fatalf("Manager holds %d leases, want only the claim made before the stop", n)
	}

	// The server comes back empty, as after losing its data: the earlier
	// claim's lease is gone, so finishing it must not write a result.
	srv.Restart(false)
	err = e.s.Complete(ctx, held, []byte("r"))
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Complete after Redis lost its data = %v, want ErrLeaseLost", err)
	}
	if n, _ := c.DBSize(ctx).Result(); n != 0 {
		keys, _ := c.Keys(ctx, "*").Result()
		t.Fatalf("keys written while and after Redis was down: %q", keys)
	}
	e.claim(t, "new", fp("a"), Acquired)
}

func TestEvictionPolicyRefused(t *testing.T) {
	t.Parallel()
	srv := testkit.StartRedis(t, testkit.WithRedisConfig("maxmemory 64mb", "maxmemory-policy allkeys-lru"))
	c := srv.Client(t)
	m, err := lease.NewManager(c, lease.WithPrefix("p:"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(t.Context(), c, m)
	var pe *PolicyError
	if !errors.As(err, &pe) || !errors.Is(err, ErrEvictionPolicy) || pe.Policy != "allkeys-lru" {
		t.Fatalf("New on allkeys-lru = %v, want a *PolicyError", err)
	}
	if !strings.Contains(err.Error(), "evict") || !strings.Contains(err.Error(), "WithAllowEviction") {
		t.Fatalf("error does not say why nor how to override: %q", err)
	}
	if _, err := New(t.Context(), c, m, WithAllowEviction()); err != nil {
		t.Fatalf("New with WithAllowEviction: %v", err)
	}
	if _, err := New(t.Context(), c, m, WithMaxmemoryPolicy("volatile-ttl")); !errors.Is(err, ErrEvictionPolicy) {
		t.Fatalf("stated volatile-ttl = %v, want ErrEvictionPolicy", err)
	}
}

// TestConfigDisabled: where CONFIG is disabled or renamed (managed
// services), the policy is read from INFO memory: an evicting one is still
// refused, noeviction starts, and the listpack limits fall back to Redis's
// defaults.
func TestConfigDisabled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy string
		want   error
	}{{"noeviction", nil}, {"allkeys-lru", ErrEvictionPolicy}, {"volatile-ttl", ErrEvictionPolicy}} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			srv := testkit.StartRedis(t, testkit.WithRedisConfig(`rename-command CONFIG ""`,
				"maxmemory 64mb", "maxmemory-policy "+tc.policy))
			c := srv.Client(t)
			if err := c.ConfigGet(t.Context(), "maxmemory-policy").Err(); err == nil {
				t.Fatal("CONFIG GET answered on a server with CONFIG renamed away")
			}
			m, err := lease.NewManager(c, lease.WithPrefix("p:"))
			if err != nil {
				t.Fatal(err)
			}
			s, err := New(t.Context(), c, m)
			if !errors.Is(err, tc.want) {
				t.Fatalf("New without CONFIG on %s = %v, want %v", tc.policy, err, tc.want)
			}
			var pe *PolicyError
			if tc.want != nil && (!errors.As(err, &pe) || pe.Policy != tc.policy) {
				t.Fatalf("New on %s = %v, want a *PolicyError naming the policy read from INFO", tc.policy, err)
			}
			if tc.want == nil && s.inline != 64 {
				t.Fatalf("inline limit without CONFIG = %d, want the Redis default 64", s.inline)
			}
		})
	}
}

// TestGetdelRequired: the completion reads its lease with GETDEL (Redis
// 6.2), so New refuses a server that does not take it (a server before 6.2
// answers an unknown command, as one with GETDEL renamed away does here) and
// an ACL user denied it, each with an error that names GETDEL, instead of
// failing every completion later.
func TestGetdelRequired(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]testkit.RedisOption{
		"renamed":   testkit.WithRedisConfig(`rename-command GETDEL ""`),
		"acl":       testkit.WithACLUser("w", "s3cret-acl", append(testkit.ProjectACLRules("lh:"), "-getdel")...),
		"permitted": testkit.WithACLUser("w", "s3cret-acl", testkit.ProjectACLRules("lh:")...),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := testkit.StartRedis(t, opt)
			o := srv.Options()
			if name != "renamed" {
				o.Username, o.Password = "w", "s3cret-acl"
			}
			c := redis.NewClient(o)
			t.Cleanup(func() { _ = c.Close() })
			m, err := lease.NewManager(c, lease.WithPrefix("lh:"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(t.Context(), c, m, WithMaxmemoryPolicy("noeviction"))
			if name == "permitted" {
				if err != nil {
					t.Fatalf("New as the least-privilege user: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "must take GETDEL") {
				t.Fatalf("New on a server without GETDEL (%s) = %v, want an error naming GETDEL", name, err)
			}
		})
	}
}

func TestScriptCacheFlushed(t *testing.T) {
	t.Parallel()
	// A private server: flushing the shared server's script cache would hit
	// tests running in parallel between their reload and their resend.
	srv := testkit.StartRedis(t)
	e := setupOn(t, srv.Client(t), "lh:", nil)
	ctx := t.Context()
	// Stands for a restart or failover that emptied the script cache: the
	// pipelines load the scripts again and carry on.
	if err := e.c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cs := e.s.ClaimBatch(ctx, []Request{{Key: "a", Fingerprint: fp("a")}, {Key: "b", Fingerprint: fp("b")}})
	for _, c := range cs {
		if c.Outcome != Acquired {
			t.Fatalf("claim after SCRIPT FLUSH: %v %v", c.Outcome, c.Err)
		}
	}
	if err := e.c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, err := range e.s.CompleteBatch(ctx, []Completion{{Claim: cs[0]}, {Claim: cs[1]}}) {
		if err != nil {
			t.Fatalf("complete after SCRIPT FLUSH: %v", err)
		}
	}
}

func TestNewValidatesOptions(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	m, err := lease.NewManager(c, lease.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	for name, opt := range map[string]Opt{
		"brace prefix": WithPrefix("a{b"),
		"no windows":   WithWindows(-1),
		"no shards":    WithShards(-3),
		"short":        WithRetention(time.Millisecond),
	} {
		if _, err := New(t.Context(), c, m, opt); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	if _, err := New(t.Context(), redis.UniversalClient(nil), m); err == nil {
		t.Error("New accepted a nil client")
	}
}

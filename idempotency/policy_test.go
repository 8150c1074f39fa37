package idempotency

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// TestPolicyLeastPrivilegeUser: a Redis user with the project's
// least-privilege ACL (keys under the prefix, +@read +@write +@scripting
// +@connection +time -@dangerous) may run neither CONFIG GET nor INFO (both
// are @dangerous). New then refuses with ErrPolicyUnknown naming both fixes;
// with +info added the policy is read from INFO memory (an evicting one is
// refused); with the policy stated, the user's ACL needs nothing more.
func TestPolicyLeastPrivilegeUser(t *testing.T) {
	t.Parallel()
	const user, password = "lh-worker", "s3cret-lp"
	rules := testkit.ProjectACLRules("p:")
	srv := testkit.StartRedis(t,
		testkit.WithACLUser(user, password, rules...),
		testkit.WithRedisConfig("user "+user+"-info on >"+password+" "+strings.Join(append(rules, "+info"), " ")),
		testkit.WithRedisConfig("maxmemory 64mb", "maxmemory-policy allkeys-lru"))
	client := func(name string) *redis.Client {
		o := srv.Options()
		o.Username, o.Password = name, password
		c := redis.NewClient(o)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	newStore := func(c *redis.Client, opts ...Opt) error {
		m, err := lease.NewManager(c, lease.WithPrefix("p:"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(t.Context(), c, m, append([]Opt{WithPrefix("p:")}, opts...)...)
		return err
	}

	err := newStore(client(user))
	if !errors.Is(err, ErrPolicyUnknown) || !strings.Contains(err.Error(), "+info") ||
		!strings.Contains(err.Error(), "WithMaxmemoryPolicy") {
		t.Fatalf("New as the least-privilege user = %v, want ErrPolicyUnknown naming +info and WithMaxmemoryPolicy", err)
	}
	if err := newStore(client(user), WithMaxmemoryPolicy("noeviction")); err != nil {
		t.Fatalf("New as the least-privilege user with a stated policy: %v", err)
	}
	var pe *PolicyError
	if err := newStore(client(user + "-info")); !errors.As(err, &pe) || pe.Policy != "allkeys-lru" {
		t.Fatalf("New as a user with +info on allkeys-lru = %v, want a *PolicyError read from INFO", err)
	}
}

func TestParseInfoPolicy(t *testing.T) {
	t.Parallel()
	info := "# Memory\r\nused_memory:1\r\nmaxmemory_policy:volatile-lfu\r\nallocator_frag_ratio:1.0\r\n"
	if p, ok := parseInfoPolicy(info); !ok || p != "volatile-lfu" {
		t.Fatalf("parseInfoPolicy = %q, %v", p, ok)
	}
	if _, ok := parseInfoPolicy("# Memory\r\nused_memory:1\r\n"); ok {
		t.Fatal("parseInfoPolicy found a policy in a reply without one")
	}
}

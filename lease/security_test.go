package lease_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// secManager starts a Manager with a short TTL over c and shuts it down at
// cleanup. It returns Start's error instead of failing.
func secManager(t *testing.T, c redis.UniversalClient, opts ...lease.Opt) (*lease.Manager, error) {
	t.Helper()
	m, err := lease.NewManager(c, append([]lease.Opt{lease.WithTTL(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		return m, err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Shutdown(ctx)
	})
	return m, nil
}

// secRoundTrip acquires, checks that a second acquire is refused, and
// releases, so that every lease script runs once through c.
func secRoundTrip(t *testing.T, m *lease.Manager) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := m.Acquire(ctx, "sec-job")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if _, err := m.Acquire(ctx, "sec-job"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second Acquire: %v, want ErrHeld", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func TestSecurityRequirePass(t *testing.T) {
	t.Parallel()
	const password = "s3cret-requirepass"
	srv := testkit.StartRedis(t, testkit.WithPassword(password))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for name, pw := range map[string]string{"no password": "", "wrong password": "not-it"} {
		opt := srv.Options()
		opt.Password = pw
		c := redis.NewClient(opt)
		defer func() { _ = c.Close() }()
		m, err := secManager(t, c)
		if err == nil {
			t.Fatalf("%s: Start succeeded against a server that requires a password", name)
		}
		if _, err := m.Acquire(ctx, "sec-job"); err == nil {
			t.Fatalf("%s: Acquire succeeded", name)
		}
	}

	opt := srv.Options()
	opt.Password = password
	c := redis.NewClient(opt)
	defer func() { _ = c.Close() }()
	m, err := secManager(t, c)
	if err != nil {
		t.Fatalf("Start with the password: %v", err)
	}
	secRoundTrip(t, m)
	// Nothing was written by the refused managers: the keyspace is empty
	// after the successful round trip released its lease (its fence
	// counter may remain, under the prefix).
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if len(k) < 3 || k[:3] != "lh:" {
			t.Errorf("key %q outside the prefix", k)
		}
	}
}

func TestSecurityACLUserLimitedToPrefix(t *testing.T) {
	t.Parallel()
	const (
		user, password   = "leasehold", "s3cret-acl"
		admin, adminPass = "admin", "s3cret-admin"
	)
	srv := testkit.StartRedis(t,
		testkit.WithACLUser(user, password, testkit.ProjectACLRules("lh:")...),
		testkit.WithRedisConfig("user "+admin+" on >"+adminPass+" ~* &* +@all"),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	login := func(u, p string) *redis.Client {
		opt := srv.Options()
		opt.Username, opt.Password = u, p
		c := redis.NewClient(opt)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c, root := login(user, password), login(admin, adminPass)

	// The default user is off: an anonymous client is refused.
	if err := srv.Client(t).Set(ctx, "lh:x", "1", 0).Err(); err == nil {
		t.Fatal("anonymous SET succeeded with the default user off")
	}

	// Under the project prefix, every lease script works (CONFIG GET for the
	// eviction check is refused and skipped).
	m, err := secManager(t, c, lease.WithPrefix("lh:"))
	if err != nil {
		t.Fatalf("Start as the restricted user: %v", err)
	}
	secRoundTrip(t, m)

	// With another prefix, the scripts are refused and nothing is written.
	other, err := secManager(t, c, lease.WithPrefix("other:"))
	if err == nil {
		if _, err = other.Acquire(ctx, "sec-job"); err == nil {
			t.Fatal("Acquire outside the permitted prefix succeeded")
		}
	}
	if !containsNoPerm(err) {
		t.Fatalf("outside the prefix: %v, want a NOPERM refusal", err)
	}
	if n, err := root.Keys(ctx, "other:*").Result(); err != nil || len(n) != 0 {
		t.Fatalf("keys written outside the prefix: %v, %v", n, err)
	}

	// Dangerous and out-of-prefix commands are refused.
	for what, cmd := range map[string]func() error{
		"SET outside prefix": func() error { return c.Set(ctx, "x", "1", 0).Err() },
		"FLUSHALL":           func() error { return c.FlushAll(ctx).Err() },
		"CONFIG SET":         func() error { return c.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err() },
		"KEYS":               func() error { return c.Keys(ctx, "*").Err() },
		"EVAL touching a key it did not declare": func() error {
			return c.Eval(ctx, "return redis.call('SET', 'x', '1')", []string{"lh:declared"}).Err()
		},
	} {
		if err := cmd(); !containsNoPerm(err) && (err == nil || !strings.Contains(err.Error(), "can't access")) {
			t.Errorf("%s as the restricted user: %v, want NOPERM", what, err)
		}
	}
	if n, err := root.Exists(ctx, "x").Result(); err != nil || n != 0 {
		t.Fatalf("key x written despite the ACL: %d, %v", n, err)
	}
	if pol, err := root.ConfigGet(ctx, "maxmemory-policy").Result(); err != nil || pol["maxmemory-policy"] != "noeviction" {
		t.Fatalf("maxmemory-policy changed: %v, %v", pol, err)
	}
}

// containsNoPerm reports whether err is Redis's ACL refusal, however wrapped.
func containsNoPerm(err error) bool {
	return err != nil && strings.Contains(err.Error(), "NOPERM")
}

func TestSecurityTLS(t *testing.T) {
	t.Parallel()
	x := testkit.NewTLS(t)
	testkit.StartRedis(t, x.Option())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c := redis.NewClient(x.ClientOptions())
	defer func() { _ = c.Close() }()
	m, err := secManager(t, c)
	if err != nil {
		t.Fatalf("Start over TLS: %v", err)
	}
	secRoundTrip(t, m)

	refused := map[string]*redis.Options{}
	plain := x.ClientOptions()
	plain.TLSConfig = nil
	refused["plain text to the TLS port"] = plain

	otherCA := testkit.NewTLS(t)
	wrongCA := x.ClientOptions()
	wrongCA.TLSConfig = otherCA.ClientConfig()
	refused["server certificate from an untrusted CA"] = wrongCA

	noCert := x.ClientOptions()
	noCert.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: x.CAs, ServerName: "127.0.0.1"}
	refused["client without a certificate (mutual TLS)"] = noCert

	badName := x.ClientOptions()
	badName.TLSConfig = x.ClientConfig()
	badName.TLSConfig.ServerName = "redis.example.com"
	refused["server name mismatch"] = badName

	for what, opt := range refused {
		c := redis.NewClient(opt)
		err := c.Ping(ctx).Err()
		_ = c.Close()
		if err == nil {
			t.Errorf("%s: PING succeeded", what)
		}
	}
}

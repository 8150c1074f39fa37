package lease_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

func TestKey(t *testing.T) {
	c := redis.NewClient(&redis.Options{})
	defer func() { _ = c.Close() }()
	m, err := lease.NewManager(c, lease.WithPrefix("p:"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"job-1":     "p:lease:{job-1}",
		"rec:{k}":   "p:lease:rec:{k}",
		"a{}b":      "p:lease:{a{}b}", // an empty tag is no tag
		"x}y{z":     "p:lease:{x}y{z}",
		"{t}:{u}":   "p:lease:{t}:{u}",
		"b{tag}end": "p:lease:b{tag}end",
	} {
		if got := m.Key(name); got != want {
			t.Errorf("Key(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestAcquireHeldRelease(t *testing.T) {
	ttl := 2 * time.Second
	m1, c, prefix := setup(t, lease.WithTTL(ttl))
	m2 := start(t, c, lease.WithPrefix(prefix), lease.WithTTL(ttl))
	ctx := context.Background()

	l := acquire(t, m1, "job")
	if l.Name() != "job" || leasing.Token(l) == "" || l.Fence() == 0 || l.Err() != nil || isDone(l) {
		t.Fatalf("new lease: name %q token %q fence %d err %v", l.Name(), leasing.Token(l), l.Fence(), l.Err())
	}
	h, err := c.Get(ctx, m1.Key("job")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := leasing.Token(l) + " " + strconv.FormatUint(l.Fence(), 10) + " " + strconv.FormatInt(ttl.Milliseconds(), 10); h != want {
		t.Fatalf("lease key %q, want %q", h, want)
	}
	if pttl := c.PTTL(ctx, m1.Key("job")).Val(); pttl <= 0 || pttl > ttl {
		t.Fatalf("PTTL = %s, want in (0, %s]", pttl, ttl)
	}

	_, err = m2.Acquire(ctx, "job")
	var he *lease.HeldError
	if !errors.As(err, &he) || !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second Acquire: %v, want a *HeldError", err)
	}
	if he.Name != "job" || he.Token != leasing.Token(l) || he.Remaining <= 0 || he.Remaining > ttl {
		t.Fatalf("HeldError = %+v, want holder %q and remaining in (0, %s]", he, leasing.Token(l), ttl)
	}

	lost := make(chan error, 1)
	l.OnLost(func(err error) { lost <- err })
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if !isDone(l) || !errors.Is(l.Err(), lease.ErrReleased) || !errors.Is(context.Cause(l.Context()), lease.ErrReleased) {
		t.Fatalf("after Release: done %v, err %v, cause %v", isDone(l), l.Err(), context.Cause(l.Context()))
	}
	if n := c.Exists(ctx, m1.Key("job")).Val(); n != 0 {
		t.Fatal("key still there after Release")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	l2 := acquire(t, m2, "job")
	if l2.Fence() <= l.Fence() || leasing.Token(l2) == leasing.Token(l) {
		t.Fatalf("reacquired fence %d token %q after fence %d token %q", l2.Fence(), leasing.Token(l2), l.Fence(), leasing.Token(l))
	}
	select {
	case err := <-lost:
		t.Fatalf("OnLost ran on Release: %v", err)
	default:
	}
	if got := len(m1.Held()) + len(m2.Held()); got != 1 {
		t.Fatalf("Held() total = %d, want 1", got)
	}
}

func TestAcquireArguments(t *testing.T) {
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	m, err := lease.NewManager(c, lease.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(ctx, "x"); !errors.Is(err, lease.ErrNotStarted) {
		t.Fatalf("Acquire before Start: %v", err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err == nil {
		t.Fatal("second Start succeeded")
	}
	for _, name := range []string{"", string(make([]byte, lease.MaxNameLen+1))} {
		if _, err := m.Acquire(ctx, name); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("Acquire(%d bytes) = %v, want ErrInvalid", len(name), err)
		}
	}
	if err := m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(ctx, "x"); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("Acquire after Shutdown: %v", err)
	}
	if err := m.Start(ctx); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("Start after Shutdown: %v", err)
	}
	for _, opts := range [][]lease.Opt{
		{lease.WithTTL(-time.Second)},
		{lease.WithTTL(time.Second), lease.WithRenewInterval(time.Second)},
		{lease.WithTTL(time.Second), lease.WithDrift(-time.Millisecond)},
	} {
		if _, err := lease.NewManager(c, opts...); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("NewManager with bad options: %v, want ErrInvalid", err)
		}
	}
}

// A release by a lease whose key now has another owner, or that carries an
// old fence, is refused and leaves the key as it was.
func TestNonOwnerReleaseRefused(t *testing.T) {
	m, c, prefix := setup(t, lease.WithTTL(3*time.Second))
	ctx := context.Background()
	l := acquire(t, m, "job")
	key := m.Key("job")
	b := lease.NewRedisBackend(c, prefix)

	before := c.Get(ctx, key).Val()
	for _, tc := range []struct {
		name  string
		token string
		fence uint64
	}{
		{"other token", "intruder", l.Fence()},
		{"old fence", leasing.Token(l), l.Fence() - 1},
	} {
		if err := b.Release(ctx, "job", tc.token, tc.fence); !errors.Is(err, lease.ErrStolen) {
			t.Errorf("%s: Release = %v, want ErrStolen", tc.name, err)
		}
	}
	if after := c.Get(ctx, key).Val(); after != before {
		t.Fatalf("refused releases changed the lease from %q to %q", before, after)
	}
	if l.Err() != nil {
		t.Fatalf("lease lost: %v", l.Err())
	}

	// Now another owner really takes the key: the old holder's Release is
	// refused, changes nothing, and reports the loss.
	c.Set(ctx, key, "new-owner "+strconv.FormatUint(l.Fence()+1, 10)+" 3000", 3*time.Second)
	stolen := c.Get(ctx, key).Val()
	lost := make(chan error, 1)
	l.OnLost(func(err error) { lost <- err })
	if err := l.Release(ctx); !errors.Is(err, lease.ErrStolen) || !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Release of a stolen lease = %v, want ErrStolen", err)
	}
	if after := c.Get(ctx, key).Val(); after != stolen {
		t.Fatalf("refused release changed the new owner's lease from %q to %q", stolen, after)
	}
	if err := <-lost; !errors.Is(err, lease.ErrStolen) {
		t.Fatalf("OnLost got %v", err)
	}
	if err := l.Release(ctx); !errors.Is(err, lease.ErrStolen) {
		t.Fatalf("Release again = %v", err)
	}
}

// fencedSet is a fenced script that sets KEYS[2] to ARGV[3].
func fencedSet(t *testing.T) *redis.Script {
	return redis.NewScript(fencePrelude(t) + "\nredis.call('SET', KEYS[2], ARGV[3])\nreturn 1\n")
}

func TestFenced(t *testing.T) {
	m, c, prefix := setup(t, lease.WithTTL(3*time.Second))
	ctx := context.Background()
	s := fencedSet(t)
	out := m.Key("{job}") + ":out" // same slot as the lease key
	l := acquire(t, m, "{job}")

	res, err := leasing.Fenced(ctx, m, l, s, []string{out}, "v1")
	if err != nil || res != int64(1) {
		t.Fatalf("Fenced = %v, %v", res, err)
	}
	if v := c.Get(ctx, out).Val(); v != "v1" {
		t.Fatalf("value = %q", v)
	}

	// An old fence or another token is refused by the prelude: nothing written.
	b := lease.NewRedisBackend(c, prefix)
	for _, tc := range []struct {
		token string
		fence uint64
	}{{leasing.Token(l), l.Fence() - 1}, {"intruder", l.Fence()}} {
		res, err := b.Fenced(ctx, "{job}", tc.token, tc.fence, s, []string{out}, []any{"bad"})
		if err != nil || res != int64(scripts.StatusLost) {
			t.Fatalf("Fenced(token %q, fence %d) = %v, %v, want StatusLost", tc.token, tc.fence, res, err)
		}
	}
	if v := c.Get(ctx, out).Val(); v != "v1" {
		t.Fatalf("refused writes changed the value to %q", v)
	}

	// The lease is taken over behind the holder's back: its fenced write is
	// refused, returns ErrLost, and ends the lease.
	steal(t, c, m.Key("{job}"))
	_, err = leasing.Fenced(ctx, m, l, s, []string{out}, "zombie")
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Fenced by a zombie = %v, want ErrLost", err)
	}
	if v := c.Get(ctx, out).Val(); v != "v1" {
		t.Fatalf("zombie write went through: %q", v)
	}
	if !isDone(l) || !errors.Is(l.Err(), lease.ErrLost) {
		t.Fatalf("lease not ended by a refused fenced write: %v", l.Err())
	}
	if _, err := leasing.Fenced(ctx, m, l, s, []string{out}, "again"); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Fenced on an ended lease = %v", err)
	}
}

func TestShutdown(t *testing.T) {
	c, prefix := testkit.SharedRedis(t)
	for _, leave := range []bool{false, true} {
		t.Run("leave="+strconv.FormatBool(leave), func(t *testing.T) {
			ctx := context.Background()
			m := start(t, c, lease.WithPrefix(prefix), lease.WithTTL(3*time.Second), lease.WithLeaveOnShutdown(leave))
			var ls []*lease.Lease
			for i := range 3 {
				ls = append(ls, acquire(t, m, "s"+strconv.FormatBool(leave)+strconv.Itoa(i)))
			}
			lost := make(chan error, 3)
			for _, l := range ls {
				l.OnLost(func(err error) { lost <- err })
			}
			if err := m.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if err := m.Shutdown(ctx); err != nil {
				t.Fatalf("second Shutdown: %v", err)
			}
			for _, l := range ls {
				if !isDone(l) || !errors.Is(l.Err(), lease.ErrClosed) || !errors.Is(context.Cause(l.Context()), lease.ErrClosed) {
					t.Fatalf("lease after Shutdown: %v", l.Err())
				}
				tok := holder(c, m.Key(l.Name()))
				if leave && tok != leasing.Token(l) {
					t.Fatalf("left lease %q not in Redis (tok %q)", l.Name(), tok)
				}
				if !leave && tok != "" {
					t.Fatalf("lease %q still in Redis after Shutdown", l.Name())
				}
			}
			if len(m.Held()) != 0 || len(lost) != 0 {
				t.Fatalf("held %d, OnLost calls %d", len(m.Held()), len(lost))
			}
		})
	}
}

// Start refuses a Redis that may evict lease keys.
func TestStartRefusesEviction(t *testing.T) {
	srv := testkit.StartRedis(t, testkit.WithRedisConfig("maxmemory 64mb", "maxmemory-policy allkeys-lru"))
	m, err := lease.NewManager(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); !errors.Is(err, lease.ErrEvictionPolicy) {
		t.Fatalf("Start = %v, want ErrEvictionPolicy", err)
	}
}

// With the server gone, operations fail with ErrUnavailable, and a Release
// that could not be sent leaves the lease held.
func TestUnavailable(t *testing.T) {
	srv := testkit.StartRedis(t)
	c := srv.Client(t)
	m := start(t, c, lease.WithTTL(3*time.Second))
	ctx := context.Background()
	l := acquire(t, m, "job")
	srv.Kill()
	if _, err := m.Acquire(ctx, "other"); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("Acquire = %v, want ErrUnavailable", err)
	}
	if err := l.Release(ctx); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("Release = %v, want ErrUnavailable", err)
	}
	if _, err := leasing.Fenced(ctx, m, l, fencedSet(t), []string{m.Key("job") + ":x"}, "v"); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("Fenced = %v, want ErrUnavailable", err)
	}
	if l.Err() != nil || isDone(l) {
		t.Fatalf("lease ended by unsent calls: %v", l.Err())
	}
	srv.Restart(false)
	if err := l.Release(ctx); !errors.Is(err, lease.ErrExpired) {
		t.Fatalf("Release after data loss = %v, want ErrExpired", err)
	}
}

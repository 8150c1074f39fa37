package lease_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testkit"
)

// Every branch of every lease script, run directly.
func TestLeaseScripts(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	key := prefix + "lease:{s}"
	run := func(s *redis.Script, args ...any) any {
		t.Helper()
		v, err := s.Run(ctx, c, []string{key}, args...).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	hash := func() map[string]string { return c.HGetAll(ctx, key).Val() }
	reset := func(fields ...any) {
		c.Del(ctx, key)
		if len(fields) > 0 {
			c.HSet(ctx, key, fields...)
			c.PExpire(ctx, key, time.Minute)
		}
	}
	now := func() uint64 {
		tm := c.Time(ctx).Val()
		return uint64(tm.UnixMicro())
	}

	t.Run("acquire", func(t *testing.T) {
		reset()
		before := now()
		got := run(scripts.LeaseAcquire, "tok1", 5000).([]any)
		if got[0] != int64(scripts.LeaseOK) {
			t.Fatalf("free key: %v", got)
		}
		fen, _ := strconv.ParseUint(got[1].(string), 10, 64)
		if fen < before || fen > now() {
			t.Fatalf("fence %d is not the server time in µs (%d..)", fen, before)
		}
		if diff := cmp.Diff(map[string]string{"tok": "tok1", "fen": got[1].(string)}, hash()); diff != "" {
			t.Fatal(diff)
		}
		if p := c.PTTL(ctx, key).Val().Milliseconds(); p <= 4000 || p > 5000 {
			t.Fatalf("PTTL %d ms", p)
		}

		// Held: the holder's token and remaining time, nothing changed.
		got = run(scripts.LeaseAcquire, "tok2", 5000).([]any)
		if got[0] != int64(scripts.LeaseOtherOwner) || got[1] != "tok1" || got[2].(int64) <= 0 {
			t.Fatalf("held key: %v", got)
		}
		if hash()["tok"] != "tok1" {
			t.Fatal("acquire of a held key changed it")
		}

		// A stored fence behind server time: server time wins.
		reset("fen", "5")
		got = run(scripts.LeaseAcquire, "tok3", 5000).([]any)
		if fen, _ := strconv.ParseUint(got[1].(string), 10, 64); got[0] != int64(scripts.LeaseOK) || fen <= 5 || fen < before {
			t.Fatalf("stored fence behind: %v", got)
		}
		// A stored fence ahead of server time: previous + 1.
		ahead := now() + 1_000_000_000
		reset("fen", strconv.FormatUint(ahead, 10))
		got = run(scripts.LeaseAcquire, "tok4", 5000).([]any)
		if got[0] != int64(scripts.LeaseOK) || got[1] != strconv.FormatUint(ahead+1, 10) {
			t.Fatalf("stored fence ahead: %v, want %d", got, ahead+1)
		}
	})

	for _, s := range []struct {
		name   string
		script *redis.Script
		after  func(t *testing.T) // the effect of a successful call
	}{
		{"renew", scripts.LeaseRenew, func(t *testing.T) {
			if p := c.PTTL(ctx, key).Val().Milliseconds(); p <= 60_000 || p > 90_000 {
				t.Fatalf("renewed PTTL %d ms, want about 90000", p)
			}
		}},
		{"release", scripts.LeaseRelease, func(t *testing.T) {
			if c.Exists(ctx, key).Val() != 0 {
				t.Fatal("released key still exists")
			}
		}},
	} {
		t.Run(s.name, func(t *testing.T) {
			for _, tc := range []struct {
				name  string
				state []any // hash fields; nil: no key
				want  int64
			}{
				{"owner", []any{"tok", "me", "fen", "7"}, scripts.LeaseOK},
				{"no key", nil, scripts.LeaseNoOwner},
				{"no owner", []any{"fen", "7"}, scripts.LeaseNoOwner},
				{"other token", []any{"tok", "other", "fen", "7"}, scripts.LeaseOtherOwner},
				{"other fence", []any{"tok", "me", "fen", "8"}, scripts.LeaseOtherOwner},
			} {
				t.Run(tc.name, func(t *testing.T) {
					reset(tc.state...)
					before := hash()
					args := []any{"me", "7"}
					if s.script == scripts.LeaseRenew {
						args = append(args, 90_000)
					}
					got := run(s.script, args...)
					if a, ok := got.([]any); ok && s.script == scripts.LeaseRenew && len(a) == 1 {
						got = a[0] // one status a key
					}
					if got != tc.want {
						t.Fatalf("status %v, want %d", got, tc.want)
					}
					if tc.want == scripts.LeaseOK {
						s.after(t)
						return
					}
					if diff := cmp.Diff(before, hash()); diff != "" {
						t.Fatalf("refused call changed the key (-before +after):\n%s", diff)
					}
					if p := c.PTTL(ctx, key).Val().Milliseconds(); tc.state != nil && p > 60_000 {
						t.Fatalf("refused call changed the TTL to %d ms", p)
					}
				})
			}
		})
	}
}

// One renew call covers many keys and answers a status for each, in order.
func TestLeaseRenewMany(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	keys := []string{prefix + "lease:{m}1", prefix + "lease:{m}2", prefix + "lease:{m}3", prefix + "lease:{m}4"}
	c.HSet(ctx, keys[0], "tok", "a", "fen", "1")
	c.HSet(ctx, keys[1], "tok", "other", "fen", "2")
	c.HSet(ctx, keys[3], "tok", "d", "fen", "4")
	for _, k := range []string{keys[0], keys[1], keys[3]} {
		c.PExpire(ctx, k, time.Minute)
	}
	got, err := scripts.LeaseRenew.Run(ctx, c, keys, "a", "1", 90_000, "b", "2", 90_000, "c", "3", 90_000, "d", "4", 120_000).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{scripts.LeaseOK, scripts.LeaseOtherOwner, scripts.LeaseNoOwner, scripts.LeaseOK}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	if c.Exists(ctx, keys[2]).Val() != 0 {
		t.Error("renew created a missing key")
	}
	for i, w := range map[int]time.Duration{0: 90 * time.Second, 1: time.Minute, 3: 120 * time.Second} {
		p := c.PTTL(ctx, keys[i]).Val()
		if p > w || p < w-5*time.Second {
			t.Errorf("%s: PTTL %s, want about %s", keys[i], p, w)
		}
	}
}

// Release with fence "0" matches the token alone, never another token.
func TestLeaseReleaseByToken(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	key := prefix + "lease:{r}"
	c.HSet(ctx, key, "tok", "me", "fen", "7")
	if got := scripts.LeaseRelease.Run(ctx, c, []string{key}, "other", "0").Val(); got != int64(scripts.LeaseOtherOwner) {
		t.Fatalf("another token with fence 0: %v", got)
	}
	if c.Exists(ctx, key).Val() != 1 {
		t.Fatal("another token released the lease")
	}
	if got := scripts.LeaseRelease.Run(ctx, c, []string{key}, "me", "0").Val(); got != int64(scripts.LeaseOK) {
		t.Fatalf("own token with fence 0: %v", got)
	}
	if c.Exists(ctx, key).Val() != 0 {
		t.Fatal("key still there")
	}
}

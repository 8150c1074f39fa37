package lease_test

import (
	"context"
	"strconv"
	"strings"
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
	value := func() string { return c.Get(ctx, key).Val() }
	reset := func(v string) {
		c.Del(ctx, key)
		if v != "" {
			c.Set(ctx, key, v, time.Minute)
		}
	}
	now := func() uint64 {
		tm := c.Time(ctx).Val()
		return uint64(tm.UnixMicro())
	}

	t.Run("acquire", func(t *testing.T) {
		reset("")
		before := now()
		got := run(scripts.LeaseAcquire, "tok1", 5000).([]any)
		if got[0] != int64(scripts.LeaseOK) {
			t.Fatalf("free key: %v", got)
		}
		fen, _ := strconv.ParseUint(got[1].(string), 10, 64)
		if fen < before || fen > now() {
			t.Fatalf("fence %d is not the server time in µs (%d..)", fen, before)
		}
		if v := value(); v != "tok1 "+got[1].(string)+" 5000" {
			t.Fatalf("lease key %q, want %q", v, "tok1 "+got[1].(string)+" 5000")
		}
		if p := c.PTTL(ctx, key).Val().Milliseconds(); p <= 4000 || p > 5000 {
			t.Fatalf("PTTL %d ms", p)
		}

		// Held: the holder's token and remaining time, nothing changed.
		got = run(scripts.LeaseAcquire, "tok2", 5000).([]any)
		if got[0] != int64(scripts.LeaseOtherOwner) || got[1] != "tok1" || got[2].(int64) <= 0 {
			t.Fatalf("held key: %v", got)
		}
		if v := value(); !strings.HasPrefix(v, "tok1 ") {
			t.Fatalf("acquire of a held key changed it to %q", v)
		}

		// Released, then taken again: a greater fence.
		c.Del(ctx, key)
		got2 := run(scripts.LeaseAcquire, "tok3", 5000).([]any)
		if fen2, _ := strconv.ParseUint(got2[1].(string), 10, 64); got2[0] != int64(scripts.LeaseOK) || fen2 <= fen {
			t.Fatalf("acquire after a release: %v, want a fence above %d", got2, fen)
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
				state string // the key's value; "": no key
				want  int64
				renew int64 // the renew script's answer where it differs from want
			}{
				{"owner", "me 7 60000", scripts.LeaseOK, 0},
				{"owner, cancel asked", "me 7 60000 7", scripts.LeaseOK, scripts.LeaseCancelled},
				{"no key", "", scripts.LeaseNoOwner, 0},
				{"other token", "other 7 60000", scripts.LeaseOtherOwner, 0},
				{"other token, the caller's prefix", "mex 7 60000", scripts.LeaseOtherOwner, 0},
				{"other fence", "me 8 60000", scripts.LeaseOtherOwner, 0},
				{"other fence, the caller's prefix", "me 70 60000", scripts.LeaseOtherOwner, 0},
			} {
				t.Run(tc.name, func(t *testing.T) {
					reset(tc.state)
					before := value()
					args := []any{"me", "7"}
					if s.script == scripts.LeaseRenew {
						args = append(args, 90_000)
					}
					got := run(s.script, args...)
					if a, ok := got.([]any); ok && s.script == scripts.LeaseRenew && len(a) == 1 {
						got = a[0] // one status a key
					}
					if s.script == scripts.LeaseRenew && tc.renew != 0 {
						tc.want = tc.renew
					}
					if got != tc.want {
						t.Fatalf("status %v, want %d", got, tc.want)
					}
					if tc.want == scripts.LeaseOK || tc.want == scripts.LeaseCancelled {
						s.after(t)
						return
					}
					if after := value(); after != before {
						t.Fatalf("refused call changed the key from %q to %q", before, after)
					}
					if p := c.PTTL(ctx, key).Val().Milliseconds(); tc.state != "" && p > 60_000 {
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
	c.Set(ctx, keys[0], "a 1 60000", time.Minute)
	c.Set(ctx, keys[1], "other 2 60000", time.Minute)
	c.Set(ctx, keys[3], "d 4 60000", time.Minute)
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
	c.Set(ctx, key, "me 7 60000", 0)
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

// lease_cancel.lua appends the fence asked to the holder's value, its TTL
// kept, only for the fence the lease has now; the reason is not stored.
func TestLeaseCancelScript(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	key, mark := prefix+"lease:{c}", prefix+"mark:{c}"
	run := func(fence string) int64 {
		t.Helper()
		v, err := scripts.LeaseCancel.Run(ctx, c, []string{key, mark}, fence, 60_000).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := run("7"); got != scripts.LeaseNoOwner {
		t.Fatalf("no lease: %d", got)
	}
	c.Set(ctx, key, "me 7 30000", 30*time.Second)
	if got := run("70"); got != scripts.LeaseOtherOwner {
		t.Fatalf("another fence: %d", got)
	}
	if got := run("7"); got != scripts.LeaseCancelStored {
		t.Fatalf("the lease's fence: %d", got)
	}
	if v := c.Get(ctx, key).Val(); v != "me 7 30000 7" {
		t.Fatalf("lease key %q after the cancel, want %q", v, "me 7 30000 7")
	}
	if p := c.PTTL(ctx, key).Val(); p <= 20*time.Second || p > 30*time.Second {
		t.Fatalf("PTTL %s after the cancel, want the 30 s kept", p)
	}
	if v := c.Get(ctx, mark).Val(); v != "7" {
		t.Fatalf("cancel mark %q, want the fence", v)
	}
	if got := run("7"); got != scripts.LeaseCancelStored {
		t.Fatalf("asked twice: %d", got)
	}
	if v := c.Get(ctx, key).Val(); v != "me 7 30000 7" {
		t.Fatalf("lease key %q after a second cancel, want it unchanged", v)
	}
}

package leasing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/testkit"
)

// Both renewal paths (one plain command where the server takes GETEX, the
// script elsewhere) answer the same for every state a lease key can be in,
// and neither leaves another holder's expiry shorter than it was.
func TestRenewPathsAgree(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	for _, path := range []string{"native", "script"} {
		b := leasing.NewRedisBackend(c, prefix+path+":")
		if err := b.(leasing.Checker).Check(ctx); err != nil {
			t.Fatal(err)
		}
		if !leasing.RenewsNatively(b) {
			t.Fatal("Check did not find GETEX on the test server (Redis 6.2 or newer)")
		}
		if path == "script" {
			leasing.UseScriptRenewal(b)
		}
		for _, tc := range []struct {
			name      string
			state     string // the key's value (2 min left); "": no key
			wantErr   error
			cancelled bool
		}{
			{"owner", "me 7 120000", nil, false},
			{"owner, cancel asked", "me 7 120000 7", nil, true},
			{"owner, cancel of another attempt", "me 7 120000 6", nil, false},
			{"no key", "", leasing.ErrExpired, false},
			{"other token", "other 8 120000", leasing.ErrStolen, false},
			{"other token, this one's prefix", "mex 7 120000", leasing.ErrStolen, false},
			{"other fence", "me 8 120000", leasing.ErrStolen, false},
			{"other fence, this one's prefix", "me 70 120000", leasing.ErrStolen, false},
		} {
			t.Run(path+"/"+tc.name, func(t *testing.T) {
				key := b.Key(tc.name)
				if tc.state != "" {
					c.Set(ctx, key, tc.state, 2*time.Minute) // longer than the renewal's TTL
				}
				res := b.RenewBatch(ctx, []leasing.Renewal{{Name: tc.name, Token: "me", Fence: 7, TTL: 90 * time.Second}})
				if len(res) != 1 || !errors.Is(res[0].Err, tc.wantErr) || (tc.wantErr == nil && res[0].Err != nil) {
					t.Fatalf("result %+v, want error %v", res, tc.wantErr)
				}
				if res[0].Cancelled != tc.cancelled {
					t.Fatalf("cancelled %v, want %v", res[0].Cancelled, tc.cancelled)
				}
				// A refused renewal leaves the holder's expiry at least where
				// it was (the plain path puts back the holder's own TTL after
				// its GETEX); an owner's is at least the renewal's TTL; no
				// key is made.
				switch p := c.PTTL(ctx, key).Val(); {
				case tc.state == "" && p != -2*time.Nanosecond:
					t.Fatalf("renewal of a missing key left PTTL %s, want no key", p)
				case tc.state != "" && tc.wantErr != nil && p < 110*time.Second:
					t.Fatalf("PTTL %s after a refused renewal, want the 2 min it had kept", p)
				case tc.state != "" && p < 80*time.Second:
					t.Fatalf("PTTL %s after the renewal, want at least about 90s", p)
				}
			})
		}
		// An owned lease is extended: its expiry set 1 s ahead becomes 90 s.
		t.Run(path+"/extends", func(t *testing.T) {
			key := b.Key("short")
			c.Set(ctx, key, "me 7 1000", time.Second)
			res := b.RenewBatch(ctx, []leasing.Renewal{{Name: "short", Token: "me", Fence: 7, TTL: 90 * time.Second}})
			if res[0].Err != nil {
				t.Fatal(res[0].Err)
			}
			if p := c.PTTL(ctx, key).Val(); p < 80*time.Second || p > 90*time.Second {
				t.Fatalf("PTTL %s after the renewal, want about 90s", p)
			}
		})
	}
}

// A batch answers each lease in order, whatever the mix of states.
func TestRenewBatchInOrder(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	b := leasing.NewRedisBackend(c, prefix)
	if err := b.(leasing.Checker).Check(ctx); err != nil {
		t.Fatal(err)
	}
	var rs []leasing.Renewal
	want := make([]error, 600)
	for i := range want {
		name := "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		switch i % 3 {
		case 0:
			c.Set(ctx, b.Key(name), "me 1 60000", 0)
		case 1:
			c.Set(ctx, b.Key(name), "thief 2 60000", 0)
			want[i] = leasing.ErrStolen
		case 2:
			want[i] = leasing.ErrExpired
		}
		c.PExpire(ctx, b.Key(name), time.Minute)
		rs = append(rs, leasing.Renewal{Name: name, Token: "me", Fence: 1, TTL: 2 * time.Minute})
	}
	for i, r := range b.RenewBatch(ctx, rs) {
		if !errors.Is(r.Err, want[i]) || (want[i] == nil && r.Err != nil) {
			t.Fatalf("lease %d: %v, want %v", i, r.Err, want[i])
		}
	}
}

// The owner token is the first word of a lease key's value: a token that is
// empty or has white space is refused before anything is written.
func TestAcquireRefusesSpacedToken(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	b := leasing.NewRedisBackend(c, prefix)
	for _, tok := range []string{"", "a b", "a\tb", "tok\n"} {
		if _, err := b.Acquire(ctx, "spaced", tok, time.Minute); !errors.Is(err, leasing.ErrInvalid) {
			t.Errorf("Acquire with token %q: %v, want ErrInvalid", tok, err)
		}
	}
	if n := c.Exists(ctx, b.Key("spaced")).Val(); n != 0 {
		t.Fatal("a refused acquisition wrote the lease key")
	}
	if _, err := b.Acquire(ctx, "spaced", leasing.NewToken(), time.Minute); err != nil {
		t.Fatal(err)
	}
}

package leasing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/testkit"
)

// Both renewal paths (plain commands where the server takes PEXPIRE GT, the
// script elsewhere) answer the same for every state a lease key can be in.
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
			t.Fatal("Check did not find PEXPIRE GT on the test server (Redis 7.0 or newer)")
		}
		if path == "script" {
			leasing.UseScriptRenewal(b)
		}
		for _, tc := range []struct {
			name      string
			state     []any // hash fields; nil: no key
			wantErr   error
			cancelled bool
		}{
			{"owner", []any{"tok", "me", "fen", "7"}, nil, false},
			{"owner, cancel asked", []any{"tok", "me", "fen", "7", "cx", "7"}, nil, true},
			{"owner, cancel of another attempt", []any{"tok", "me", "fen", "7", "cx", "6"}, nil, false},
			{"no key", nil, leasing.ErrExpired, false},
			{"no owner", []any{"fen", "7"}, leasing.ErrExpired, false},
			{"other token", []any{"tok", "other", "fen", "8"}, leasing.ErrStolen, false},
			{"other fence", []any{"tok", "me", "fen", "8"}, leasing.ErrStolen, false},
		} {
			t.Run(path+"/"+tc.name, func(t *testing.T) {
				key := b.Key(tc.name)
				if tc.state != nil {
					c.HSet(ctx, key, tc.state...)
					c.PExpire(ctx, key, 2*time.Minute) // longer than the renewal's TTL
				}
				res := b.RenewBatch(ctx, []leasing.Renewal{{Name: tc.name, Token: "me", Fence: 7, TTL: 90 * time.Second}})
				if len(res) != 1 || !errors.Is(res[0].Err, tc.wantErr) || (tc.wantErr == nil && res[0].Err != nil) {
					t.Fatalf("result %+v, want error %v", res, tc.wantErr)
				}
				if res[0].Cancelled != tc.cancelled {
					t.Fatalf("cancelled %v, want %v", res[0].Cancelled, tc.cancelled)
				}
				// A refused renewal leaves the expiry as it was (the plain
				// commands may extend another holder's, never shorten it);
				// an owner's is at least the renewal's TTL; no key is made.
				switch p := c.PTTL(ctx, key).Val(); {
				case tc.state == nil && p != -2*time.Nanosecond:
					t.Fatalf("renewal of a missing key left PTTL %s, want no key", p)
				case tc.state != nil && tc.wantErr != nil && p < 110*time.Second:
					t.Fatalf("PTTL %s after a refused renewal, want the 2 min it had kept", p)
				case tc.state != nil && p < 80*time.Second:
					t.Fatalf("PTTL %s after the renewal, want at least about 90s", p)
				}
			})
		}
		// An owned lease is extended: its expiry set 1 s ahead becomes 90 s.
		t.Run(path+"/extends", func(t *testing.T) {
			key := b.Key("short")
			c.HSet(ctx, key, "tok", "me", "fen", "7")
			c.PExpire(ctx, key, time.Second)
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
			c.HSet(ctx, b.Key(name), "tok", "me", "fen", "1")
		case 1:
			c.HSet(ctx, b.Key(name), "tok", "thief", "fen", "2")
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

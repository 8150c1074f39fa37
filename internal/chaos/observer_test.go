package chaos

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/testkit"
)

// leaseStore starts a redis-server for an observer test and returns a client
// of it and put, which writes a lease key (tok, fence 1) with a TTL, as the
// lease scripts lay it out.
func leaseStore(t *testing.T, ttl time.Duration) (*redis.Client, func(key, tok string)) {
	t.Helper()
	ctx := t.Context()
	r := startRedis(t)
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	put := func(key, tok string) {
		t.Helper()
		if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, tok+" 1 "+strconv.FormatInt(ttl.Milliseconds(), 10), ttl)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return c, put
}

// TestObserverTakeoverAfterKill plays the leases of two workers by hand:
// worker A's lease is renewed, worker B's is not (B was killed), a third
// lease is released early and claimed again. Only B's lease taken over by a
// new owner counts as a takeover with a latency.
func TestObserverTakeoverAfterKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ttl = 600 * time.Millisecond
	c, put := leaseStore(t, ttl)
	put("lh:lease:{live}", "A1")
	put("lh:lease:{dead}", "B1")
	put("lh:lease:{released}", "A2")
	put("other:key", "ignored")

	o := NewObserver(c, "lh:", 10*time.Millisecond, 200*time.Millisecond)
	if err := o.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	killed := time.Now() // before the mark: a latency is measured from the mark
	o.MarkKill(10 * time.Second)
	marked := time.Now()

	// Worker A renews its lease for 2 TTLs and releases the other early,
	// which is then claimed again by a new token (not a takeover).
	if err := c.Del(ctx, "lh:lease:{released}").Err(); err != nil {
		t.Fatal(err)
	}
	if err := o.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	put("lh:lease:{released}", "C1")
	for time.Since(killed) < 2*ttl {
		if err := c.PExpire(ctx, "lh:lease:{live}", ttl).Err(); err != nil {
			t.Fatal(err)
		}
		if err := o.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// B's lease has expired by now; a new owner takes it over.
	if n, err := c.Exists(ctx, "lh:lease:{dead}").Result(); err != nil || n != 0 {
		t.Fatalf("dead lease still there: %d, %v", n, err)
	}
	put("lh:lease:{dead}", "D1")
	if err := o.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	// The poll that saw the new owner has returned: the latency cannot be
	// longer (on a loaded machine the poll itself may take a while).
	seen := time.Since(killed)

	if got := o.Takeovers(); got != 1 {
		t.Fatalf("takeovers = %d, want 1", got)
	}
	lat := o.Latencies()
	if len(lat) != 1 {
		t.Fatalf("latencies = %v, want one", lat)
	}
	if lat[0] < ttl || lat[0] > seen {
		t.Fatalf("latency %s, want between the TTL %s and the end of the poll that saw the takeover, %s", lat[0], ttl, seen)
	}
	s := o.Slowest(5)
	if len(s) != 1 || s[0].Key != "lh:lease:{dead}" || s[0].Latency != lat[0] {
		t.Fatalf("slowest = %+v, want the dead lease's takeover", s)
	}
	if at := s[0].KilledAt; at.Before(killed) || at.After(marked) {
		t.Fatalf("takeover's kill time %s, want the mark's, between %s and %s", at, killed, marked)
	}
}

// TestObserverRunStopsWithContext: Run keeps polling until its context ends
// (a key written before it started is seen, then one written while it runs),
// and returns once it is cancelled.
func TestObserverRunStopsWithContext(t *testing.T) {
	t.Parallel()
	c, put := leaseStore(t, time.Minute)
	put("lh:lease:{before}", "A1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	o := NewObserver(c, "lh:", 5*time.Millisecond, 200*time.Millisecond)
	go func() { o.Run(ctx); close(done) }()
	// seen reports whether a poll of Run has observed key, failing the test
	// if Run has returned before its context was cancelled.
	seen := func(key string) bool {
		select {
		case <-done:
			t.Fatal("Run returned before its context was cancelled")
		default:
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		s, ok := o.keys[key]
		return ok && s.tok != ""
	}
	testkit.Eventually(t, 10*time.Second, "Run to observe the key written before it started", func() bool {
		return seen("lh:lease:{before}")
	})
	put("lh:lease:{during}", "B1")
	testkit.Eventually(t, 10*time.Second, "Run to observe a key written while it runs", func() bool {
		return seen("lh:lease:{during}")
	})
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// TestObserverPauseAttribution: a worker paused well before a kill keeps its
// leases out of the kill's takeovers (they were not renewed for longer than
// a renew interval when the kill came); a kill right before a pause is not
// measured, since nothing tells the two workers' leases apart.
func TestObserverPauseAttribution(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ttl, renew = 900 * time.Millisecond, 200 * time.Millisecond
	c, put := leaseStore(t, ttl)
	// poll takes a snapshot every 10ms for d, and renews the given keys
	// (their workers are alive) every half renew interval.
	poll := func(o *Observer, d time.Duration, live ...string) {
		t.Helper()
		var renewed time.Time
		for end := time.Now().Add(d); time.Now().Before(end); {
			if time.Since(renewed) >= renew/2 {
				for _, k := range live {
					if err := c.PExpire(ctx, k, ttl).Err(); err != nil {
						t.Fatal(err)
					}
				}
				renewed = time.Now()
			}
			if err := o.Poll(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	takeOver := func(o *Observer, keys ...string) {
		t.Helper()
		waitGone := time.Now().Add(3 * ttl)
		for _, k := range keys {
			for {
				n, err := c.Exists(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				if time.Now().After(waitGone) {
					t.Fatalf("%s never expired", k)
				}
				poll(o, 20*time.Millisecond)
			}
			put(k, "new-"+k)
		}
		poll(o, 30*time.Millisecond)
	}

	t.Run("pause well before the kill", func(t *testing.T) {
		put("lh:lease:{paused}", "P1")
		put("lh:lease:{dead}", "D1")
		o := NewObserver(c, "lh:", 10*time.Millisecond, renew)
		poll(o, 100*time.Millisecond, "lh:lease:{paused}", "lh:lease:{dead}")
		o.MarkPause(10 * time.Second)
		poll(o, 2*renew, "lh:lease:{dead}") // the paused worker renews nothing
		o.MarkKill(10 * time.Second)
		takeOver(o, "lh:lease:{paused}", "lh:lease:{dead}")
		if got := o.Takeovers(); got != 2 {
			t.Fatalf("takeovers = %d, want 2", got)
		}
		if s := o.Slowest(5); len(s) != 1 || s[0].Key != "lh:lease:{dead}" {
			t.Fatalf("measured takeovers %+v, want only the killed worker's lease", s)
		}
		if n := o.Unmeasured(); n != 0 {
			t.Fatalf("unmeasured kills = %d, want 0", n)
		}
	})

	t.Run("pause right after the kill", func(t *testing.T) {
		put("lh:lease:{paused2}", "P1")
		put("lh:lease:{dead2}", "D1")
		o := NewObserver(c, "lh:", 10*time.Millisecond, renew)
		poll(o, 100*time.Millisecond, "lh:lease:{paused2}", "lh:lease:{dead2}")
		o.MarkKill(10 * time.Second)
		poll(o, renew/4)
		o.MarkPause(10 * time.Second)
		takeOver(o, "lh:lease:{paused2}", "lh:lease:{dead2}")
		if got := o.Takeovers(); got != 2 {
			t.Fatalf("takeovers = %d, want 2", got)
		}
		if lat := o.Latencies(); len(lat) != 0 {
			t.Fatalf("latencies = %v, want none (the kill is not measured)", lat)
		}
		if n := o.Unmeasured(); n != 1 {
			t.Fatalf("unmeasured kills = %d, want 1", n)
		}
	})
}

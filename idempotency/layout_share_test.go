package idempotency

import (
	"bytes"
	"testing"
	"time"
)

// Layouts whose windows start at the same instants name the same buckets (24h
// in 2 windows and 12h in 1 both cut 12-hour windows). A record written under
// the longer retention keeps it when a Store of the shorter one writes into
// the same bucket: the bucket's expiry is only raised, never lowered (lowered,
// the record would expire early and a redelivered duplicate run again).
func TestSharedBucketExpiryNotLowered(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	long := setup(t, []Opt{WithShards(1), WithRetention(24 * time.Hour)})
	short := setupOn(t, long.c, long.prefix, []Opt{WithShards(1), WithRetention(12 * time.Hour), WithWindows(1)})
	for try := 0; ; try++ {
		k1, k2 := "long-"+string(rune('a'+try)), "short-"+string(rune('a'+try))
		c := long.claim(t, k1, fp("a"), Acquired)
		must(t, long.s.Complete(ctx, c, []byte("result")))
		c2 := short.claim(t, k2, fp("a"), Acquired)
		bucket := long.s.bucketKey(c.tag, c.window)
		if short.s.bucketKey(c2.tag, c2.window) != bucket {
			// A window's end fell between the two claims (once in 12 hours).
			if try > 0 {
				t.Fatalf("the two layouts never wrote into one bucket")
			}
			continue
		}
		d, err := long.c.PTTL(ctx, bucket).Result()
		must(t, err)
		if d < 24*time.Hour-time.Minute {
			t.Fatalf("after the 12h Store's claim, bucket %s expires in %s: %s's record, just completed under 24h, with it", bucket, d, k1)
		}
		info, err := long.s.Lookup(ctx, k1)
		if err != nil || info.State != Completed {
			t.Fatalf("Lookup(%s) = %v (%v), want completed", k1, info.State, err)
		}
		return
	}
}

// The other way round: a Store of a shorter retention writes first, one of a
// longer retention raises the shared bucket's expiry, and the shorter
// record's result key (a result too large to keep inline) expires with the
// retention it was written with while its record lives on in the bucket.
// That record has expired: a lookup reads the key as absent and a claim runs
// it again above the old fence, instead of failing on a corrupt record.
func TestRecordOutlivingItsResultKeyHasExpired(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	short := setup(t, []Opt{WithShards(1), WithRetention(2 * time.Second), WithWindows(1)})
	long := setupOn(t, short.c, short.prefix, []Opt{WithShards(1), WithRetention(10 * time.Second), WithWindows(5)})
	big := bytes.Repeat([]byte("r"), 4096)
	var (
		c      *Claim
		bucket string
	)
	for try := 0; ; try++ {
		k1, k2 := "short-"+string(rune('a'+try)), "long-"+string(rune('a'+try))
		c = short.claim(t, k1, fp("a"), Acquired)
		must(t, short.s.Complete(ctx, c, big))
		c2 := long.claim(t, k2, fp("a"), Acquired)
		bucket = short.s.bucketKey(c.tag, c.window)
		if long.s.bucketKey(c2.tag, c2.window) == bucket {
			break
		}
		if try > 3 {
			t.Fatalf("the two layouts never wrote into one bucket")
		}
	}
	resultKey := short.s.resultKey(c.tag, c.Key)
	rttl, err := short.c.PTTL(ctx, resultKey).Result()
	must(t, err)
	bttl, err := short.c.PTTL(ctx, bucket).Result()
	must(t, err)
	if rttl <= 0 || bttl < rttl+5*time.Second {
		t.Fatalf("result key PTTL %s, bucket PTTL %s: want the 10s Store's write to have raised the bucket well past the result", rttl, bttl)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := short.c.Exists(ctx, resultKey).Result()
		must(t, err)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("result key %s did not expire", resultKey)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n, err := short.c.HExists(ctx, bucket, c.keys.field).Result(); err != nil || !n {
		t.Fatalf("the record left its bucket with its result (%v, %v): the case is not the one meant", n, err)
	}
	info, err := short.s.Lookup(ctx, c.Key)
	if err != nil || info.State != Absent {
		t.Fatalf("Lookup(%s) = %v (%v), want absent", c.Key, info.State, err)
	}
	again := short.claim(t, c.Key, fp("a"), Acquired)
	if again.Fence <= c.Fence || again.Attempt != 1 {
		t.Fatalf("the key ran again with fence %d attempt %d, want above %d, attempt 1", again.Fence, again.Attempt, c.Fence)
	}
	must(t, short.s.Complete(ctx, again, []byte("second")))
	dup := short.claim(t, c.Key, fp("a"), Duplicate)
	if string(dup.Record.Result) != "second" {
		t.Fatalf("replayed %q, want the second run's result", dup.Record.Result)
	}
}

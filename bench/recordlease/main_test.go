package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestVariantsAnswerAlike runs the checks the measurement relies on for the
// shipped scripts and the prototype, then a small measured run of each, whose
// calls per job must be the counts docs/benchmarks.md gives: 7 for both, and
// for the shipped scripts one PEXPIREAT more a bucket (its first claim sets
// its expiry; in a run this small most claims write into a bucket of their
// own; the buckets counted are all new, the server flushed after the
// checks).
func TestVariantsAnswerAlike(t *testing.T) {
	ctx := context.Background()
	c := testkit.StartRedis(t).Client(t)
	want := map[string]float64{"lease_key": 7, "record_lease": 7}
	const jobs = 640
	for _, v := range newVariants() {
		if err := v.check(ctx, c); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		// The checks write records into buckets too: a measured claim into
		// one of those finds its mark, and sends no PEXPIREAT. The server
		// is the test's own.
		if err := c.FlushDB(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := v.measure(ctx, c, jobs, 64, 2); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		w := want[v.name]
		if !v.record {
			w += float64(v.buckets[0]) / jobs
		}
		if v.calls[0] != w {
			t.Errorf("%s: %.4f calls per job, want %.4f (%d buckets)", v.name, v.calls[0], w, v.buckets[0])
		}
		if v.cpu[0] <= 0 || v.rate[0] <= 0 {
			t.Errorf("%s: CPU %.2f us per job, %.0f jobs/s: not measured", v.name, v.cpu[0], v.rate[0])
		}
	}
}

// TestCheckCatchesAMissingLeaseCheck shows that check fails a prototype whose
// completion skips the owner check: it is what makes the comparison fair.
func TestCheckCatchesAMissingLeaseCheck(t *testing.T) {
	const ownerCheck = "or string.sub(v, 25) ~= ARGV[a]"
	if !strings.Contains(completeRecordSrc, ownerCheck) {
		t.Fatalf("complete_record.lua has no %q", ownerCheck)
	}
	broken := &variant{name: "broken", record: true, claimScript: claimRecord,
		completeScript: redis.NewScript(strings.Replace(completeRecordSrc, ownerCheck, "", 1))}
	err := broken.check(context.Background(), testkit.StartRedis(t).Client(t))
	if err == nil || !strings.Contains(err.Error(), "complete with another token") {
		t.Fatalf("check of a prototype without the owner check: %v, want a failure at the other token's completion", err)
	}
}

// TestRenewals measures a small round each way (every renewal must find its
// lease held, or measureRenewals fails), and checks that renew_record.lua
// refuses another token, another fence and a deadline passed, writing nothing.
func TestRenewals(t *testing.T) {
	ctx := context.Background()
	c := testkit.StartRedis(t).Client(t)
	ways, err := measureRenewals(ctx, c, 600, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ways {
		if len(w.cpu) != 1 || w.cpu[0] <= 0 {
			t.Errorf("%s: %v ms: not measured", w.name, w.cpu)
		}
	}

	proto := newVariants()[1]
	held := newJob("renew-check-"+uuid.NewString(), time.Minute)
	short := newJob("renew-check-"+uuid.NewString(), 50*time.Millisecond)
	for _, j := range []*job{held, short} {
		if codes, err := proto.claim(ctx, c, []*job{j}); err != nil || codes[0] != 1 {
			t.Fatalf("claim %s: %v %v", j.key, codes, err)
		}
	}
	renew := func(j *job, token string, fence int64) int64 {
		t.Helper()
		codes, err := renewRecord.Run(ctx, c, []string{j.bucket(j.window)},
			j.field, token, strconv.FormatInt(fence, 10), 60_000).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return codes[0]
	}
	before, err := c.HGet(ctx, held.bucket(held.window), held.field).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := renew(held, "another-token", held.fence); got != 0 {
		t.Errorf("renewal with another token: %d, want 0", got)
	}
	if got := renew(held, held.token, held.fence+1); got != 0 {
		t.Errorf("renewal with another fence: %d, want 0", got)
	}
	if after, _ := c.HGet(ctx, held.bucket(held.window), held.field).Result(); after != before {
		t.Error("a refused renewal rewrote the record")
	}
	if got := renew(held, held.token, held.fence); got != 1 {
		t.Errorf("renewal by the holder: %d, want 1", got)
	}
	time.Sleep(120 * time.Millisecond) // past the short lease's deadline
	if got := renew(short, short.token, short.fence); got != 0 {
		t.Errorf("renewal after the deadline: %d, want 0", got)
	}
}

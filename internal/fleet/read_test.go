package fleet

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRatesAndSeries: a worker's rates are its counters' growth since its
// newest sample at least 10s older than its status; the series puts each
// sample in its minute with the rates since the sample before it, summed
// over workers, and a worker's first sample has none.
func TestRatesAndSeries(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 25, 19, 0, 0, 0, time.UTC)
	sample := func(min int, succeeded int64, running int) Sample {
		return Sample{At: t0.Add(time.Duration(min) * time.Minute),
			Load: Load{Running: running, LeasesHeld: running, CommitLag: int64(10 * running), Counters: Counters{Succeeded: succeeded, LeasesLost: int64(min)}}}
	}
	// Newest first, as stored.
	a := []Sample{sample(2, 360, 3), sample(1, 120, 2), sample(0, 0, 1)}
	b := []Sample{sample(2, 60, 5), sample(1, 0, 4)}

	st := Status{At: t0.Add(2*time.Minute + 5*time.Second), Load: Load{Counters: Counters{Succeeded: 480}}}
	// The 2m sample is 5s old: the rate is since the 1m sample, 65s before.
	if r := workerRates(st, a)["succeeded"]; r != 360.0/65 {
		t.Errorf("rate %v, want 360/65", r)
	}
	if r := workerRates(Status{At: t0}, a[2:]); len(r) != 0 {
		t.Errorf("rates without an older sample: %v", r)
	}

	buckets := map[int64]*Point{}
	addSeries(buckets, a)
	addSeries(buckets, b)
	p0, p1, p2 := buckets[t0.Unix()], buckets[t0.Add(time.Minute).Unix()], buckets[t0.Add(2*time.Minute).Unix()]
	if p0.Rated != 0 || p0.Running != 1 || len(p0.Rates) != 0 {
		t.Errorf("minute 0: %+v, want a's first sample alone, no rate", p0)
	}
	if p1.Rated != 1 || p1.Running != 6 || p1.Rates["succeeded"] != 2 {
		t.Errorf("minute 1: %+v, want 6 running, a's rate 2 (b's first sample has none)", p1)
	}
	if p2.Rated != 2 || p2.LeasesHeld != 8 || p2.CommitLag != 80 || p2.Rates["succeeded"] != 5 || p2.Rates["leases_lost"] != 2.0/60 {
		t.Errorf("minute 2: %+v, want 8 leases, commit lag 30+50, rates 4+1 succeeded, 2/60 leases lost", p2)
	}
}

// TestIDsOfOneProcessDiffer: two publishers of one process started in the
// same millisecond (two Workers embedded in one service) get two IDs, so
// that neither overwrites the other's status.
func TestIDsOfOneProcessDiffer(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	at := time.Now()
	ids := map[string]bool{}
	for range 2 {
		p, err := NewPublisher(Config{Redis: rdb, Load: func() Load { return Load{} }, Identity: Identity{Started: at}})
		if err != nil {
			t.Fatal(err)
		}
		ids[p.ID()] = true
	}
	if len(ids) != 2 {
		t.Fatalf("IDs %v: want two distinct", ids)
	}
}

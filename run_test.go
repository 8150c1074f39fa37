package leasehold

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// maxAllocsPerJob bounds the heap allocations of a job on the worker's path
// (poll, claim, handler, completion, offset commit), the broker's serving of
// it included when it runs in process (kfake). go run ./bench/worker measured
// 150.7 a job before the allocation work of 2026-11-26, 67.3 after it and
// 50.5 once spans were no longer made with nothing to record them, 40.9 once
// the job watched its lease instead of bridging contexts (leasing.Watch);
// this test measures about 42 (44 under -race), and the bound leaves room
// for noise and small additions, not for a return to the earlier figures.
const maxAllocsPerJob = 52

// TestAllocsPerJob runs jobs through a worker on the test broker and the
// shared Redis and fails if a job allocates more than maxAllocsPerJob heap
// objects (runtime.MemStats.Mallocs over the run, divided by the jobs). It
// counts objects, not time: a loaded machine changes nothing but the
// process's background allocations, which the bound's margin covers.
func TestAllocsPerJob(t *testing.T) {
	h := setup(t, 6)
	const jobs = 4000
	recs := make([]*kgo.Record, jobs)
	for i := range recs {
		recs[i] = jobRecord(t, NewJob{Type: "test.noop", Key: fmt.Sprintf("alloc-%d", i), Payload: []byte(`{}`)})
	}
	h.produce(t, recs)
	reg := func(w *Worker) {
		must(t, w.Register("test.noop", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	}
	runtime.GC()
	before := mallocs()
	w := h.start(t, h.rdb, reg, WithConcurrency(64))
	testkit.Eventually(t, 2*time.Minute, "every job done", func() bool { return w.Stats().Succeeded >= jobs })
	perJob := float64(mallocs()-before) / jobs
	t.Logf("allocs_per_job=%.1f objects", perJob)
	if perJob > maxAllocsPerJob {
		t.Errorf("a job allocates %.1f heap objects, above the bound of %d (go run ./bench/worker -memprofile shows where)", perJob, maxAllocsPerJob)
	}
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

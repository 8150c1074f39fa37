package leasehold

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/fleet"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestFleetCommitLag: a worker publishes its commit lag to the fleet (the
// records of its partitions not committed): n while the first of n records
// is stuck in its handler, 0 once all are done and committed.
func TestFleetCommitLag(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	const n = 4
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = jobRecord(t, NewJob{Type: "test.op", Key: fmt.Sprintf("fleetlag-%d", i)})
	}
	h.produce(t, recs)
	release := make(chan struct{})
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.op", func(ctx context.Context, _ *Job) ([]byte, error) {
			select {
			case <-release:
				return nil, nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}))
	}, WithConcurrency(1))
	lag := func() int64 {
		v, err := fleet.Read(t.Context(), h.rdb, h.prefix, fleet.RatesOnly)
		if err != nil || len(v.Workers) != 1 {
			return -1
		}
		return v.CommitLag
	}
	testkit.Eventually(t, 20*time.Second, fmt.Sprintf("the fleet's commit lag at %d while the first job runs", n), func() bool { return lag() == n })
	close(release)
	testkit.Eventually(t, 20*time.Second, "all jobs", func() bool { return w.Stats().Succeeded == n })
	h.waitCommitted(t, 20*time.Second)
	testkit.Eventually(t, 20*time.Second, "the fleet's commit lag at 0", func() bool { return lag() == 0 })
}

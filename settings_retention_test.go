package leasehold

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestRetentionChangeReplays: a key completed by a worker with a 24h
// retention, enqueued again after a restart with a shorter retention, is
// replayed, not run again (issue 13). The second retention is 10h and one
// second: its 5h0.5s windows never start together with 12h ones in this
// century, so the test cannot pass by the luck of the clock (10h windows
// meet 12h ones every 60 hours).
func TestRetentionChangeReplays(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	var runs atomic.Int32
	handler := func(context.Context, *Job) ([]byte, error) {
		runs.Add(1)
		return []byte("done"), nil
	}
	first := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.ret", handler)) }, WithRetention(24*time.Hour))
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.ret", Key: "ret-1"})})
	testkit.Eventually(t, 20*time.Second, "the job completes", func() bool { return first.Stats().Succeeded == 1 })
	h.waitCommitted(t, 20*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	must(t, first.Shutdown(ctx))

	log := newClaimLog()
	second := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.ret", handler)) },
		WithRetention(10*time.Hour+time.Second), WithHooks(log.hooks()))
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.ret", Key: "ret-1"})})
	testkit.Eventually(t, 20*time.Second, "the redelivery is claimed", func() bool {
		s := second.Stats()
		return s.Replayed+s.Started > 0
	})
	h.waitCommitted(t, 20*time.Second)
	if n := runs.Load(); n != 1 || !log.saw("ret-1", OutcomeDuplicate) {
		t.Fatalf("handler ran %d times (want 1); the redelivery was not replayed: %+v", n, second.Stats())
	}
}

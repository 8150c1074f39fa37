package leasehold

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestResultTooLarge: a handler that returns one byte more than the result
// bound (64 KiB) fails its job terminally: the store's refusal is permanent,
// not an outage, so it is neither retried nor left PROCESSING under a renewed
// lease. The record is dead-lettered with the reason and the size in its
// error header, the failure is counted and recorded (a duplicate replays it
// without running the handler), and the partition's offsets move past it.
func TestResultTooLarge(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	var runs atomic.Int32
	big := func(context.Context, *Job) ([]byte, error) {
		runs.Add(1)
		return make([]byte, 64<<10+1), nil
	}
	log := newClaimLog()
	w := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.big", big)) }, WithHooks(log.hooks()))
	h.produce(t, []*kgo.Record{
		jobRecord(t, NewJob{Type: "test.big", Key: "big-1"}),
	})
	testkit.Eventually(t, 20*time.Second, "the job fails terminally", func() bool {
		s := w.Stats()
		return s.Failed == 1 && s.DeadLettered == 1
	})
	dl := h.kafka.ReadAll(t, h.dlq)
	if len(dl) != 1 {
		t.Fatalf("%d dead-letter records, want 1", len(dl))
	}
	reason, msg := string(headerValue(dl[0].Headers, HeaderDLQReason)), string(headerValue(dl[0].Headers, HeaderDLQError))
	if reason != ReasonResultTooLarge || !strings.Contains(msg, "65537") {
		t.Errorf("dead-letter reason %q, error %q; want %q naming 65537 bytes", reason, msg, ReasonResultTooLarge)
	}
	h.waitCommitted(t, 20*time.Second)

	// The failure is recorded: a redelivery replays it, the handler does not run again.
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.big", Key: "big-1"})})
	testkit.Eventually(t, 20*time.Second, "the redelivery is replayed", func() bool { return log.saw("big-1", OutcomeDuplicate) })
	h.waitCommitted(t, 20*time.Second)
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
	if s := w.Stats(); s.Succeeded != 0 || s.Retried != 0 || s.LeasesLost != 0 {
		t.Errorf("stats %+v: want no success, retry or lease loss", s)
	}
}

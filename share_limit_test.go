package leasehold

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestShareLastDeliveryDeadLettered: a job that fails without backoff
// (RetryAfter 0) is released and delivered again until the group's
// delivery count limit (5, Kafka's default); the attempt at the limit fails
// for good and is dead-lettered, though WithMaxAttempts allows more, since
// releasing it would let the broker archive the record unrecorded. The
// worker reads the limit from the group, else from the brokers (kfake
// describes a group config the group did not set without its value); it
// took an unreadable limit as none before, so the fifth delivery was
// released too, the broker archived the record, and no copy ever reached
// the dead-letter topic (fails: 5 attempts, no copy).
func TestShareLastDeliveryDeadLettered(t *testing.T) {
	h := setup(t, 1)
	var attempts atomic.Int32
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("t", func(context.Context, *Job) ([]byte, error) {
			attempts.Add(1)
			return nil, RetryAfter(0, errors.New("not now"))
		}, WithMaxAttempts(50)))
	}, h.shareOpts()...)
	if w.share.limit != 5 {
		t.Errorf("delivery count limit read as %d, want 5 (Kafka's default)", w.share.limit)
	}
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "t", Key: "limit"})})
	testkit.Eventually(t, 60*time.Second, "the last delivery dead-lettered", func() bool {
		for _, r := range h.kafka.ReadAll(t, h.dlq) {
			if keyOf(r) == "limit" && string(headerValue(r.Headers, HeaderDLQReason)) == ReasonAttemptsExceeded {
				return true
			}
		}
		return false
	})
	if n := attempts.Load(); n != 5 {
		t.Errorf("%d attempts, want 5 (one per delivery, up to the limit)", n)
	}
}

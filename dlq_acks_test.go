package leasehold

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDeadLetterProducerAcksAll: the client that writes dead-letter copies
// asks for acks=all with idempotent writes (franz-go's defaults, which the
// worker does not override), so that on a cluster with
// min.insync.replicas 2 a dead letter is acknowledged, and the poison
// record's offset committed, only once two replicas have the copy.
func TestDeadLetterProducerAcksAll(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	w, err := New(h.rdb, h.opts()...)
	must(t, err)
	must(t, w.Register("t", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(t, w.Start(ctx))
	defer func() { _ = w.Shutdown(ctx) }()
	if acks := w.cl.OptValue(kgo.RequiredAcks); acks != kgo.AllISRAcks() {
		t.Errorf("dead-letter producer acks = %v, want acks=all", acks)
	}
	if off := w.cl.OptValue(kgo.DisableIdempotentWrite); off != false {
		t.Errorf("dead-letter producer has idempotent writes disabled (%v)", off)
	}
}

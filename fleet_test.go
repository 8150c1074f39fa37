package leasehold

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fleet"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestEmbeddedWorkerInFleet: a Worker built with New in a program of its
// own (no worker binary) publishes itself to the fleet `worker fleet` and
// the console read, with its group, topics and concurrency; WithFleet(false)
// keeps one out; Shutdown deletes the status.
func TestEmbeddedWorkerInFleet(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	noop := func(w *Worker) {
		must(t, w.Register("test.noop", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	}
	w := h.start(t, h.rdb, noop, WithConcurrency(3))
	_ = h.start(t, h.rdb, noop, WithFleet(false))
	ctx := t.Context()
	read := func() fleet.View {
		v, err := fleet.Read(ctx, h.rdb, h.prefix, fleet.RatesOnly)
		if err != nil {
			t.Fatalf("fleet.Read: %v", err)
		}
		return v
	}
	v := read()
	if len(v.Workers) != 1 {
		t.Fatalf("fleet lists %d workers, want the one publishing: %+v", len(v.Workers), v.Workers)
	}
	got := v.Workers[0]
	if got.Group != h.group || len(got.Topics) != 1 || got.Topics[0] != h.topic || got.Concurrency != 3 || got.ID == "" {
		t.Fatalf("fleet status %+v: want group %s, topic %s, concurrency 3", got.Status, h.group, h.topic)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "the stopped worker gone from the fleet", func() bool { return len(read().Workers) == 0 })
}

package leasehold

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCommitWaitHoldsNoRunSlot: a job whose handler returned waits on its
// commit without a run slot, so the next record's handler runs meanwhile;
// with the commit slots all taken, a finished handler keeps its run slot (at
// most 2 x concurrency jobs in hand).
func TestCommitWaitHoldsNoRunSlot(t *testing.T) {
	t.Parallel()
	ran := make(chan string, 2)
	w, b := setupDispatch(t, func(_ context.Context, j *Job) ([]byte, error) {
		ran <- j.Key
		return []byte("ok"), nil
	})
	w.cfg.concurrency = 1
	w.initPool()
	gate := make(chan struct{})
	first := &fakeAttempt{gate: gate, entered: make(chan struct{}, 1)}
	second := &fakeAttempt{gate: gate, entered: make(chan struct{}, 1)}
	b.store.answer("k1", claim{Outcome: OutcomeAcquired, Fence: 1, Attempt: 1}, first)
	b.store.answer("k2", claim{Outcome: OutcomeAcquired, Fence: 2, Attempt: 1}, second)

	start := func(key string, offset int64) {
		t.Helper()
		// The dispatcher's step: a run slot, then the claim and the handler.
		if !w.sem.TryAcquire(1) {
			t.Fatalf("no run slot free to claim %s", key)
		}
		d := w.accept(&kgo.Record{Topic: "jobs", Offset: offset, Value: []byte(`{}`),
			Headers: []kgo.RecordHeader{{Key: HeaderKey, Value: []byte(key)}, {Key: HeaderType, Value: []byte("t")}}})
		if d == nil || w.dispatch([]*delivery{d}) != 1 {
			t.Fatalf("record %s did not start", key)
		}
	}
	start("k1", 0)
	if k := <-ran; k != "k1" {
		t.Fatalf("ran %s", k)
	}
	<-first.entered // k1 waits in Complete, on a commit slot
	start("k2", 1)  // so its run slot is free
	if k := <-ran; k != "k2" {
		t.Fatalf("ran %s", k)
	}
	// k2's handler returned, but k1 holds the only commit slot: k2 keeps its
	// run slot, and no third record can be claimed.
	if w.sem.TryAcquire(1) {
		t.Fatal("a run slot was free while one job waited on its commit and another on a commit slot")
	}
	close(gate)
	<-second.entered
	w.running.Wait()
	for _, a := range []*fakeAttempt{first, second} {
		if c, _, _, _ := a.writes(); c != 1 {
			t.Fatalf("completes = %d, want 1", c)
		}
	}
	if !w.sem.TryAcquire(1) || !w.commits.TryAcquire(1) {
		t.Fatal("slots not given back after the jobs ended")
	}
}

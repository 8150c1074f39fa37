package leasehold

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// orderedRecord is a record of job type typ with idempotency key key and
// Kafka record key "acct", at offset.
func orderedRecord(key, typ string, offset int64) *kgo.Record {
	return &kgo.Record{Topic: "jobs", Offset: offset, Key: []byte("acct"), Value: []byte(`{}`),
		Headers: []kgo.RecordHeader{{Key: HeaderKey, Value: []byte(key)}, {Key: HeaderType, Value: []byte(typ)}}}
}

// TestOrderedKeysDeadLetterKeepsKey: with ordered keys, a record
// dead-lettered before it is admitted (an unknown type) while another
// record of its ordering key runs must not release that key: the record
// after it waits until the running one has finished.
func TestOrderedKeysDeadLetterKeepsKey(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	w, b := setupDispatch(t, func(ctx context.Context, _ *Job) ([]byte, error) {
		<-release
		return nil, nil
	})
	w.sched = newSchedule(true, func() {})
	b.store.answer("a-1", claim{Outcome: OutcomeAcquired}, nil)
	b.store.answer("a-3", claim{Outcome: OutcomeAcquired}, nil)

	must(t, w.sem.Acquire(context.Background(), 1))
	first := w.accept(orderedRecord("a-1", "t", 0))
	if first == nil {
		t.Fatal("the first record of the key was not admitted")
	}
	if used := w.dispatch([]*delivery{first}); used != 1 {
		t.Fatalf("dispatch ran %d handlers, want 1", used)
	}
	if d := w.accept(orderedRecord("a-2", "no.such.type", 1)); d != nil {
		t.Fatal("a record of an unknown type was accepted")
	}
	w.aux.Wait() // its dead-letter copy is written and the record finished
	if s := w.Stats(); s.DeadLettered != 1 {
		t.Fatalf("dead-lettered = %d, want 1", s.DeadLettered)
	}
	if d := w.accept(orderedRecord("a-3", "t", 2)); d != nil {
		t.Fatal("a-3 was admitted while a-1, of the same ordering key, runs")
	}
	if got := w.sched.takeDue(10, time.Now().Add(time.Hour)); len(got) != 0 {
		t.Fatalf("%d records made ready while a-1 runs", len(got))
	}

	close(release)
	w.running.Wait()
	got := w.sched.takeDue(10, time.Now().Add(time.Hour))
	if len(got) != 1 || got[0].key != "a-3" {
		t.Fatalf("after a-1 finished, ready = %d records, want a-3", len(got))
	}
}

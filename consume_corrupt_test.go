package leasehold

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestCorruptRecordDeadLettered: a key whose stored idempotency record was
// damaged by hand in Redis (shorter than the record header) cannot be
// claimed. Its next record goes to the dead-letter topic with reason
// corrupt-record, the job does not run again, and the partition's offsets
// move past it (a later job on the same partition runs and is committed).
func TestCorruptRecordDeadLettered(t *testing.T) {
	h := setup(t, 1)
	ctx := t.Context()
	fx := newEffects()
	reg := func(w *Worker) {
		must(t, w.Register("test.op", func(_ context.Context, j *Job) ([]byte, error) {
			fx.add(j.Key)
			return []byte("ok"), nil
		}))
	}
	const victim = "corrupt-victim"
	payload := []byte(`{"n":1}`)
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.op", Key: victim, Payload: payload})})
	w := h.start(t, h.rdb, reg)
	testkit.Eventually(t, 20*time.Second, "the first run of the victim", func() bool { return fx.count(victim) == 1 })
	h.waitCommitted(t, 20*time.Second)

	// Damage the victim's record in every bucket that holds it: the bucket
	// field is the first 16 bytes of the key's SHA-256 (idempotency/keys.go).
	sum := sha256.Sum256([]byte(victim))
	field := string(sum[:16])
	buckets, err := h.rdb.Keys(ctx, h.prefix+"idem:b:*").Result()
	must(t, err)
	planted := 0
	for _, b := range buckets {
		if ok, err := h.rdb.HExists(ctx, b, field).Result(); err == nil && ok {
			must(t, h.rdb.HSet(ctx, b, field, "\x03\x00\x00").Err())
			planted++
		}
	}
	if planted == 0 {
		t.Fatalf("no bucket among %q holds the victim's record", buckets)
	}

	h.produce(t, []*kgo.Record{
		jobRecord(t, NewJob{Type: "test.op", Key: victim, Payload: payload}),
		jobRecord(t, NewJob{Type: "test.op", Key: "after-victim", Payload: payload}),
	})
	testkit.Eventually(t, 20*time.Second, "the job after the victim", func() bool { return fx.count("after-victim") == 1 })
	h.waitCommitted(t, 20*time.Second)
	testkit.Eventually(t, 20*time.Second, "the dead letter", func() bool { return w.Stats().DeadLettered == 1 })

	got := map[string]string{}
	for _, r := range h.kafka.ReadAll(t, h.dlq) {
		got[keyOf(r)] = string(headerValue(r.Headers, HeaderDLQReason))
	}
	if diff := cmp.Diff(map[string]string{victim: ReasonCorruptRecord}, got); diff != "" {
		t.Errorf("dead-letter topic (-want +got):\n%s", diff)
	}
	if n := fx.count(victim); n != 1 {
		t.Errorf("the victim ran %d times, want 1 (before the damage only)", n)
	}
}

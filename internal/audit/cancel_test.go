package audit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/audit"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestAuditCancelled: a worker runs three jobs on real Redis and Kafka: one
// completes, one fails terminally, one runs until an operator cancels it
// (Inspector.Cancel); the cancelled key is enqueued again afterwards (its
// outcome replayed). The audit (given no dead-letter topic) counts the cancelled key's first record as
// cancelled, its second as a duplicate, and the terminal failure as
// failed: nothing unaccounted.
func TestAuditCancelled(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	k := testkit.StartKafka(t)
	topic := k.Topic(t, "audit-cancel", 1)
	k.CreateTopic(t, topic+".dlq", 1) // the terminal failure's copy; the audit reads no dead-letter topic
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	w, err := leasehold.New(rdb, leasehold.WithKafka(kgo.SeedBrokers(k.Brokers()...), kgo.FetchMaxWait(200*time.Millisecond)),
		leasehold.WithTopics(topic), leasehold.WithGroup("g-"+topic), leasehold.WithKeyPrefix(prefix),
		leasehold.WithLeaseTTL(900*time.Millisecond), leasehold.WithCommitInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	running := make(chan struct{}, 1)
	if err := w.Register("test.job", func(ctx context.Context, j *leasehold.Job) ([]byte, error) {
		switch j.Key {
		case "bad":
			return nil, leasehold.Permanent(errors.New("handler bug"))
		case "long":
			running <- struct{}{}
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}
		return []byte("ok"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Shutdown(context.Background()) }()
	prod := k.Client(t, kgo.DefaultProduceTopic(topic))
	enqueue := func(key string) {
		t.Helper()
		if _, err := leasehold.Enqueue(ctx, prod, leasehold.NewJob{Type: "test.job", Key: key, Payload: []byte(key)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"ok", "bad", "long"} {
		enqueue(key)
	}
	<-running
	in := w.Inspector()
	defer func() { _ = in.Close(context.Background()) }()
	if _, err := in.Cancel(ctx, "long", "test"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the cancel recorded", func() bool {
		ki, err := in.Key(ctx, "long")
		return err == nil && leasehold.IsCancelledFailure(ki.Failure)
	})
	enqueue("long") // replayed: a duplicate
	testkit.Eventually(t, 30*time.Second, "every record committed", func() bool {
		return k.Committed(t, "g-"+topic, topic)[0] == 4
	})

	store, err := in.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	adm := k.Client(t)
	rep, err := audit.Run(ctx, audit.Config{Store: store, Admin: adm, ConnOpts: []kgo.Opt{kgo.SeedBrokers(k.Brokers()...)},
		Topic: topic, Committed: map[int32]int64{0: 4}, IsCancelled: leasehold.IsCancelledFailure})
	if err != nil {
		t.Fatal(err)
	}
	want := map[audit.Outcome]int64{audit.Completed: 1, audit.Failed: 1, audit.Cancelled: 1, audit.Duplicate: 1}
	for _, o := range audit.Outcomes() {
		if rep.Counts[o] != want[o] {
			t.Errorf("%s: %d records, want %d (report %+v)", o, rep.Counts[o], want[o], rep)
		}
	}
}

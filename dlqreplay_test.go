package leasehold

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/deadletter"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestReplayAtMostOnce: each dead-letter record is replayed at most once:
// two replays racing produce one copy, and a record whose marker an earlier
// replay left pending (it died between the marker and the broker's answer)
// is reported and not produced again.
func TestReplayAtMostOnce(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.known", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	})
	h.produce(t, []*kgo.Record{
		jobRecord(t, NewJob{Type: "test.unknown", Key: "u-1", Topic: h.topic}),
		jobRecord(t, NewJob{Type: "test.unknown", Key: "u-2", Topic: h.topic}),
	})
	testkit.Eventually(t, 20*time.Second, "two dead letters", func() bool { return w.Stats().DeadLettered == 2 })

	ops, err := New(h.rdb, h.opts()...)
	must(t, err)
	rd, err := deadletter.NewReader(ops.connOpts(), ops.cfg.dlqTopic)
	must(t, err)
	defer rd.Close()
	dls, topicID, err := ops.readDeadLetters(ctx, rd, DeadLetterFilter{Key: "u-2"})
	must(t, err)
	if len(dls) != 1 || topicID == "" {
		t.Fatalf("dead letters of u-2: %+v, topic ID %q", dls, topicID)
	}
	// u-2: an earlier replay died after setting its marker.
	must(t, h.rdb.Set(ctx, ops.replayMarkerKey(topicID, &dls[0]), "pending:1", 0).Err())

	end := h.kafka.EndOffsets(t, h.topic)
	var wg sync.WaitGroup
	results := make([][]ReplayResult, 2)
	for i := range results {
		wg.Go(func() {
			r, err := ops.ReplayDeadLetters(ctx, DeadLetterFilter{Reason: ReasonUnknownType}, false)
			if err != nil {
				t.Error(err)
			}
			results[i] = r
		})
	}
	wg.Wait()
	produced := 0
	for _, rs := range results {
		for _, r := range rs {
			switch {
			case r.Key == "u-2" && r.Outcome != ReplayPending:
				t.Errorf("u-2 with a pending marker: %s, want %s", r.Outcome, ReplayPending)
			case r.Outcome == ReplayProduced:
				produced++
			}
		}
	}
	got := h.kafka.EndOffsets(t, h.topic)
	if produced != 1 || got[0] != end[0]+1 {
		t.Fatalf("two racing replays produced %d copies (end offset %d -> %d), want 1", produced, end[0], got[0])
	}
}

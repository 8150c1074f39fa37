package leasehold

import (
	"context"
	"crypto/rand"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDeadLetterLargeCopy: a record of about 1,010,000 bytes, under the
// worker's payload bound (1 MiB) but over franz-go's default producer batch
// limit (1,000,012 bytes), of a type nobody handles: its dead-letter copy is
// written whole (the worker's producer limit follows its payload bound), and
// the partition moves on to the next record.
func TestDeadLetterLargeCopy(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.op", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	})
	big := make([]byte, 1_010_000)
	_, _ = rand.Read(big) // incompressible
	h.produceLarge(t, jobRecord(t, NewJob{Type: "nope", Key: "big-1", Payload: big}),
		jobRecord(t, NewJob{Type: "test.op", Key: "after-1"}))
	h.waitCommitted(t, 30*time.Second)

	dl := h.kafka.ReadAll(t, h.dlq)
	if len(dl) != 1 {
		t.Fatalf("%d dead-letter records, want 1", len(dl))
	}
	if len(dl[0].Value) != len(big) || headerValue(dl[0].Headers, HeaderDLQTruncated) != nil {
		t.Errorf("dead-letter copy holds %d bytes (truncated header %q), want the whole %d",
			len(dl[0].Value), headerValue(dl[0].Headers, HeaderDLQTruncated), len(big))
	}
	if s := w.Stats(); s.DeadLettered != 1 || s.DeadLettersTruncated != 0 || s.Succeeded != 1 {
		t.Errorf("stats %+v: want 1 dead letter, none truncated, 1 success", s)
	}
}

// TestDeadLetterCopyRefused: the dead-letter topic takes records of at most
// 100,000 bytes (max.message.bytes), the poison record is 200,000 bytes: the
// broker refuses its copy for good. The worker writes a small copy in its
// place instead (no value; the reason, the error, the original's coordinates,
// key and type headers, and why it was cut), counts and logs it, and the
// partition moves on.
func TestDeadLetterCopyRefused(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	h.dlq = h.topic + ".small-dlq"
	adm := kadm.NewClient(h.kafka.Client(t))
	limit := "100000"
	resp, err := adm.CreateTopic(t.Context(), 1, 1, map[string]*string{"max.message.bytes": &limit}, h.dlq)
	if err == nil {
		err = resp.Err
	}
	must(t, err)
	logs := &testkit.LogSink{}
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.op", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	}, WithLogger(slog.New(logs)))
	big := make([]byte, 200_000)
	_, _ = rand.Read(big)
	h.produceLarge(t, jobRecord(t, NewJob{Type: "nope", Key: "big-2", Payload: big}),
		jobRecord(t, NewJob{Type: "test.op", Key: "after-2"}))
	h.waitCommitted(t, 30*time.Second)

	dl := h.kafka.ReadAll(t, h.dlq)
	if len(dl) != 1 {
		t.Fatalf("%d dead-letter records, want 1", len(dl))
	}
	r := dl[0]
	size := 0
	for _, hd := range r.Headers {
		size += len(hd.Key) + len(hd.Value)
	}
	if size += len(r.Key) + len(r.Value); size > 16<<10 {
		t.Errorf("the stand-in copy holds %d bytes, want a small one", size)
	}
	want := map[string]string{
		HeaderKey: "big-2", HeaderType: "nope", HeaderDLQReason: ReasonUnknownType,
		HeaderDLQTopic: h.topic, HeaderDLQPartition: "0", HeaderDLQOffset: "0",
	}
	for k, v := range want {
		if got := string(headerValue(r.Headers, k)); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if e := string(headerValue(r.Headers, HeaderDLQError)); !strings.Contains(e, "nope") {
		t.Errorf("header %s = %q, want the original error", HeaderDLQError, e)
	}
	if tr := string(headerValue(r.Headers, HeaderDLQTruncated)); !strings.Contains(tr, "MESSAGE_TOO_LARGE") ||
		!strings.Contains(tr, strconv.Itoa(len(big))) {
		t.Errorf("header %s = %q, want the refusal and the original size", HeaderDLQTruncated, tr)
	}
	if s := w.Stats(); s.DeadLettered != 1 || s.DeadLettersTruncated != 1 || s.Succeeded != 1 {
		t.Errorf("stats %+v: want 1 dead letter, 1 truncated, 1 success", s)
	}
	if !logs.Has("dead-letter copy refused as too large: wrote a truncated copy") {
		t.Error("the truncated copy was not logged")
	}

	// The stand-in has no value: a replay would run the job on nothing, so
	// it is refused, with the way to the original.
	res, err := w.ReplayDeadLetters(t.Context(), DeadLetterFilter{Key: "big-2"}, false)
	must(t, err)
	if len(res) != 1 || res[0].Outcome != ReplayTruncated || !strings.Contains(res[0].Hint, h.topic+"/0@0") {
		t.Errorf("replay of the stand-in = %+v, want one %s naming %s/0@0", res, ReplayTruncated, h.topic)
	}
	if end := h.kafka.EndOffsets(t, h.topic); end[0] != 2 {
		t.Errorf("%s end offset %d after the refused replay, want 2 (nothing produced)", h.topic, end[0])
	}
}

// produceLarge produces recs to h.topic with a producer that takes records up
// to 2 MiB.
func (h *harness) produceLarge(t *testing.T, recs ...*kgo.Record) {
	t.Helper()
	cl := h.kafka.Client(t, kgo.DefaultProduceTopic(h.topic), kgo.ProducerBatchMaxBytes(2<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

package leasehold

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/deadletter"
	"github.com/leasehold/leasehold/tracing"
)

// DefaultDeadLetterLimit is how many matching dead-letter records
// [Worker.DeadLetters] and [Worker.ReplayDeadLetters] handle at most when the
// filter's Limit is 0.
const DefaultDeadLetterLimit = 1000

// DeadLetterFilter selects records of the dead-letter topic. Empty fields
// match everything.
type DeadLetterFilter struct {
	Reason string // the dlq-reason header (a Reason* value)
	Type   string // the job type
	Key    string // the idempotency key
	Limit  int    // at most this many matching records; default DefaultDeadLetterLimit
}

func (f DeadLetterFilter) match(d *DeadLetter) bool {
	return (f.Reason == "" || f.Reason == d.Reason) && (f.Type == "" || f.Type == d.Type) && (f.Key == "" || f.Key == d.Key)
}

// DeadLetter is one record of the dead-letter topic.
type DeadLetter struct {
	Partition int32 // in the dead-letter topic
	Offset    int64
	Time      time.Time // when it was dead-lettered
	Reason    string
	Error     string
	Key       string // idempotency key ("" for a record without one)
	Type      string // job type
	// Where the record was consumed from. OrigPartition and OrigOffset are
	// -1 when their header is missing or not a number of their range: such
	// a record is not replayed (ReplayNoOriginTopic).
	OrigTopic     string
	OrigPartition int32
	OrigOffset    int64
	// Truncated is the dlq-truncated header of a stand-in copy (the
	// dead-letter topic refused the full copy as too large; the value was
	// dropped): why, and the original size. Such a record is never replayed.
	Truncated string
	// Replay is the state of its replay: "" (never replayed), "done", or
	// "pending" (a replay began and did not record its end: it may or may
	// not have been produced; it is never replayed again automatically).
	Replay string
	Record *kgo.Record `json:"-"`
}

// Replay outcomes (ReplayResult.Outcome).
const (
	ReplayProduced      = "replayed"
	ReplayDone          = "already-replayed"
	ReplayPending       = "replay-pending"
	ReplayNeedsReset    = "needs-reset"
	ReplayWould         = "would-replay"
	ReplayFailed        = "failed"
	ReplayNoOriginTopic = "no-origin"
	ReplayTruncated     = "truncated"
)

// ReplayResult is what [Worker.ReplayDeadLetters] did with one record.
type ReplayResult struct {
	DeadLetter
	Outcome string
	Hint    string // what the operator should do, when anything
	// To is the replayed copy's offset in OrigTopic/OrigPartition.
	To  int64
	Err error `json:"-"`
}

// DeadLetters reads the worker's dead-letter topic, every partition from its
// start to the end offsets listed when the call begins, and returns the
// records matching f, at most f.Limit, in partition and offset order. It
// works before [Worker.Start].
func (w *Worker) DeadLetters(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error) {
	rd, err := deadletter.NewReader(w.connOpts(), w.cfg.dlqTopic)
	if err != nil {
		return nil, fmt.Errorf("leasehold: kafka client: %w", err)
	}
	defer rd.Close()
	dls, _, err := w.readDeadLetters(ctx, rd, f)
	return dls, err
}

// connOpts are the worker's Kafka connection options (seed brokers, TLS,
// SASL) for a client of its own, without group options.
func (w *Worker) connOpts() []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(defaultBroker)}, w.cfg.kafkaOpts...)
}

// readDeadLetters reads the dead-letter topic (see DeadLetters) and the
// replay markers of the records it returns; it also returns the topic's ID,
// which names the markers.
func (w *Worker) readDeadLetters(ctx context.Context, rd *deadletter.Reader, f DeadLetterFilter) ([]DeadLetter, string, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultDeadLetterLimit
	}
	id, end, err := w.deadLetterEnds(ctx, rd.Client())
	if err != nil {
		return nil, "", err
	}
	var out []DeadLetter
	err = rd.Scan(ctx, nil, end, func(r *kgo.Record) bool {
		if d := parseDeadLetter(r); f.match(&d) {
			out = append(out, d)
		}
		return len(out) < limit
	})
	if err != nil {
		return nil, "", err
	}
	slices.SortFunc(out, func(a, b DeadLetter) int {
		if a.Partition != b.Partition {
			return cmp.Compare(a.Partition, b.Partition)
		}
		return cmp.Compare(a.Offset, b.Offset)
	})
	if err := w.readReplayMarkers(ctx, id, out); err != nil {
		return nil, "", err
	}
	return out, id, nil
}

func parseDeadLetter(r *kgo.Record) DeadLetter {
	h := func(k string) string { return string(headerValue(r.Headers, k)) }
	p, o := originNumber(h(HeaderDLQPartition), 32), originNumber(h(HeaderDLQOffset), 64)
	return DeadLetter{
		Partition: r.Partition, Offset: r.Offset, Time: r.Timestamp,
		Reason: h(HeaderDLQReason), Error: h(HeaderDLQError), Key: h(HeaderKey), Type: h(HeaderType),
		OrigTopic: h(HeaderDLQTopic), OrigPartition: int32(p), OrigOffset: o, //nolint:gosec // -1 or parsed with bitSize 32
		Truncated: h(HeaderDLQTruncated), Record: r,
	}
}

// originNumber reads a dlq-original-partition (bits 32) or
// dlq-original-offset (bits 64) header: -1 when it is missing, not a
// number, out of range or negative. Read as 0, such a header sent a replay
// to partition 0 (the key's own partition or not), and one past int32 to
// a partition that does not exist, whose produce failed and left the
// replay marker pending for good.
func originNumber(v string, bits int) int64 {
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// replayMarkerKey names the replay marker of the dead-letter record at
// partition/offset of the dead-letter topic whose ID is topicID: a topic
// deleted and created again under the same name gets new markers.
func (w *Worker) replayMarkerKey(topicID string, d *DeadLetter) string {
	return w.cfg.keyPrefix + "dlq:replayed:" + w.cfg.dlqTopic + ":" + topicID + ":" +
		strconv.FormatInt(int64(d.Partition), 10) + ":" + strconv.FormatInt(d.Offset, 10)
}

func (w *Worker) readReplayMarkers(ctx context.Context, topicID string, dls []DeadLetter) error {
	if len(dls) == 0 {
		return nil
	}
	p := w.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(dls))
	for i := range dls {
		cmds[i] = p.Get(ctx, w.replayMarkerKey(topicID, &dls[i]))
	}
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return mapStoreErr(fmt.Errorf("leasehold: read replay markers: %w", err))
	}
	for i, c := range cmds {
		if v, err := c.Result(); err == nil {
			dls[i].Replay, _, _ = strings.Cut(v, ":")
		}
	}
	return nil
}

// ReplayDeadLetters produces each dead-letter record matching f (at most
// f.Limit) back to the partition of its original topic it was consumed from,
// with its record key, value and original headers (the dlq-* headers
// removed), at most once per dead-letter record, across calls, processes and
// crashes.
//
// At most once: before producing, a marker named for the record (the
// dead-letter topic's name and ID, partition, offset) is set in Redis with
// SET NX as "pending"; after the broker acknowledged the copy it becomes
// "done". A record whose marker exists is never produced again. A process
// that dies (or a produce that fails) between the two leaves "pending": the
// copy may or may not exist, and the record is reported as
// [ReplayPending] and left alone; check the original topic, and delete the
// marker (<prefix>dlq:replayed:...) to replay it again. Markers are kept
// without expiry (they are small) so that a record is not replayed twice for
// as long as it lives in the dead-letter topic.
//
// A record whose key has a COMPLETED or FAILED record (its cached outcome
// would be replayed) or a record of another payload fingerprint (it would be
// dead-lettered again as a mismatch) is not produced: its result says to
// reset the key first (worker reset KEY, or the Inspector of [Worker.Inspector]) and replay again.
// With dryRun nothing is produced or marked. Each replay is logged and
// traced as a `dlq replay` span.
func (w *Worker) ReplayDeadLetters(ctx context.Context, f DeadLetterFilter, dryRun bool) ([]ReplayResult, error) {
	// One client reads the dead-letter topic and produces the copies.
	rd, err := deadletter.NewReader(append(w.connOpts(), kgo.RecordPartitioner(kgo.ManualPartitioner())), w.cfg.dlqTopic)
	if err != nil {
		return nil, fmt.Errorf("leasehold: kafka client: %w", err)
	}
	defer rd.Close()
	cl := rd.Client()
	dls, topicID, err := w.readDeadLetters(ctx, rd, f)
	if err != nil {
		return nil, err
	}
	out := make([]ReplayResult, 0, len(dls))
	err = w.withView(ctx, func(s *idempotency.Store) error {
		for _, d := range dls {
			out = append(out, w.replayOne(ctx, cl, s, topicID, d, dryRun))
		}
		return nil
	})
	return out, err
}

// replayOne replays one dead-letter record (see ReplayDeadLetters).
func (w *Worker) replayOne(ctx context.Context, cl *kgo.Client, s *idempotency.Store, topicID string, d DeadLetter, dryRun bool) ReplayResult {
	if r, refused := w.replayRefused(topicID, d); refused {
		return r
	}
	r := ReplayResult{DeadLetter: d, To: -1}
	if hint, err := needsReset(ctx, s, d); err != nil || hint != "" {
		r.Outcome, r.Hint, r.Err = ReplayNeedsReset, hint, err
		if err != nil {
			r.Outcome = ReplayFailed
		}
		return r
	}
	if dryRun {
		r.Outcome = ReplayWould
		return r
	}
	var sp *tracing.Span
	if tr := w.cfg.tracer; tr != nil {
		ctx, sp = tr.StartOperator(ctx, tracing.SpanDLQReplay, d.Key)
	}
	r = w.produceReplay(ctx, cl, w.replayMarkerKey(topicID, &d), r)
	w.log.Info("dead letter replayed", slog.String("outcome", r.Outcome), slog.String("key", d.Key),
		slog.String("reason", d.Reason), slog.Int("dlq_partition", int(d.Partition)), slog.Int64("dlq_offset", d.Offset),
		slog.String("topic", d.OrigTopic), slog.Int("partition", int(d.OrigPartition)), slog.Int64("offset", r.To), slog.Any("err", r.Err))
	sp.End(r.Outcome, r.Err) //nolint:contextcheck // ending a span needs no context
	return r
}

// replayRefused answers for a dead letter that is not replayed whatever the
// record's state: replayed already or under way, without its origin, or a
// stand-in without the original value.
func (w *Worker) replayRefused(topicID string, d DeadLetter) (r ReplayResult, refused bool) {
	r = ReplayResult{DeadLetter: d, To: -1}
	switch {
	case d.Replay == "done":
		r.Outcome = ReplayDone
	case d.Replay != "":
		r.Outcome = ReplayPending
		r.Hint = "an earlier replay did not record its end: check " + d.OrigTopic + " for the copy; delete " +
			w.replayMarkerKey(topicID, &d) + " to replay it again"
	case d.OrigTopic == "":
		r.Outcome, r.Hint = ReplayNoOriginTopic, "the record has no "+HeaderDLQTopic+" header"
	case d.OrigPartition < 0:
		r.Outcome, r.Hint = ReplayNoOriginTopic, "the record's "+HeaderDLQPartition+" header is missing or not a partition"
	case d.Truncated != "":
		// A stand-in for a copy the dead-letter topic refused as too large:
		// its value was dropped, so a replay would run the job on nothing.
		r.Outcome = ReplayTruncated
		r.Hint = fmt.Sprintf("a stand-in without the original value (%s): re-enqueue the job from %s/%d@%d, "+
			"where the original record still is while the topic retains it", d.Truncated, d.OrigTopic, d.OrigPartition, d.OrigOffset)
	default:
		return r, false
	}
	return r, true
}

// produceReplay produces r's record to its original topic at most once: the
// replay marker is set pending first (a marker already there means another
// replay took it), then done with where the copy landed.
func (w *Worker) produceReplay(ctx context.Context, cl *kgo.Client, marker string, r ReplayResult) ReplayResult {
	d := r.DeadLetter
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	set, err := w.rdb.SetNX(ctx, marker, "pending:"+now, 0).Result()
	switch {
	case err != nil:
		r.Outcome, r.Err = ReplayFailed, mapStoreErr(fmt.Errorf("leasehold: set the replay marker: %w", err))
		return r
	case !set:
		r.Outcome = ReplayDone // another replay took it since it was read
		return r
	}
	rec := &kgo.Record{Topic: d.OrigTopic, Partition: d.OrigPartition, Key: d.Record.Key, Value: d.Record.Value,
		Headers: originalHeaders(d.Record.Headers)}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		r.Outcome, r.Err = ReplayFailed, fmt.Errorf("leasehold: produce to %s: %w", d.OrigTopic, err)
		r.Hint = "its marker stays pending (the copy may have landed): check " + d.OrigTopic + ", then delete " + marker + " to replay it again"
		return r
	}
	r.Outcome, r.To = ReplayProduced, rec.Offset
	done := "done:" + strconv.FormatInt(time.Now().UnixMilli(), 10) + ":" + strconv.FormatInt(int64(rec.Partition), 10) +
		"/" + strconv.FormatInt(rec.Offset, 10)
	if err := w.rdb.SetXX(ctx, marker, done, 0).Err(); err != nil {
		r.Hint = "replayed, but its marker stays pending: " + err.Error()
	}
	return r
}

// needsReset says why a replay of d would not run its job, or "".
func needsReset(ctx context.Context, s *idempotency.Store, d DeadLetter) (string, error) {
	if d.Key == "" || ValidateKey(d.Key) != nil {
		return "", nil //nolint:nilerr // an invalid key is dead-lettered again as it was; nothing a reset changes
	}
	info, err := s.Lookup(ctx, d.Key)
	if err != nil || info.State == idempotency.Absent {
		return "", mapStoreErr(err)
	}
	fp, err := s.Fingerprint(d.Record.Value)
	switch {
	case err != nil:
		return "", nil //nolint:nilerr // a payload the store cannot fingerprint is dead-lettered again; no reset helps
	case fp != info.Fingerprint:
		return fmt.Sprintf("key %s has a %s record of another payload: a replay would be dead-lettered as %s; "+
			"reset it first", d.Key, info.State, ReasonMismatch), nil
	case info.State == idempotency.Completed || info.State == idempotency.Failed:
		return fmt.Sprintf("key %s is %s: a replay would only replay its cached outcome; reset it first",
			d.Key, info.State), nil
	}
	return "", nil
}

// originalHeaders returns hs without the dead-letter headers (dlq-*).
func originalHeaders(hs []kgo.RecordHeader) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, 0, len(hs))
	for _, h := range hs {
		if !strings.HasPrefix(h.Key, deadletter.HeaderPrefix) {
			out = append(out, h)
		}
	}
	return out
}

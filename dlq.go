package leasehold

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Record headers leasehold reads and writes.
const (
	// HeaderKey carries the idempotency key.
	HeaderKey = "idempotency-key"
	// HeaderType carries the job type.
	HeaderType = "job-type"

	// HeaderDLQReason names why a record was dead-lettered (a Reason* value).
	HeaderDLQReason = "dlq-reason"
	// HeaderDLQError carries the error text, truncated to 1 KiB.
	HeaderDLQError = "dlq-error"
	// HeaderDLQTopic, HeaderDLQPartition and HeaderDLQOffset locate the
	// original record.
	HeaderDLQTopic     = "dlq-original-topic"
	HeaderDLQPartition = "dlq-original-partition"
	HeaderDLQOffset    = "dlq-original-offset"
	// HeaderDLQCluster and HeaderDLQTopicID carry the original's cluster ID
	// and topic ID (base64 URL without padding, as Kafka's tools print it):
	// with them the coordinates name one record across a cluster replaced
	// or a topic created again.
	HeaderDLQCluster = "dlq-original-cluster"
	HeaderDLQTopicID = "dlq-original-topic-id"
	// HeaderDLQTruncated marks a stand-in copy: the dead-letter topic refused
	// the whole copy as too large, so the stand-in carries no value and the
	// original's headers cut short; its value says why and how large the
	// original was.
	HeaderDLQTruncated = "dlq-truncated"
)

// Dead-letter reasons (values of the HeaderDLQReason header).
const (
	ReasonMissingKey       = "missing-key"
	ReasonInvalidKey       = "invalid-key"
	ReasonInvalidType      = "invalid-type"
	ReasonUnknownType      = "unknown-type"
	ReasonPayloadTooLarge  = "payload-too-large"
	ReasonMismatch         = "fingerprint-mismatch"
	ReasonUndecodable      = "undecodable"
	ReasonPermanent        = "permanent-failure"
	ReasonAttemptsExceeded = "attempts-exhausted"
	ReasonCorruptRecord    = "corrupt-record"
)

const maxDLQError = 1 << 10

// deadLetterRecord builds the dead-letter copy of r: same key and value, the
// original headers, and the dlq-* headers.
func deadLetterRecord(topic string, r *kgo.Record, reason string, cause error) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, len(r.Headers)+5)
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderDLQReason, HeaderDLQError, HeaderDLQTopic, HeaderDLQPartition, HeaderDLQOffset,
			HeaderDLQCluster, HeaderDLQTopicID:
			continue // a record dead-lettered twice keeps only the latest reason
		}
		hs = append(hs, h)
	}
	msg := ""
	if cause != nil {
		msg = cause.Error()
		if len(msg) > maxDLQError {
			msg = msg[:maxDLQError]
		}
	}
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderDLQReason, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderDLQError, Value: []byte(msg)},
		kgo.RecordHeader{Key: HeaderDLQTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderDLQPartition, Value: []byte(strconv.FormatInt(int64(r.Partition), 10))},
		kgo.RecordHeader{Key: HeaderDLQOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))},
	)
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: hs}
}

// withOrigin adds the original's cluster ID and topic ID to rec, a
// dead-letter copy.
func withOrigin(rec *kgo.Record, o recordOrigin) *kgo.Record {
	rec.Headers = append(rec.Headers,
		kgo.RecordHeader{Key: HeaderDLQCluster, Value: []byte(o.cluster)},
		kgo.RecordHeader{Key: HeaderDLQTopicID, Value: []byte(o.topicIDString())},
	)
	return rec
}

// produceDeadLetter writes the dead-letter record synchronously: the original
// offset is marked done only after the broker acknowledged the copy.
func produceDeadLetter(ctx context.Context, cl *kgo.Client, rec *kgo.Record) error {
	return cl.ProduceSync(ctx, rec).FirstErr()
}

// refusedAsTooLarge reports whether a produce failed because the record is
// too large for the producer's batch limit or the topic's max.message.bytes:
// the same copy would be refused on every retry.
func refusedAsTooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// maxTruncatedHeader bounds each header value (and the record key) a
// stand-in copy keeps.
const maxTruncatedHeader = 1 << 10

// truncatedDeadLetter returns the stand-in for rec, a dead-letter copy
// refused as too large (err): no value, the record key and the idempotency
// key, job type and dlq-* headers cut to 1 KiB each, the original's other
// headers dropped, and HeaderDLQTruncated naming the refusal and the
// original's size. It is a few KiB at most, and a scan for the copy finds it
// like the whole copy (same dlq-original-* headers).
func truncatedDeadLetter(rec *kgo.Record, err error) *kgo.Record {
	cut := func(b []byte) []byte { return b[:min(len(b), maxTruncatedHeader)] }
	size := len(rec.Key) + len(rec.Value)
	var hs []kgo.RecordHeader
	for _, h := range rec.Headers {
		size += len(h.Key) + len(h.Value)
		switch h.Key {
		case HeaderKey, HeaderType, HeaderDLQReason, HeaderDLQError, HeaderDLQTopic, HeaderDLQPartition,
			HeaderDLQOffset, HeaderDLQCluster, HeaderDLQTopicID:
			hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: cut(h.Value)})
		}
	}
	why := fmt.Sprintf("copy of %d bytes (value %d bytes, %d headers) refused: %v",
		size, len(rec.Value), len(rec.Headers), err)
	hs = append(hs, kgo.RecordHeader{Key: HeaderDLQTruncated, Value: cut([]byte(why))})
	return &kgo.Record{Topic: rec.Topic, Key: cut(rec.Key), Headers: hs}
}

// deadLetter writes d's copy to the dead-letter topic once (see
// dlqmarker.go), retrying until the copy exists or the worker stops, then
// marks d done. Only the worker whose produce was acknowledged counts (in
// Stats and leasehold.dead_lettered), logs and reports the dead letter; a
// copy found already written is not reported again.
func (w *Worker) deadLetter(d *delivery, reason string, cause error) {
	w.deadLetterThen(d, reason, cause, nil)
}

// deadLetterThen is deadLetter with then, if not nil, run once the copy
// exists (written now, or found from an earlier delivery) and before the
// record is finished; when then reports false the record is not finished
// (then has arranged what happens to it).
func (w *Worker) deadLetterThen(d *delivery, reason string, cause error, then func() bool) {
	base := w.obs.deadLetterDecided(context.WithoutCancel(w.stopCtx), d, reason, cause)
	w.aux.Add(1)
	go func() {
		defer w.aux.Done()
		o, ok := w.originOf(base, d.rec.Topic)
		if !ok {
			return // not finished: the record is consumed again by the next owner
		}
		rec := withOrigin(deadLetterRecord(w.cfg.dlqTopic, d.rec, reason, cause), o)
		wrote, ok := w.writeDeadLetterOnce(base, d.rec, o, rec)
		if !ok {
			return // not finished: the record is consumed again by the next owner
		}
		if then != nil && !then() {
			return
		}
		if wrote != dlqFound {
			w.obs.deadLetterWritten(base, d, deadLettered{reason: reason, cause: cause,
				truncated: wrote == dlqTruncated, dlqTopic: w.cfg.dlqTopic})
		}
		w.finish(d)
	}()
}

package leasehold

import (
	"context"
	"log/slog"
	"strconv"

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
		case HeaderDLQReason, HeaderDLQError, HeaderDLQTopic, HeaderDLQPartition, HeaderDLQOffset:
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

// produceDeadLetter writes the dead-letter record synchronously: the original
// offset is marked done only after the broker acknowledged the copy.
func produceDeadLetter(ctx context.Context, cl *kgo.Client, rec *kgo.Record) error {
	return cl.ProduceSync(ctx, rec).FirstErr()
}

// deadLetter writes d's copy to the dead-letter topic once (see
// dlqmarker.go), retrying until the copy exists or the worker stops, then
// marks d done. Only the worker whose produce was acknowledged counts,
// logs and reports the dead letter; a copy found already written is not
// reported again.
func (w *Worker) deadLetter(d *delivery, reason string, cause error) {
	w.deadLetterThen(d, reason, cause, nil)
}

// deadLetterThen is deadLetter with then, if not nil, run once the copy
// exists (written now, or found from an earlier delivery) and before the
// record is finished; when then reports false the record is not finished
// (then has arranged what happens to it).
func (w *Worker) deadLetterThen(d *delivery, reason string, cause error, then func() bool) {
	w.traceDeadLetter(d, reason, cause)
	rec := deadLetterRecord(w.cfg.dlqTopic, d.rec, reason, cause)
	w.aux.Add(1)
	go func() {
		defer w.aux.Done()
		produced, ok := w.writeDeadLetterOnce(traceContext(context.WithoutCancel(w.stopCtx), d), d.rec, rec)
		if !ok {
			return // not finished: the record is consumed again by the next owner
		}
		if then != nil && !then() {
			return
		}
		if produced {
			w.stats.deadLettered.Add(1)
			w.log.Warn("dead-lettered", slog.String("reason", reason), slog.String("topic", d.rec.Topic),
				slog.Int("partition", int(d.rec.Partition)), slog.Int64("offset", d.rec.Offset), slog.Any("err", cause))
			w.hooks.deadLetter(w.stopCtx, d.info(), reason, cause)
		}
		w.finish(d)
	}()
}

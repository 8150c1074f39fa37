package leasehold

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/outcome"
	"github.com/leasehold/leasehold/tracing"
)

// MaxKeyLen bounds the length of idempotency keys and job types, in bytes.
// It is the idempotency store's bound (idempotency.DefaultMaxKeyLen), so
// that the store takes every key the worker and [Enqueue] take.
const MaxKeyLen = idempotency.DefaultMaxKeyLen

// NewJob describes a job to enqueue.
type NewJob struct {
	// Type is the job type; required.
	Type string
	// Key is the idempotency key. Pass a deterministic key (an order id, a
	// request id) so that retries of the producer deduplicate; when empty a
	// random UUID is used, which deduplicates only broker-level redelivery.
	Key string
	// Payload is the record value.
	Payload []byte
	// Topic is the topic to produce to; when empty the client's default
	// produce topic (kgo.DefaultProduceTopic) is used.
	Topic string
	// PartitionKey is the Kafka record key, which picks the partition and,
	// with [WithOrderedKeys], the ordering. Default: the idempotency key, so
	// that every copy of a job lands in the same partition.
	PartitionKey []byte
	// Headers are extra record headers.
	Headers map[string]string
}

// Enqueue produces one job and waits for the broker's acknowledgement. It sets
// the idempotency-key and job-type headers and returns the key used.
//
// Enqueue makes its own producer span, `enqueue <type>`, a child of the span
// in ctx when there is one, with the tracer of cl's tracing hooks: the
// worker's own client ([Worker.Client]) traces with the providers given to
// the worker ([WithTracerProvider]), a client built with a
// tracing.Tracer's KgoOpt with that Tracer's; any other client with the
// OpenTelemetry globals, the default of every leasehold layer. The record
// carries the span's context, so a client with tracing hooks injects it
// into the record's headers.
func Enqueue(ctx context.Context, cl *kgo.Client, job NewJob) (string, error) {
	r, err := job.record(ctx)
	if err != nil {
		return "", err
	}
	key := string(headerValue(r.Headers, HeaderKey))
	var sp *tracing.Span // nil: no span (End does nothing)
	if tr := enqueueTracer(cl); tr != nil {
		ctx, sp = tr.StartEnqueue(ctx, job.Type, key)
	}
	r.Context = ctx
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		sp.End(string(outcome.Error), err) //nolint:contextcheck // End ends the span under its own context
		return "", fmt.Errorf("leasehold: enqueue %s %q: %w", job.Type, job.Key, err)
	}
	sp.End(string(outcome.Enqueued), nil) //nolint:contextcheck // End ends the span under its own context
	return key, nil
}

// globalTracer traces producers whose client has no tracing hooks, with the
// OpenTelemetry globals (which forward to providers set later).
// nil if the global meter provider refused an instrument (then Enqueue makes
// no span).
var globalTracer = sync.OnceValue(func() *tracing.Tracer {
	t, _ := tracing.New()
	return t
})

// enqueueTracer is the tracer of cl's tracing hooks, else globalTracer (or nil).
func enqueueTracer(cl *kgo.Client) *tracing.Tracer {
	if t := tracing.FromClient(cl); t != nil {
		return t
	}
	return globalTracer()
}

// EnqueueBatch produces jobs concurrently and waits for every
// acknowledgement. It returns the keys used, in order, and the first error.
func EnqueueBatch(ctx context.Context, cl *kgo.Client, jobs []NewJob) ([]string, error) {
	recs := make([]*kgo.Record, len(jobs))
	keys := make([]string, len(jobs))
	for i, j := range jobs {
		r, err := j.record(ctx)
		if err != nil {
			return nil, err
		}
		recs[i] = r
		keys[i] = string(headerValue(r.Headers, HeaderKey))
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, fmt.Errorf("leasehold: enqueue batch: %w", err)
	}
	return keys, nil
}

// KafkaRecord builds the Kafka record [Enqueue] produces for job, for
// callers that produce asynchronously with their own client calls. It starts
// no span: produce it on a client with tracing hooks for kotel's.
func KafkaRecord(ctx context.Context, job NewJob) (*kgo.Record, error) { return job.record(ctx) }

// Record builds the Kafka record [Enqueue] produces for job.
//
// Deprecated: use [KafkaRecord]; the name read like the idempotency record.
// Record will be removed in the next release.
func Record(ctx context.Context, job NewJob) (*kgo.Record, error) { return KafkaRecord(ctx, job) }

func (j NewJob) record(ctx context.Context) (*kgo.Record, error) {
	if err := ValidateType(j.Type); err != nil {
		return nil, err
	}
	key := j.Key
	if key == "" {
		key = uuid.NewString()
	}
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	pk := j.PartitionKey
	if pk == nil {
		pk = []byte(key)
	}
	hs := make([]kgo.RecordHeader, 0, len(j.Headers)+2)
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderKey, Value: []byte(key)},
		kgo.RecordHeader{Key: HeaderType, Value: []byte(j.Type)},
	)
	for k, v := range j.Headers {
		if k == HeaderKey || k == HeaderType {
			continue
		}
		hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return &kgo.Record{Topic: j.Topic, Key: pk, Value: j.Payload, Headers: hs, Context: ctx}, nil
}

// ValidateKey checks an idempotency key: 1 to [MaxKeyLen] bytes of UTF-8
// without control characters or white space. It is idempotency.ValidateKey
// with the worker's bound, so a key the producer accepts is one the store
// accepts; the error is an *idempotency.KeyError matching [ErrInvalidKey].
func ValidateKey(key string) error { return idempotency.ValidateKey(key, MaxKeyLen) }

// ValidateType checks a job type with the same rules as [ValidateKey]; the
// error matches [ErrInvalidJobType].
func ValidateType(t string) error {
	err := idempotency.ValidateKey(t, MaxKeyLen)
	if err == nil {
		return nil // before errors.As, whose target would be allocated on every call
	}
	var ke *idempotency.KeyError
	if errors.As(err, &ke) {
		return fmt.Errorf("%w: %s", ErrInvalidJobType, ke.Reason)
	}
	return nil
}

func headerValue(hs []kgo.RecordHeader, key string) []byte {
	for _, h := range hs {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

package tracing

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/jobtrace"
	"github.com/leasehold/leasehold/outcome"
)

// The implementation lives in internal/jobtrace; this file is its public
// face: what a program needs to give the worker its telemetry, produce
// traced records and read the names the worker records.

func init() {
	jobtrace.RegisterUnwrap(func(v any) *jobtrace.Tracer {
		if t, ok := v.(*Tracer); ok && t != nil {
			return t.t
		}
		return nil
	})
}

// Tracer makes leasehold's spans and records its metrics. It wires franz-go's
// kotel plugin, which creates the publish and receive spans and carries the
// trace context in record headers; the worker makes each job's span
// (`process <topic>`) under kotel's receive span, with the job's own child
// spans and events. Give it to the worker with leasehold.WithTracing, or give
// the worker the providers (leasehold.WithTracerProvider, ...) and it builds
// its own. It is safe for concurrent use.
type Tracer struct{ t *jobtrace.Tracer }

// New returns a Tracer.
func New(opts ...Opt) (*Tracer, error) {
	jt, err := jobtrace.New(opts...)
	if err != nil {
		return nil, err
	}
	t := &Tracer{t: jt}
	jt.SetFace(t)
	return t, nil
}

// FromClient returns the Tracer whose [Tracer.KgoOpt] cl was built with (the
// first, if several), or nil. leasehold.Enqueue starts its producer span with
// it, so that a producer client and the worker's own client trace with the
// providers they were built with.
func FromClient(cl *kgo.Client) *Tracer {
	t, _ := jobtrace.FromClient(cl).Face().(*Tracer)
	return t
}

// KgoOpt returns the franz-go option that installs kotel's tracing and
// metrics hooks. Give it to every producer and consumer client: the producer
// injects the trace context into record headers, the consumer extracts it,
// and the worker's job span continues from there.
func (t *Tracer) KgoOpt() kgo.Opt { return t.t.KgoOpt() }

// OTelProviders returns the tracer provider, meter provider and propagator
// t uses; a Tracer is itself a [Providers].
func (t *Tracer) OTelProviders() (trace.TracerProvider, metric.MeterProvider, propagation.TextMapPropagator) {
	return t.t.OTelProviders()
}

// Propagator returns the propagator used for record headers.
func (t *Tracer) Propagator() propagation.TextMapPropagator { return t.t.Propagator() }

// KeyAttribute returns idempotency key key as t records it in span
// attributes (redacted per [WithKeyRedaction]), and false when keys are
// omitted. On a nil Tracer it uses the default redaction.
func (t *Tracer) KeyAttribute(key string) (string, bool) {
	var jt *jobtrace.Tracer
	if t != nil {
		jt = t.t
	}
	return jt.KeyAttribute(key)
}

// StartEnqueue starts the span `enqueue <type>` under which a producer
// produces a job record. Produce the record with the returned context (or set
// Record.Context to it) on a client built with [Tracer.KgoOpt]: kotel's
// publish span becomes its child and carries the trace to the consumer. End
// the returned span when the produce call has returned (outcome.Enqueued or
// outcome.Error). leasehold.Enqueue does this itself.
func (t *Tracer) StartEnqueue(ctx context.Context, jobType, key string) (context.Context, *Span) {
	return t.t.StartEnqueue(ctx, jobType, key)
}

// StartOperator starts the span of an operator's action on idempotency key
// key (name is SpanReset or SpanDLQReplay), a root span unless ctx carries
// one, with the redacted key and attrs. End it with the action's outcome.
func (t *Tracer) StartOperator(ctx context.Context, name, key string, attrs ...attribute.KeyValue) (context.Context, *Span) {
	return t.t.StartOperator(ctx, name, key, attrs...)
}

// Span is an enqueue span ([Tracer.StartEnqueue]) or an operator action's
// span ([Tracer.StartOperator]): End it once with its outcome (a name of
// package outcome) and the error, if any.
type Span = jobtrace.Span

// InJob reports whether ctx derives from a job's context (the worker's job
// span or one of its children): a compensation started there is the job
// span's child.
func InJob(ctx context.Context) bool { return jobtrace.InJob(ctx) }

// Opt configures [New].
type Opt = jobtrace.Opt

// Providers is a program's OpenTelemetry setup as [WithTelemetry] reads it.
// *otelsetup.Telemetry (package tracing/otelsetup, which builds the SDK,
// exporters and the Prometheus handler) implements it; this package itself
// imports only the OpenTelemetry API.
type Providers = jobtrace.Providers

// WithTelemetry uses the providers and propagator of tel (from
// otelsetup.Setup). Default: the OpenTelemetry globals.
func WithTelemetry(tel Providers) Opt { return jobtrace.WithTelemetry(tel) }

// WithTracerProvider sets the tracer provider. Default: otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Opt { return jobtrace.WithTracerProvider(tp) }

// WithMeterProvider sets the meter provider. Default: otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Opt { return jobtrace.WithMeterProvider(mp) }

// WithPropagator sets the propagator that kotel uses for record headers.
// Default: otel.GetTextMapPropagator().
func WithPropagator(p propagation.TextMapPropagator) Opt { return jobtrace.WithPropagator(p) }

// WithKeyRedaction sets how idempotency keys and Kafka record keys appear in
// spans. Default: [KeyHashed].
func WithKeyRedaction(r Redaction) Opt { return jobtrace.WithKeyRedaction(r) }

// WithKeyHashSecret makes [KeyHashed] an HMAC-SHA256 under secret, so that
// keys cannot be recovered by hashing guesses. Default: none (plain SHA-256).
func WithKeyHashSecret(secret []byte) Opt { return jobtrace.WithKeyHashSecret(secret) }

// WithHeartbeatEventInterval sets the minimum time between two heartbeat
// events on one job span; heartbeats in between are counted in the next
// event's leasehold.heartbeat.skipped attribute. Default:
// [DefaultHeartbeatEventInterval].
func WithHeartbeatEventInterval(d time.Duration) Opt { return jobtrace.WithHeartbeatEventInterval(d) }

// WithConsumerGroup sets the consumer group recorded on consumer spans
// (messaging.consumer.group.name on job spans, kotel's attribute on its
// receive spans). Default: none.
func WithConsumerGroup(group string) Opt { return jobtrace.WithConsumerGroup(group) }

// WithClientID sets the Kafka client ID recorded on spans
// (messaging.client.id on job spans). Default: none.
func WithClientID(id string) Opt { return jobtrace.WithClientID(id) }

// WithClock sets the clock used to throttle heartbeat events and time jobs.
// Default: time.Now.
func WithClock(now func() time.Time) Opt { return jobtrace.WithClock(now) }

// Redaction says how an idempotency key (and a Kafka record key) appears in
// span attributes.
type Redaction = jobtrace.Redaction

// Key redactions.
const (
	// KeyHashed records "sha256:" and the first 16 hex digits of the key's
	// SHA-256, or "hmac-sha256:..." when [WithKeyHashSecret] is set. Equal keys
	// hash equally, so one job's attempts can still be found. Without a
	// secret, a guessable key (an e-mail address, an order number) can be
	// found by hashing candidates: set a secret for those.
	KeyHashed = jobtrace.KeyHashed
	// KeyFull records the key as is (truncated to 256 bytes).
	KeyFull = jobtrace.KeyFull
	// KeyOmitted records no key at all.
	KeyOmitted = jobtrace.KeyOmitted
)

// ParseRedaction parses "hash", "full" or "none".
func ParseRedaction(s string) (Redaction, error) { return jobtrace.ParseRedaction(s) }

// ErrConfig is returned by [New], and by otelsetup.Setup, when an option or an
// OTEL_* environment variable holds a value that cannot be used.
var ErrConfig = jobtrace.ErrConfig

// ConfigError names the setting that [ErrConfig] is about.
type ConfigError = jobtrace.ConfigError

// Kind is the kind of a metric instrument.
type Kind = jobtrace.Kind

// Instrument kinds used by leasehold metrics.
const (
	KindCounter   = jobtrace.KindCounter
	KindHistogram = jobtrace.KindHistogram
	KindGauge     = jobtrace.KindGauge
)

// MetricInfo describes one leasehold metric.
type MetricInfo = jobtrace.MetricInfo

// Catalog lists every leasehold metric. The Grafana dashboard in deploy/ and
// the table in docs/observability.md are checked against it.
func Catalog() []MetricInfo { return jobtrace.Catalog() }

// PrometheusNames lists every series name the Prometheus exporter serves for
// leasehold's metrics (a histogram's _bucket, _sum and _count).
func PrometheusNames() []string { return jobtrace.PrometheusNames() }

// Outcomes recorded by the worker, as strings: the names of package
// outcome, where each is documented with the others (the one outcome
// vocabulary). Prefer the outcome constants; these stay for one release.
const (
	OutcomeCompleted    = string(outcome.Completed)
	OutcomeFailed       = string(outcome.Failed)
	OutcomeRetry        = string(outcome.Retry)
	OutcomeLeaseLost    = string(outcome.LeaseLost)
	OutcomeDuplicate    = string(outcome.Duplicate)
	OutcomeHeld         = string(outcome.Held)
	OutcomeDeadLettered = string(outcome.DeadLettered)
	OutcomeCommitted    = string(outcome.Committed)
	OutcomeCompensated  = string(outcome.Compensated)
	OutcomeError        = string(outcome.Error)
)

// Span names. A job span is named "process <topic>" (the OpenTelemetry
// messaging conventions' "{operation} {destination}"; its job type is the
// leasehold.job.type attribute), an enqueue span "enqueue <job type>", a
// compensation span "compensate <step>".
const (
	SpanEnqueue      = jobtrace.SpanEnqueue
	SpanProcess      = jobtrace.SpanProcess
	SpanClaim        = jobtrace.SpanClaim
	SpanHandler      = jobtrace.SpanHandler
	SpanCommit       = jobtrace.SpanCommit
	SpanCompensation = jobtrace.SpanCompensation
)

// Event names on the job span.
const (
	EventHeartbeat       = jobtrace.EventHeartbeat
	EventLeaseLost       = jobtrace.EventLeaseLost
	EventTakeover        = jobtrace.EventTakeover
	EventDuplicateReplay = jobtrace.EventDuplicateReplay
	EventDeadLettered    = jobtrace.EventDeadLettered
)

// Span and event attribute keys. A job span's messaging.* attributes are
// the OpenTelemetry semantic conventions' (go.opentelemetry.io/otel/semconv);
// kotel's publish and receive spans carry kotel's own (older) ones. No attribute ever holds a job's payload, its result, heartbeat
// details or credentials.
const (
	AttrJobType          = jobtrace.AttrJobType
	AttrIdempotencyKey   = jobtrace.AttrIdempotencyKey
	AttrFence            = jobtrace.AttrFence
	AttrAttempt          = jobtrace.AttrAttempt
	AttrOutcome          = jobtrace.AttrOutcome
	AttrPreviousFence    = jobtrace.AttrPreviousFence
	AttrCause            = jobtrace.AttrCause
	AttrReason           = jobtrace.AttrReason
	AttrStep             = jobtrace.AttrStep
	AttrHeartbeatSkipped = jobtrace.AttrHeartbeatSkipped
	AttrErrorType        = jobtrace.AttrErrorType
	AttrErrorMessage     = jobtrace.AttrErrorMessage
)

// Span names of operator actions on one key or record (see
// Tracer.StartOperator).
const (
	SpanReset     = jobtrace.SpanReset
	SpanDLQReplay = jobtrace.SpanDLQReplay
)

// AttrForce records whether an operator forced an action (a reset that ends
// a live lease).
const AttrForce = jobtrace.AttrForce

// Names of every leasehold metric instrument, as created through a
// MeterProvider. The lease.* instruments are created by package lease from the
// MeterProvider given to lease.Manager; the others by the worker.
const (
	MetricLeaseHeld          = jobtrace.MetricLeaseHeld
	MetricLeaseRenewDuration = jobtrace.MetricLeaseRenewDuration
	MetricLeaseLost          = jobtrace.MetricLeaseLost
	MetricLeaseAcquire       = jobtrace.MetricLeaseAcquire
	MetricClaims             = jobtrace.MetricClaims
	MetricJobDuration        = jobtrace.MetricJobDuration
	MetricCompensations      = jobtrace.MetricCompensations
	MetricDeadLettered       = jobtrace.MetricDeadLettered
	MetricCommitLag          = jobtrace.MetricCommitLag
)

// Metric label (attribute) keys. They are short on purpose: the Prometheus
// exporter turns them into label names used in PromQL.
const (
	LabelOutcome   = jobtrace.LabelOutcome
	LabelCause     = jobtrace.LabelCause
	LabelJobType   = jobtrace.LabelJobType
	LabelReason    = jobtrace.LabelReason
	LabelTopic     = jobtrace.LabelTopic
	LabelPartition = jobtrace.LabelPartition
)

// OtherJobType is the job_type label of job types beyond the first 256 seen.
const OtherJobType = jobtrace.OtherJobType

// DefaultHeartbeatEventInterval is the default minimum time between two
// heartbeat events on one job span.
const DefaultHeartbeatEventInterval = jobtrace.DefaultHeartbeatEventInterval

// DefaultServiceName is the service.name a worker reports when neither its
// telemetry setup nor OTEL_SERVICE_NAME names one.
const DefaultServiceName = jobtrace.DefaultServiceName

package jobtrace

import (
	"cmp"
	"context"
	"errors"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/buildinfo"
)

// instrumentationName names leasehold's tracer and meter.
const instrumentationName = "github.com/leasehold/leasehold"

// DefaultHeartbeatEventInterval is the default minimum time between two
// heartbeat events on one job span.
const DefaultHeartbeatEventInterval = 10 * time.Second

// Opt configures [New].
type Opt interface{ apply(*cfg) }

type optFunc func(*cfg)

func (f optFunc) apply(c *cfg) { f(c) }

type cfg struct {
	tp        trace.TracerProvider
	mp        metric.MeterProvider
	prop      propagation.TextMapPropagator
	redact    redactor
	beatEvery time.Duration
	group     string
	clientID  string
	now       func() time.Time
}

// DefaultServiceName is the service.name a worker reports when neither its
// telemetry setup nor OTEL_SERVICE_NAME names one.
const DefaultServiceName = "leasehold-worker"

// Providers is a program's OpenTelemetry setup as [WithTelemetry] reads it.
// *otelsetup.Telemetry (package tracing/otelsetup, which builds the SDK,
// exporters and the Prometheus handler) implements it; this package itself
// imports only the OpenTelemetry API.
type Providers interface {
	OTelProviders() (trace.TracerProvider, metric.MeterProvider, propagation.TextMapPropagator)
}

// WithTelemetry uses the providers and propagator of tel (from
// otelsetup.Setup). Default: the OpenTelemetry globals.
func WithTelemetry(tel Providers) Opt {
	return optFunc(func(c *cfg) { c.tp, c.mp, c.prop = tel.OTelProviders() })
}

// WithTracerProvider sets the tracer provider. Default: otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Opt {
	return optFunc(func(c *cfg) { c.tp = tp })
}

// WithMeterProvider sets the meter provider. Default: otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Opt {
	return optFunc(func(c *cfg) { c.mp = mp })
}

// WithPropagator sets the propagator that kotel uses for record headers.
// Default: otel.GetTextMapPropagator().
func WithPropagator(p propagation.TextMapPropagator) Opt {
	return optFunc(func(c *cfg) { c.prop = p })
}

// WithKeyRedaction sets how idempotency keys and Kafka record keys appear in
// spans. Default: [KeyHashed].
func WithKeyRedaction(r Redaction) Opt {
	return optFunc(func(c *cfg) { c.redact.mode = r })
}

// WithKeyHashSecret makes [KeyHashed] an HMAC-SHA256 under secret, so that
// keys cannot be recovered by hashing guesses. Default: none (plain SHA-256).
func WithKeyHashSecret(secret []byte) Opt {
	return optFunc(func(c *cfg) { c.redact.secret = append([]byte(nil), secret...) })
}

// WithHeartbeatEventInterval sets the minimum time between two heartbeat
// events on one job span; heartbeats in between are counted in the next
// event's leasehold.heartbeat.skipped attribute. Default:
// [DefaultHeartbeatEventInterval].
func WithHeartbeatEventInterval(d time.Duration) Opt {
	return optFunc(func(c *cfg) { c.beatEvery = d })
}

// WithConsumerGroup sets the consumer group recorded on consumer spans
// (messaging.consumer.group.name on job spans, kotel's attribute on its
// receive spans). Default: none.
func WithConsumerGroup(group string) Opt {
	return optFunc(func(c *cfg) { c.group = group })
}

// WithClientID sets the Kafka client ID recorded on spans
// (messaging.client.id on job spans). Default: none.
func WithClientID(id string) Opt {
	return optFunc(func(c *cfg) { c.clientID = id })
}

// WithClock sets the clock used to throttle heartbeat events and time jobs.
// Default: time.Now.
func WithClock(now func() time.Time) Opt {
	return optFunc(func(c *cfg) { c.now = now })
}

// Tracer makes leasehold's spans and records its metrics. It wires franz-go's
// kotel plugin, which creates the publish and receive spans and carries the
// trace context in record headers, and makes each job's span (`process
// <topic>`) under kotel's receive span, with the job's own child spans and
// events. It is safe for concurrent use.
type Tracer struct {
	cfg     cfg
	kind    providerKind // what cfg.tp can record (records)
	tracer  trace.Tracer
	hooks   []kgo.Hook
	metrics *Metrics
	face    any // the public *tracing.Tracer over t (SetFace)

	namesMu sync.Mutex
	names   map[string]string // job span names by topic (processName)
}

// SetFace records the public value (a *tracing.Tracer) that wraps t, so that
// [FromClient] and [Of] find one from the other.
func (t *Tracer) SetFace(f any) { t.face = f }

// Face returns the value given to [Tracer.SetFace], or nil.
func (t *Tracer) Face() any {
	if t == nil {
		return nil
	}
	return t.face
}

// unwrap finds the Tracer under a public *tracing.Tracer; package tracing
// sets it (RegisterUnwrap), as it cannot be imported from here.
var unwrap func(any) *Tracer

// RegisterUnwrap sets how [Of] finds the Tracer under a public value.
// Package tracing calls it at init.
func RegisterUnwrap(f func(any) *Tracer) { unwrap = f }

// Of returns the Tracer under the public *tracing.Tracer pub, or nil (for
// a nil pub).
func Of(pub any) *Tracer {
	if unwrap == nil {
		return nil
	}
	return unwrap(pub)
}

// New returns a Tracer.
func New(opts ...Opt) (*Tracer, error) {
	var c cfg
	for _, o := range opts {
		o.apply(&c)
	}
	c.tp = cmp.Or[trace.TracerProvider](c.tp, otel.GetTracerProvider())
	c.mp = cmp.Or[metric.MeterProvider](c.mp, otel.GetMeterProvider())
	c.prop = cmp.Or[propagation.TextMapPropagator](c.prop, otel.GetTextMapPropagator())
	c.beatEvery = cmp.Or(c.beatEvery, DefaultHeartbeatEventInterval)
	if c.beatEvery < 0 {
		return nil, &ConfigError{Setting: "heartbeat event interval", Value: c.beatEvery.String()}
	}
	if c.redact.mode < KeyHashed || c.redact.mode > KeyOmitted {
		return nil, &ConfigError{Setting: "key redaction", Value: c.redact.mode.String()}
	}
	if c.now == nil {
		c.now = time.Now
	}
	m, err := newMetrics(c.mp)
	if err != nil {
		return nil, &ConfigError{Setting: "meter provider", Err: err}
	}
	red := c.redact
	topts := []kotel.TracerOpt{
		kotel.TracerProvider(c.tp),
		kotel.TracerPropagator(c.prop),
		// kotel records the record key as messaging.kafka.message.key: apply the
		// same redaction as to idempotency keys.
		kotel.KeyFormatter(func(r *kgo.Record) (string, error) {
			k, ok := red.redact(string(r.Key))
			if !ok {
				return "", errKeyOmitted
			}
			return k, nil
		}),
	}
	if c.group != "" {
		topts = append(topts, kotel.ConsumerGroup(c.group))
	}
	if c.clientID != "" {
		topts = append(topts, kotel.ClientID(c.clientID))
	}
	kt := kotel.NewTracer(topts...)
	km := kotel.NewMeter(kotel.MeterProvider(c.mp))
	t := &Tracer{
		cfg:     c,
		kind:    kindOf(c.tp),
		tracer:  c.tp.Tracer(instrumentationName, trace.WithInstrumentationVersion(buildinfo.Version()), trace.WithSchemaURL(semconv.SchemaURL)),
		metrics: m,
	}
	t.hooks = append(kotel.NewKotel(kotel.WithMeter(km)).Hooks(), fetchGate{t: t, kt: kt}, clientHook{t})
	return t, nil
}

// clientHook marks a Kafka client built with [Tracer.KgoOpt], so that
// [FromClient] finds the Tracer again.
type clientHook struct{ t *Tracer }

// OnNewClient makes clientHook a kgo hook; it does nothing.
func (clientHook) OnNewClient(*kgo.Client) {}

var _ kgo.HookNewClient = clientHook{}

// FromClient returns the Tracer whose [Tracer.KgoOpt] cl was built with (the
// first, if several), or nil. leasehold.Enqueue starts its producer span with
// it, so that a producer client and the worker's own client trace with the
// providers they were built with.
func FromClient(cl *kgo.Client) *Tracer {
	if cl == nil {
		return nil
	}
	for _, v := range cl.OptValues(kgo.WithHooks) {
		// franz-go returns its own slice type of kgo.Hook.
		hs := reflect.ValueOf(v)
		if hs.Kind() != reflect.Slice {
			continue
		}
		for i := range hs.Len() {
			if ch, ok := hs.Index(i).Interface().(clientHook); ok {
				return ch.t
			}
		}
	}
	return nil
}

// OTelProviders returns the tracer provider, meter provider and propagator
// t uses; a Tracer is itself a [Providers].
func (t *Tracer) OTelProviders() (trace.TracerProvider, metric.MeterProvider, propagation.TextMapPropagator) {
	return t.cfg.tp, t.cfg.mp, t.cfg.prop
}

// errKeyOmitted tells kotel's key formatter to leave the key out.
var errKeyOmitted = errors.New("tracing: key omitted")

// KgoOpt returns the franz-go option that installs kotel's tracing and
// metrics hooks. Give it to every producer and consumer client: the producer
// injects the trace context into record headers, the consumer extracts it, and
// [Tracer.StartJob] continues from there.
func (t *Tracer) KgoOpt() kgo.Opt { return kgo.WithHooks(t.hooks...) }

// Metrics returns the worker's metric instruments.
func (t *Tracer) Metrics() *Metrics { return t.metrics }

// Propagator returns the propagator used for record headers.
func (t *Tracer) Propagator() propagation.TextMapPropagator { return t.cfg.prop }

// StartEnqueue starts the span `enqueue <type>` under which a producer
// produces a job record. Produce the record with the returned context (or set
// Record.Context to it) on a client built with [Tracer.KgoOpt]: kotel's
// publish span becomes its child and carries the trace to the consumer. End
// the returned span when the produce call has returned.
func (t *Tracer) StartEnqueue(ctx context.Context, jobType, key string) (context.Context, *Span) {
	attrs := t.jobAttrs(jobType, key)
	ctx, sp := t.tracer.Start(ctx, SpanEnqueue+" "+truncate(jobType, maxNameLen),
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	s := &Span{span: sp, t: t, key: key}
	return context.WithValue(ctx, spanKey{}, s), s
}

// StartJob starts the span `process <topic>` of one attempt at a consumed
// record: a consumer span following the OpenTelemetry messaging conventions
// (messaging.system kafka, messaging.operation.type and .name process,
// messaging.destination.name, messaging.destination.partition.id,
// messaging.kafka.offset, messaging.consumer.group.name, the redacted
// messaging.kafka.message.key), a child of kotel's receive span (whose
// parent is the producer's publish span), with the job type, the redacted
// idempotency key and, later, the fence, attempt and outcome. The returned
// context carries ctx's deadline and values with the job span and the
// record's baggage.
//
// If the consuming client has no kotel hooks, the trace context is read from
// the record's headers with the same carrier kotel uses.
func (t *Tracer) StartJob(ctx context.Context, r *kgo.Record, jobType, key string) (context.Context, *Job) {
	if r.Context == nil || !trace.SpanContextFromContext(r.Context).IsValid() {
		r.Context = t.cfg.prop.Extract(cmp.Or(r.Context, context.Background()), kotel.NewRecordCarrier(r))
	}
	var sp trace.Span
	if t.records() {
		_, sp = t.tracer.Start(r.Context, t.processName(r.Topic), consumerKind,
			trace.WithAttributes(t.startJobAttrs(r, jobType, key)...))
	} else {
		// Nothing records: the job carries the incoming trace context,
		// if any, and no span of its own (see records).
		sp = trace.SpanFromContext(r.Context)
	}
	if sp.SpanContext().IsValid() {
		ctx = trace.ContextWithSpan(ctx, sp)
	}
	if b := baggage.FromContext(r.Context); b.Len() > 0 {
		ctx = baggage.ContextWithBaggage(ctx, b)
	}
	jc := &jobCtx{Context: ctx, j: Job{t: t, span: sp, jobType: jobType, key: key, start: t.cfg.now()}}
	return jc, &jc.j
}

// consumerKind is the span kind option of every job span, built once.
var consumerKind = trace.WithSpanKind(trace.SpanKindConsumer)

// maxProcessNames bounds the cache of job span names (one per topic).
const maxProcessNames = 64

// processName returns the job span name of a record of topic,
// `process <topic>`, from a bounded cache.
func (t *Tracer) processName(topic string) string {
	t.namesMu.Lock()
	defer t.namesMu.Unlock()
	if n, ok := t.names[topic]; ok {
		return n
	}
	n := SpanProcess + " " + truncate(topic, maxNameLen)
	if len(t.names) < maxProcessNames {
		if t.names == nil {
			t.names = make(map[string]string)
		}
		t.names[topic] = n
	}
	return n
}

// jobCtx is the context of a job span: it carries the job (jobFromContext)
// in one allocation with the job.
type jobCtx struct {
	context.Context
	j Job
}

func (c *jobCtx) Value(key any) any {
	if _, ok := key.(jobKey); ok {
		return &c.j
	}
	return c.Context.Value(key)
}

// startJobAttrs are a job span's attributes: the messaging ones (semantic
// conventions 1.43) and the job's (appendJobAttrs). The key is redacted once when
// the record's Kafka key is the idempotency key, as Enqueue writes it.
func (t *Tracer) startJobAttrs(r *kgo.Record, jobType, key string) []attribute.KeyValue {
	// Room for every attribute below.
	attrs := make([]attribute.KeyValue, 0, 13)
	attrs = append(attrs,
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName(SpanProcess),
		semconv.MessagingDestinationName(truncate(r.Topic, maxNameLen)),
		semconv.MessagingDestinationPartitionID(strconv.FormatInt(int64(r.Partition), 10)),
		semconv.MessagingKafkaOffset(int(r.Offset)),
		semconv.MessagingMessageBodySize(len(r.Value)),
	)
	if t.cfg.group != "" {
		attrs = append(attrs, semconv.MessagingConsumerGroupName(t.cfg.group))
	}
	if t.cfg.clientID != "" {
		attrs = append(attrs, semconv.MessagingClientID(t.cfg.clientID))
	}
	red, ok := t.cfg.redact.redact(key)
	if r.Key != nil {
		rk, rok := red, ok
		if string(r.Key) != key {
			rk, rok = t.cfg.redact.redact(string(r.Key))
		}
		if rok {
			attrs = append(attrs, semconv.MessagingKafkaMessageKey(rk))
		}
		if r.Value == nil {
			attrs = append(attrs, semconv.MessagingKafkaMessageTombstone(true))
		}
	}
	attrs = append(attrs, attribute.String(AttrJobType, truncate(jobType, maxNameLen)))
	if ok {
		attrs = append(attrs, attribute.String(AttrIdempotencyKey, red))
	}
	return attrs
}

type (
	jobKey  struct{}
	spanKey struct{}
)

// jobFromContext returns the job whose context (from [Tracer.StartJob] or a
// child span's start) ctx derives from, or nil.
func jobFromContext(ctx context.Context) *Job {
	j, _ := ctx.Value(jobKey{}).(*Job)
	return j
}

// InJob reports whether ctx derives from a job's context (from
// [Tracer.StartJob] or one of its spans): a compensation started there is the
// job span's child.
func InJob(ctx context.Context) bool { return jobFromContext(ctx) != nil }

// spanFromContext returns the leasehold span (claim, handler, commit,
// compensation step, enqueue) most recently started into ctx, or nil.
func spanFromContext(ctx context.Context) *Span {
	s, _ := ctx.Value(spanKey{}).(*Span)
	return s
}

// StartCompensationStep starts the span `compensate <step>` of one
// compensation step run for fence: a child of the job span when ctx derives
// from a job's context (the owner compensating after a lost lease or a
// rejected commit), else a child of whatever span ctx carries (a takeover or
// the recovery sweep compensating another attempt's journal). End it with the
// step's outcome; that also counts it in leasehold.compensations. The
// worker's compensation runner (leasehold.WithCompensation) calls it for
// every step; a runner of your own can from a compensation.ObserverFuncs,
// keeping the returned Span to end it.
func (t *Tracer) StartCompensationStep(ctx context.Context, step string, fence uint64) (context.Context, *Span) {
	if j := jobFromContext(ctx); j != nil && j.t == t {
		return j.StartCompensation(ctx, step, fence)
	}
	step = truncate(step, maxNameLen)
	ctx, sp := t.tracer.Start(ctx, SpanCompensation+" "+step,
		trace.WithAttributes(attribute.String(AttrStep, step), fenceAttr(AttrFence, fence)))
	s := &Span{span: sp, t: t, kind: kindCompensation}
	return context.WithValue(ctx, spanKey{}, s), s
}

// StartAttemptCompensation starts the span `compensate <step>` of one
// compensation step run for the attempt of idempotency key key under fence,
// outside that attempt's process (the recovery sweep, a takeover, an
// operator's retry). Inside a job (ctx from its spans) it is the job's child,
// as [Tracer.StartCompensationStep]. Otherwise, when attempt is valid (the
// lost attempt's span, kept in the key's history), the span belongs to the
// attempt's trace, as its child, and links to it; else it is a root span.
// It carries the key attribute in the form the job spans use.
func (t *Tracer) StartAttemptCompensation(ctx context.Context, step, key string, fence uint64, attempt trace.SpanContext) (context.Context, *Span) {
	if j := jobFromContext(ctx); j != nil && j.t == t {
		return j.StartCompensation(ctx, step, fence)
	}
	step = truncate(step, maxNameLen)
	attrs := []attribute.KeyValue{attribute.String(AttrStep, step), fenceAttr(AttrFence, fence)}
	if k, ok := t.cfg.redact.redact(key); ok {
		attrs = append(attrs, attribute.String(AttrIdempotencyKey, k))
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(attrs...)}
	if attempt.IsValid() {
		// The attempt's span is the parent only where ctx has none of its
		// own (the sweep, an operator's retry); it is always linked.
		if !trace.SpanContextFromContext(ctx).IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, attempt)
		}
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: attempt}))
	}
	ctx, sp := t.tracer.Start(ctx, SpanCompensation+" "+step, opts...)
	s := &Span{span: sp, t: t, kind: kindCompensation, key: key}
	return context.WithValue(ctx, spanKey{}, s), s
}

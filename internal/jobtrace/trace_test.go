package jobtrace_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/jobtrace"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/outcome"
)

// fixture is a Tracer whose spans land in an in-memory exporter and whose
// metrics are read by a manual reader.
type fixture struct {
	tr     *jobtrace.Tracer
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
}

func setup(t *testing.T, opts ...jobtrace.Opt) *fixture {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	tr, err := jobtrace.New(append([]jobtrace.Opt{
		jobtrace.WithTracerProvider(tp), jobtrace.WithMeterProvider(mp), jobtrace.WithPropagator(prop),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{tr: tr, spans: exp, reader: reader}
}

// kafka makes a topic named base plus a random suffix on the tests' Kafka
// (kfake, or Apache Kafka with TEST_KAFKA=apache) and returns a producer and
// a consumer of it built with the tracer's kotel hooks, and the topic.
func kafka(t *testing.T, tr *jobtrace.Tracer, base string) (prod, cons *kgo.Client, topic string) {
	t.Helper()
	k := testkit.StartKafka(t)
	topic = k.Topic(t, base, 1)
	prod = k.Client(t, kgo.DefaultProduceTopic(topic), tr.KgoOpt())
	cons = k.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), tr.KgoOpt())
	return prod, cons, topic
}

func pollOne(t *testing.T, cons *kgo.Client) *kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no record within 15s: %v", err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("fetch: %v", errs)
		}
		if recs := fs.Records(); len(recs) > 0 {
			return recs[0]
		}
	}
}

// spanTree indexes ended spans.
type spanTree struct {
	byID   map[trace.SpanID]tracetest.SpanStub
	byName map[string][]tracetest.SpanStub
}

func tree(stubs tracetest.SpanStubs) spanTree {
	st := spanTree{byID: map[trace.SpanID]tracetest.SpanStub{}, byName: map[string][]tracetest.SpanStub{}}
	for _, s := range stubs {
		st.byID[s.SpanContext.SpanID()] = s
		st.byName[s.Name] = append(st.byName[s.Name], s)
	}
	return st
}

func (st spanTree) one(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	if n := len(st.byName[name]); n != 1 {
		t.Fatalf("%d spans named %q, want 1; spans: %v", n, name, st.names())
	}
	return st.byName[name][0]
}

func (st spanTree) names() []string {
	var out []string
	for n := range st.byName {
		out = append(out, n)
	}
	return out
}

// ancestry returns the names from s up to the root.
func (st spanTree) ancestry(s tracetest.SpanStub) []string {
	out := []string{s.Name}
	for s.Parent.IsValid() {
		p, ok := st.byID[s.Parent.SpanID()]
		if !ok {
			out = append(out, "<missing parent>")
			break
		}
		out = append(out, p.Name)
		s = p
	}
	return out
}

func attrs(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// TestJobTrace runs a job through a real (in-process) Kafka broker: the
// producer's enqueue span, kotel's publish and receive spans, and the job span
// with its claim, handler, compensation and commit children form one trace.
func TestJobTrace(t *testing.T) {
	f := setup(t, jobtrace.WithKeyRedaction(jobtrace.KeyFull), jobtrace.WithConsumerGroup("workers"))
	prod, cons, topic := kafka(t, f.tr, "jobs")
	ctx := context.Background()

	const key, payload = "order-1001", "secret-payload-value"
	member, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(member)
	ectx, enq := f.tr.StartEnqueue(baggage.ContextWithBaggage(ctx, bag), "video.transcode", key)
	rec := &kgo.Record{Key: []byte(key), Value: []byte(payload)}
	if err := prod.ProduceSync(ectx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	enq.End("produced", nil)

	r := pollOne(t, cons)
	jctx, job := f.tr.StartJob(ctx, r, "video.transcode", key)
	if got := baggage.FromContext(jctx).Member("tenant").Value(); got != "acme" {
		t.Errorf("job context baggage tenant = %q, want the producer's acme", got)
	}
	job.SetAttempt(1)
	_, claim := job.StartClaim(jctx)
	claim.SetFence(1_700_000_000_000_123)
	claim.End("acquired", nil)
	job.SetFence(1_700_000_000_000_123)
	hctx, h := job.StartHandler(jctx)
	// A span the user's handler makes is the handler span's child.
	_, inner := trace.SpanFromContext(hctx).TracerProvider().Tracer("user").Start(hctx, "user work")
	inner.End()
	job.Heartbeat()
	lost := fmt.Errorf("renew: %w", lease.ErrStolen)
	job.LeaseLost(lost)
	h.End(jobtrace.OutcomeLeaseLost, lost)
	_, comp := job.StartCompensation(jctx, "refund", 1_700_000_000_000_123)
	comp.End(jobtrace.OutcomeCompensated, nil)
	_, commit := job.StartCommit(jctx)
	commit.End(jobtrace.OutcomeLeaseLost, lost)
	job.End(outcome.LeaseLost, lost)

	st := tree(f.spans.GetSpans())
	jobSpan := st.one(t, "process "+topic)
	want := []string{"process " + topic, topic + " receive", topic + " publish", "enqueue video.transcode"}
	if diff := cmp.Diff(want, st.ancestry(jobSpan)); diff != "" {
		t.Errorf("job span ancestry (-want +got):\n%s", diff)
	}
	for _, name := range []string{"claim", "handler", "compensate refund", "commit"} {
		s := st.one(t, name)
		if diff := cmp.Diff(append([]string{name}, want...), st.ancestry(s)); diff != "" {
			t.Errorf("%s ancestry (-want +got):\n%s", name, diff)
		}
	}
	if diff := cmp.Diff(append([]string{"user work", "handler"}, want...), st.ancestry(st.one(t, "user work"))); diff != "" {
		t.Errorf("user span ancestry (-want +got):\n%s", diff)
	}
	for _, s := range f.spans.GetSpans() {
		if s.SpanContext.TraceID() != jobSpan.SpanContext.TraceID() {
			t.Errorf("span %q is in trace %s, not the job's", s.Name, s.SpanContext.TraceID())
		}
	}

	ja := attrs(jobSpan.Attributes)
	for k, v := range map[string]string{
		"messaging.system":                   "kafka",
		"messaging.destination.name":         topic,
		"messaging.operation.type":           "process",
		"messaging.operation.name":           "process",
		"messaging.consumer.group.name":      "workers",
		"messaging.kafka.message.key":        key,
		"messaging.kafka.offset":             "0",
		"messaging.destination.partition.id": "0",
		"messaging.message.body.size":        strconv.Itoa(len(payload)),
		jobtrace.AttrJobType:                 "video.transcode",
		jobtrace.AttrIdempotencyKey:          key,
		jobtrace.AttrFence:                   "1700000000000123",
		jobtrace.AttrAttempt:                 "1",
		jobtrace.AttrOutcome:                 jobtrace.OutcomeLeaseLost,
		jobtrace.AttrErrorType:               "*leasing.lostError",
	} {
		if ja[k] != v {
			t.Errorf("job span %s = %q, want %q", k, ja[k], v)
		}
	}
	// The attributes of older messaging conventions (kotel's) are gone.
	for _, k := range []string{"messaging.source.name", "messaging.operation", "messaging.kafka.consumer.group",
		"messaging.kafka.message.offset", "messaging.kafka.source.partition", "messaging.source.kind"} {
		if v, ok := ja[k]; ok {
			t.Errorf("job span has the deprecated attribute %s = %q", k, v)
		}
	}
	if jobSpan.InstrumentationScope.SchemaURL != semconv.SchemaURL {
		t.Errorf("job span schema URL %q, want %q", jobSpan.InstrumentationScope.SchemaURL, semconv.SchemaURL)
	}
	if jobSpan.SpanKind != trace.SpanKindConsumer {
		t.Errorf("job span kind %v, want consumer", jobSpan.SpanKind)
	}
	if jobSpan.Status.Code != codes.Error || !strings.Contains(jobSpan.Status.Description, "lease: stolen") {
		t.Errorf("job span status %+v, want error with the cause", jobSpan.Status)
	}
	if got := attrs(st.one(t, "claim").Attributes); got[jobtrace.AttrOutcome] != "acquired" || got[jobtrace.AttrFence] != "1700000000000123" {
		t.Errorf("claim attributes %v", got)
	}
	if got := attrs(st.one(t, "compensate refund").Attributes); got[jobtrace.AttrStep] != "refund" || got[jobtrace.AttrOutcome] != jobtrace.OutcomeCompensated {
		t.Errorf("compensation attributes %v", got)
	}
	var events []string
	for _, e := range jobSpan.Events {
		events = append(events, e.Name)
		if e.Name == jobtrace.EventLeaseLost {
			if got := attrs(e.Attributes)[jobtrace.AttrCause]; got != "stolen" {
				t.Errorf("lease lost cause = %q, want stolen", got)
			}
		}
	}
	if diff := cmp.Diff([]string{jobtrace.EventHeartbeat, jobtrace.EventLeaseLost}, events); diff != "" {
		t.Errorf("job events (-want +got):\n%s", diff)
	}
	assertNoValue(t, f.spans.GetSpans(), payload)
}

// assertNoValue fails if any attribute of any span or event holds s.
func assertNoValue(t *testing.T, spans tracetest.SpanStubs, s string) {
	t.Helper()
	for _, sp := range spans {
		check := func(where string, kvs []attribute.KeyValue) {
			for _, kv := range kvs {
				if strings.Contains(kv.Value.String(), s) {
					t.Errorf("span %q %s attribute %s holds %q", sp.Name, where, kv.Key, s)
				}
			}
		}
		check("", sp.Attributes)
		for _, e := range sp.Events {
			check("event "+e.Name, e.Attributes)
		}
		if strings.Contains(sp.Status.Description, s) {
			t.Errorf("span %q status holds %q", sp.Name, s)
		}
	}
}

// TestStartJobWithoutHooks reads the trace context from the record headers
// when the consuming client has no kotel hooks.
func TestStartJobWithoutHooks(t *testing.T) {
	f := setup(t)
	ctx, parent := sdktrace.NewTracerProvider().Tracer("p").Start(context.Background(), "producer")
	defer parent.End()
	r := &kgo.Record{Topic: "jobs"}
	propagation.TraceContext{}.Inject(ctx, propagationRecordCarrier{r})
	_, job := f.tr.StartJob(context.Background(), r, "t", "k")
	job.End(outcome.Completed, nil)
	s := f.spans.GetSpans()
	if len(s) != 1 {
		t.Fatalf("%d spans", len(s))
	}
	if s[0].Parent.SpanID() != parent.SpanContext().SpanID() || s[0].SpanContext.TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("job span parent %v, want the producer span %v", s[0].Parent, parent.SpanContext())
	}
}

type propagationRecordCarrier struct{ r *kgo.Record }

func (c propagationRecordCarrier) Get(string) string { return "" }
func (c propagationRecordCarrier) Set(k, v string) {
	c.r.Headers = append(c.r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
}
func (c propagationRecordCarrier) Keys() []string { return nil }

func TestJobEvents(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	advance := func(d time.Duration) { now.Add(int64(d)) }
	f := setup(t, jobtrace.WithClock(clock), jobtrace.WithHeartbeatEventInterval(10*time.Second))

	_, job := f.tr.StartJob(context.Background(), &kgo.Record{Topic: "jobs"}, "report", "k1")
	job.Takeover(41)
	for range 5 { // one event, four skipped
		job.Heartbeat()
		advance(time.Second)
	}
	advance(6 * time.Second)
	job.Heartbeat() // 11s after the first: an event counting 4 skipped
	job.DuplicateReplay(outcome.Completed)
	job.DeadLettered("retries_exhausted")
	job.LeaseLost(lease.ErrRenewDeadline)
	job.LeaseLost(errors.New("some other failure"))
	advance(90 * time.Second)
	job.End(outcome.DeadLettered, nil)
	job.End(outcome.Completed, nil) // ignored

	spans := f.spans.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	type ev struct {
		Name  string
		Attrs map[string]string
	}
	var got []ev
	for _, e := range spans[0].Events {
		a := attrs(e.Attributes)
		delete(a, jobtrace.AttrErrorMessage)
		delete(a, jobtrace.AttrErrorType)
		got = append(got, ev{e.Name, a})
	}
	want := []ev{
		{jobtrace.EventTakeover, map[string]string{jobtrace.AttrPreviousFence: "41"}},
		{jobtrace.EventHeartbeat, map[string]string{jobtrace.AttrHeartbeatSkipped: "0"}},
		{jobtrace.EventHeartbeat, map[string]string{jobtrace.AttrHeartbeatSkipped: "4"}},
		{jobtrace.EventDuplicateReplay, map[string]string{jobtrace.AttrOutcome: jobtrace.OutcomeCompleted}},
		{jobtrace.EventDeadLettered, map[string]string{jobtrace.AttrReason: "retries_exhausted"}},
		{jobtrace.EventLeaseLost, map[string]string{jobtrace.AttrCause: "renew_deadline"}},
		{jobtrace.EventLeaseLost, map[string]string{jobtrace.AttrCause: "other"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got := attrs(spans[0].Attributes)[jobtrace.AttrOutcome]; got != jobtrace.OutcomeDeadLettered {
		t.Errorf("outcome %q: a second End must not override the first", got)
	}
	if spans[0].Status.Code == codes.Error {
		t.Errorf("status %v for a nil error", spans[0].Status)
	}
}

func TestLeaseLostCause(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{lease.ErrStolen, "stolen"},
		{fmt.Errorf("x: %w", lease.ErrExpired), "expired"},
		{lease.ErrRenewDeadline, "renew_deadline"},
		{lease.ErrLost, "fenced"},
		{lease.ErrUnavailable, "other"},
		{nil, "other"},
	} {
		if got := jobtrace.LeaseLostCause(tc.err); got != tc.want {
			t.Errorf("LeaseLostCause(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// StartCompensationStep, shaped for compensation.ObserverFuncs: under a job's
// context the step is the job span's child; elsewhere (a sweep compensating
// another attempt's journal) the child of ctx's span.
func TestCompensationStep(t *testing.T) {
	f := setup(t)
	jctx, job := f.tr.StartJob(context.Background(), &kgo.Record{Topic: "jobs"}, "pay", "k")
	if jobtrace.JobFromContext(jctx) != job {
		t.Fatal("JobFromContext does not return the job")
	}
	// The observer gets a context derived from the job's, without its cancellation.
	sctx, _ := f.tr.StartCompensationStep(context.WithoutCancel(jctx), "refund", 9)
	jobtrace.SpanFromContext(sctx).End(jobtrace.OutcomeCompensated, nil)
	job.End(outcome.LeaseLost, nil)

	octx, other := sdktrace.NewTracerProvider().Tracer("sweep").Start(context.Background(), "sweep")
	s2ctx, _ := f.tr.StartCompensationStep(octx, "release", 3)
	jobtrace.SpanFromContext(s2ctx).End("retry", errors.New("provider down"))
	other.End()
	jobtrace.SpanFromContext(context.Background()).End("x", nil) // nil: no effect, no panic

	st := tree(f.spans.GetSpans())
	refund := st.one(t, "compensate refund")
	if refund.Parent.SpanID() != job.Span().SpanContext().SpanID() {
		t.Errorf("compensate refund parent %v, want the job span", refund.Parent.SpanID())
	}
	release := st.one(t, "compensate release")
	if release.Parent.SpanID() != other.SpanContext().SpanID() {
		t.Errorf("compensate release parent %v, want the sweep span", release.Parent.SpanID())
	}
	if got := attrs(release.Attributes); got[jobtrace.AttrStep] != "release" || got[jobtrace.AttrFence] != "3" || got[jobtrace.AttrOutcome] != "retry" {
		t.Errorf("compensate release attributes %v", got)
	}
	got := f.collect(t)
	if got["leasehold.compensations{outcome=compensated}"] != 1 || got["leasehold.compensations{outcome=retry}"] != 1 {
		t.Errorf("compensation counters %v", got)
	}
}

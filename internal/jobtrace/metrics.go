package jobtrace

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/leasehold/leasehold/outcome"
)

// Names of every leasehold metric instrument, as created through a
// MeterProvider. The lease.* instruments are created by package lease from the
// MeterProvider given to lease.Manager; the others by [Metrics].
const (
	MetricLeaseHeld          = "leasehold.lease.held"
	MetricLeaseRenewDuration = "leasehold.lease.renew.duration"
	MetricLeaseLost          = "leasehold.lease.lost"
	MetricLeaseAcquire       = "leasehold.lease.acquire"
	MetricClaims             = "leasehold.claims"
	MetricJobDuration        = "leasehold.job.duration"
	MetricCompensations      = "leasehold.compensations"
	MetricDeadLettered       = "leasehold.dead_lettered"
	MetricCommitLag          = "leasehold.commit.lag"
	MetricLimitHeld          = "leasehold.limit.held"
)

// Metric label (attribute) keys. They are short on purpose: the Prometheus
// exporter turns them into label names used in PromQL.
const (
	LabelOutcome   = "outcome"
	LabelCause     = "cause"
	LabelJobType   = "job_type"
	LabelReason    = "reason"
	LabelTopic     = "topic"
	LabelPartition = "partition"
)

// Kind is the kind of a metric instrument.
type Kind string

// Instrument kinds used by leasehold metrics.
const (
	KindCounter   Kind = "counter"
	KindHistogram Kind = "histogram"
	KindGauge     Kind = "gauge"
)

// MetricInfo describes one leasehold metric.
type MetricInfo struct {
	// Name is the OpenTelemetry instrument name.
	Name string
	// Unit is the UCUM unit ("s", "{claim}").
	Unit string
	// Kind is the instrument kind.
	Kind Kind
	// Labels are the attribute keys recorded with it.
	Labels []string
	// Prometheus is the metric family name on /metrics. A histogram family
	// exposes the series Prometheus+"_bucket", "_sum" and "_count".
	Prometheus string
	// Owner is the package that records it.
	Owner string
	// Description is the instrument's description.
	Description string
}

// Catalog lists every leasehold metric. The Grafana dashboard in deploy/ and
// the README's metrics table are checked against it.
func Catalog() []MetricInfo {
	return []MetricInfo{
		{MetricLeaseHeld, "{lease}", KindGauge, nil, "leasehold_lease_held", "lease",
			"Leases currently held by this process."},
		{MetricLeaseRenewDuration, "s", KindHistogram, []string{LabelOutcome}, "leasehold_lease_renew_duration_seconds", "lease",
			"Latency of one batched lease renewal round trip, by outcome (ok, error; package outcome)."},
		{MetricLeaseLost, "{lease}", KindCounter, []string{LabelCause}, "leasehold_lease_lost_total", "lease",
			"Leases lost, by cause (stolen, expired, renew_deadline, fenced, other)."},
		{MetricLeaseAcquire, "{attempt}", KindCounter, []string{LabelOutcome}, "leasehold_lease_acquire_total", "lease",
			"Lease acquire attempts, by outcome (acquired, held, error)."},
		{MetricClaims, "{claim}", KindCounter, []string{LabelOutcome}, "leasehold_claims_total", "tracing",
			"Idempotency claims, by outcome (acquired, held, duplicate, takeover, mismatch, error)."},
		{MetricJobDuration, "s", KindHistogram, []string{LabelJobType, LabelOutcome}, "leasehold_job_duration_seconds", "tracing",
			"Duration of a job from its claim to its commit or failure, by type and outcome; only records a claim ran."},
		{MetricCompensations, "{step}", KindCounter, []string{LabelOutcome}, "leasehold_compensations_total", "tracing",
			"Compensation steps run, by outcome."},
		{MetricDeadLettered, "{record}", KindCounter, []string{LabelReason}, "leasehold_dead_lettered_total", "tracing",
			"Records sent to the dead-letter topic, by reason."},
		{MetricCommitLag, "{record}", KindGauge, []string{LabelTopic, LabelPartition}, "leasehold_commit_lag", "tracing",
			"Records between the last committed offset and the high watermark, per assigned partition."},
		{MetricLimitHeld, "{record}", KindGauge, nil, "leasehold_limit_held", "tracing",
			"Records this worker holds because their limit group is full, held by a Retry-After, or over its rate."},
	}
}

// PrometheusNames returns every series name the leasehold metrics expose on
// /metrics: counters and gauges by family name, histograms as their _bucket,
// _sum and _count series.
func PrometheusNames() []string {
	var names []string
	for _, m := range Catalog() {
		if m.Kind == KindHistogram {
			names = append(names, m.Prometheus+"_bucket", m.Prometheus+"_sum", m.Prometheus+"_count")
			continue
		}
		names = append(names, m.Prometheus)
	}
	return names
}

// jobDurationBuckets suit jobs from tens of milliseconds to two hours.
var jobDurationBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200}

// maxJobTypes bounds the job_type label's cardinality: job types come from
// record headers, which a producer controls. Types beyond the first
// maxJobTypes seen are recorded as [OtherJobType].
const maxJobTypes = 256

// OtherJobType is the job_type label of job types beyond the first 256 seen.
const OtherJobType = "other"

// Metrics records the worker's metrics. [Tracer.Metrics] returns it; a nil
// *Metrics records nothing.
type Metrics struct {
	claims        metric.Int64Counter
	jobDuration   metric.Float64Histogram
	compensations metric.Int64Counter
	deadLettered  metric.Int64Counter
	commitLag     metric.Int64ObservableGauge
	limitHeld     metric.Int64UpDownCounter
	meter         metric.Meter

	mu    sync.Mutex
	types map[string]attribute.KeyValue
	opts  map[optKey]*seriesOpts // measurement options by series (series)
}

// optKey names one series of a hot-path instrument: its instrument and
// labels.
type optKey struct {
	inst            *metric.Int64Counter // nil for the job duration
	jobType, result string
}

// maxSeriesOpts bounds the cache of measurement options; series beyond it
// build their options on each call.
const maxSeriesOpts = 1024

// seriesOpts are the measurement options of one series, built once: an
// attribute set built per measurement was most of a claim's or a job's
// metric cost.
type seriesOpts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// series returns k's options, from the cache or built from k.
func (m *Metrics) series(k optKey) *seriesOpts {
	m.mu.Lock()
	o, ok := m.opts[k]
	m.mu.Unlock()
	if ok {
		return o
	}
	attrs := []attribute.KeyValue{attribute.String(LabelOutcome, k.result)}
	if k.inst == nil {
		attrs = append(attrs, m.jobType(k.jobType))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(attrs...))
	o = &seriesOpts{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
	m.mu.Lock()
	if len(m.opts) < maxSeriesOpts {
		m.opts[k] = o
	}
	m.mu.Unlock()
	return o
}

// newMetrics creates the worker's instruments on mp's meter named
// "github.com/leasehold/leasehold".
//
//nolint:contextcheck // the zero series are set once at construction, under no caller's request
func newMetrics(mp metric.MeterProvider) (*Metrics, error) {
	m := &Metrics{meter: mp.Meter(instrumentationName), types: make(map[string]attribute.KeyValue),
		opts: make(map[optKey]*seriesOpts)}
	info := make(map[string]MetricInfo)
	for _, c := range Catalog() {
		info[c.Name] = c
	}
	var err error
	if m.claims, err = m.meter.Int64Counter(MetricClaims,
		metric.WithUnit(info[MetricClaims].Unit), metric.WithDescription(info[MetricClaims].Description)); err != nil {
		return nil, err
	}
	if m.jobDuration, err = m.meter.Float64Histogram(MetricJobDuration,
		metric.WithUnit(info[MetricJobDuration].Unit), metric.WithDescription(info[MetricJobDuration].Description),
		metric.WithExplicitBucketBoundaries(jobDurationBuckets...)); err != nil {
		return nil, err
	}
	if m.compensations, err = m.meter.Int64Counter(MetricCompensations,
		metric.WithUnit(info[MetricCompensations].Unit), metric.WithDescription(info[MetricCompensations].Description)); err != nil {
		return nil, err
	}
	if m.deadLettered, err = m.meter.Int64Counter(MetricDeadLettered,
		metric.WithUnit(info[MetricDeadLettered].Unit), metric.WithDescription(info[MetricDeadLettered].Description)); err != nil {
		return nil, err
	}
	if m.commitLag, err = m.meter.Int64ObservableGauge(MetricCommitLag,
		metric.WithUnit(info[MetricCommitLag].Unit), metric.WithDescription(info[MetricCommitLag].Description)); err != nil {
		return nil, err
	}
	if m.limitHeld, err = m.meter.Int64UpDownCounter(MetricLimitHeld,
		metric.WithUnit(info[MetricLimitHeld].Unit), metric.WithDescription(info[MetricLimitHeld].Description)); err != nil {
		return nil, err
	}
	ctx := context.Background()
	m.limitHeld.Add(ctx, 0) // served from the start
	// Every claim and compensation outcome at 0, so that a scrape right
	// after start shows every series and rate() sees the first one.
	for _, o := range outcome.Claims() {
		m.claims.Add(ctx, 0, metric.WithAttributes(attribute.String(LabelOutcome, string(o))))
	}
	for _, o := range outcome.CompensationSteps() {
		m.compensations.Add(ctx, 0, metric.WithAttributes(attribute.String(LabelOutcome, string(o))))
	}
	return m, nil
}

// ZeroDeadLettered records leasehold.dead_lettered at 0 for each reason, so
// that its series exist before the first record is dead-lettered. The worker
// calls it at start with every reason it uses.
//
//nolint:contextcheck // the zero series are set once at start, under no caller's request
func (m *Metrics) ZeroDeadLettered(reasons ...string) {
	if m == nil {
		return
	}
	for _, r := range reasons {
		m.deadLettered.Add(context.Background(), 0, metric.WithAttributes(attribute.String(LabelReason, truncate(r, maxNameLen))))
	}
}

// Claim counts one idempotency claim with its outcome.
func (m *Metrics) Claim(ctx context.Context, o outcome.Name) {
	if m == nil {
		return
	}
	m.claims.Add(ctx, 1, m.series(optKey{inst: &m.claims, result: string(o)}).add...)
}

// JobDone records a finished job's duration by type and outcome.
func (m *Metrics) JobDone(ctx context.Context, jobType string, o outcome.Name, d time.Duration) {
	if m == nil {
		return
	}
	m.jobDuration.Record(ctx, d.Seconds(), m.series(optKey{jobType: jobType, result: string(o)}).rec...)
}

// Compensation counts one compensation step with its outcome.
func (m *Metrics) Compensation(ctx context.Context, o outcome.Name) {
	if m == nil {
		return
	}
	m.compensations.Add(ctx, 1, m.series(optKey{inst: &m.compensations, result: string(o)}).add...)
}

// DeadLettered counts one record sent to the dead-letter topic.
func (m *Metrics) DeadLettered(ctx context.Context, reason string) {
	if m == nil {
		return
	}
	m.deadLettered.Add(ctx, 1, metric.WithAttributes(attribute.String(LabelReason, reason)))
}

// PartitionLag is the commit lag of one partition.
type PartitionLag struct {
	Topic     string
	Partition int32
	// Lag is the high watermark minus the committed offset, in records.
	Lag int64
}

// ObserveCommitLag registers f, called at every metrics collection, to report
// the commit lag of the partitions assigned at that moment. Partitions that f
// no longer reports disappear from /metrics. Unregister the returned
// registration when the consumer stops.
func (m *Metrics) ObserveCommitLag(f func() []PartitionLag) (metric.Registration, error) {
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, p := range f() {
			o.ObserveInt64(m.commitLag, p.Lag, metric.WithAttributes(
				attribute.String(LabelTopic, p.Topic),
				attribute.String(LabelPartition, strconv.FormatInt(int64(p.Partition), 10)),
			))
		}
		return nil
	}, m.commitLag)
}

func (m *Metrics) jobType(t string) attribute.KeyValue {
	m.mu.Lock()
	defer m.mu.Unlock()
	if kv, ok := m.types[t]; ok {
		return kv
	}
	if len(m.types) >= maxJobTypes {
		return attribute.String(LabelJobType, OtherJobType)
	}
	kv := attribute.String(LabelJobType, truncate(t, maxNameLen))
	m.types[t] = kv
	return kv
}

package leasehold

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/tracing"
)

// Defaults of the worker options.
const (
	DefaultGroup           = "leasehold"
	DefaultTopic           = "leasehold.jobs"
	DefaultConcurrency     = 16
	DefaultLeaseTTL        = 15 * time.Second
	DefaultRetention       = 24 * time.Hour
	DefaultCommitInterval  = time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultMaxPayload      = 1 << 20
	DefaultMaxAttempts     = 10
	DefaultBackoffMin      = time.Second
	DefaultBackoffMax      = time.Minute
)

// Opt configures a [Worker]. Each option's doc states its default. For the
// options that take a number or a duration, 0 means the default and [New]
// refuses a negative value, with an error naming the option.
type Opt interface{ apply(*config) }

type optFunc func(*config)

func (f optFunc) apply(c *config) { f(c) }

type config struct {
	noFleet         bool // WithFleet(false)
	group           string
	topics          []string
	kafkaOpts       []kgo.Opt
	concurrency     int
	ordered         bool
	dlqTopic        string
	commitInterval  time.Duration
	shutdownTimeout time.Duration
	logger          *slog.Logger
	kafkaLogLevel   slog.Leveler
	groupProtocol   GroupProtocol  // WithGroupProtocol (groupprotocol.go)
	shareGroup      string         // WithShareGroup (share.go)
	typeLimits      map[string]int // WithTypeLimit (limits.go)
	middleware      []Middleware
	hooks           []Hooks
	leaseTTL        time.Duration
	retention       time.Duration
	hbThrottle      time.Duration
	maxPayload      int
	budgetBytes     int64 // WithMemoryBudget (budget.go)
	budgetRecords   int
	heldMin         time.Duration
	heldMax         time.Duration
	probeMin        time.Duration
	probeMax        time.Duration
	jobDefaults     []JobOpt
	keyPrefix       string
	leaseOpts       []lease.Opt
	idemOpts        []idempotency.Opt
	compReg         *compensation.Registry
	compOpts        []compensation.Opt
	tracer          *tracing.Tracer
	tp              trace.TracerProvider                     // WithTracerProvider; resolved by New
	mp              metric.MeterProvider                     // WithMeterProvider; resolved by New
	prop            propagation.TextMapPropagator            // WithPropagator; resolved by New
	commit          func(context.Context, *kgo.Client) error // nil: commitMarked commits
}

// commitMarked commits the offsets marked on cl: cl.CommitMarkedOffsets,
// unless another commit function was injected (the tests' crash drops the
// commits, as a process that dies would).
func (c *config) commitMarked(ctx context.Context, cl *kgo.Client) error {
	if c.commit != nil {
		return c.commit(ctx, cl)
	}
	return cl.CommitMarkedOffsets(ctx)
}

// WithGroup sets the Kafka consumer group. Default "leasehold".
func WithGroup(group string) Opt { return optFunc(func(c *config) { c.group = group }) }

// WithTopics sets the topics to consume. Default "leasehold.jobs".
func WithTopics(topics ...string) Opt {
	return optFunc(func(c *config) { c.topics = append([]string(nil), topics...) })
}

// WithKafka adds franz-go client options: seed brokers, TLS, SASL, kotel
// hooks, logger. The worker adds the consumer-group options itself
// (cooperative-sticky balancing, marked autocommits, revoke and lost
// callbacks): [New] refuses a kgo.ConsumerGroup, kgo.ConsumeTopics,
// kgo.ConsumeRegex, kgo.Balancers, kgo.ConsumeResetOffset,
// kgo.AutoCommitInterval, kgo.DisableAutoCommit or kgo.OnPartitions* here
// that differs from the worker's own with [ErrConflictingOptions] (set the
// group, topics and commit interval with [WithGroup], [WithTopics] and
// [WithCommitInterval]); an option given at franz-go's default value cannot be
// told from one not given, and is ignored. The
// group's session timeout and heartbeat interval, unless given here
// (kgo.SessionTimeout, kgo.HeartbeatInterval), follow the lease TTL (see
// [SessionTimeoutFor], [HeartbeatIntervalFor]), so that a killed or stalled
// worker's jobs are taken over when their leases lapse; a session timeout
// given here that is longer than the lease TTL is logged as a warning at
// start, as takeover then waits for it. Default:
// kgo.SeedBrokers("127.0.0.1:9092").
func WithKafka(opts ...kgo.Opt) Opt {
	return optFunc(func(c *config) { c.kafkaOpts = append(c.kafkaOpts, opts...) })
}

// WithConcurrency bounds how many handlers run at once. Default 16. A job
// whose handler returned gives its slot to the next record while its outcome
// is written (the fenced commit rides the next batch call), in one of as
// many commit slots: at most twice n jobs are in hand at once.
func WithConcurrency(n int) Opt { return optFunc(func(c *config) { c.concurrency = n }) }

// WithOrderedKeys runs records that share a Kafka record key one after
// another, in offset order, instead of concurrently. Default false.
func WithOrderedKeys(on bool) Opt { return optFunc(func(c *config) { c.ordered = on }) }

// WithDeadLetterTopic sets the topic that poison records are written to,
// with headers naming the reason, the error and the original
// topic/partition/offset. Default: the first consumed topic + ".dlq".
func WithDeadLetterTopic(topic string) Opt {
	return optFunc(func(c *config) { c.dlqTopic = topic })
}

// WithCommitInterval sets how often finished offsets are committed. Default 1s.
func WithCommitInterval(d time.Duration) Opt {
	return optFunc(func(c *config) { c.commitInterval = d })
}

// WithShutdownTimeout bounds how long a shutdown waits for running jobs
// before cancelling them with [ErrShutdown], when the shutdown context has no
// earlier deadline. Default 30s.
func WithShutdownTimeout(d time.Duration) Opt {
	return optFunc(func(c *config) { c.shutdownTimeout = d })
}

// WithLogger sets the logger. The worker's lines logged under a job carry
// the job span's trace_id and span_id (with [WithTracing]); handlers log
// through [Job.Logger] to get them too. Default: slog.Default() at [New].
func WithLogger(l *slog.Logger) Opt { return optFunc(func(c *config) { c.logger = l }) }

// WithKafkaLogLevel sets the lowest level of franz-go's own lines (metadata
// updates, group joins, syncs and heartbeats) that reach the worker's logger:
// slog.LevelInfo shows the group's lifecycle, slog.LevelDebug every request.
// The worker's own lines (partitions assigned and revoked, dead letters, lost
// leases) keep their levels. A kgo.WithLogger given to [WithKafka] replaces
// this. Default slog.LevelWarn.
func WithKafkaLogLevel(l slog.Leveler) Opt {
	return optFunc(func(c *config) { c.kafkaLogLevel = l })
}

// WithMiddleware wraps every handler; the first middleware given is the
// outermost. Default none.
func WithMiddleware(mw ...Middleware) Opt {
	return optFunc(func(c *config) { c.middleware = append(c.middleware, mw...) })
}

// WithHooks adds a set of hooks; may be given several times. Default none.
func WithHooks(h Hooks) Opt { return optFunc(func(c *config) { c.hooks = append(c.hooks, h) }) }

// WithLeaseTTL sets the lease TTL: a crashed or stalled worker's jobs run
// again on a live worker about this long after its last renewal (within TTL
// plus the renew interval after it stopped), as the Kafka session timeout
// follows it unless set with [WithKafka] (see [SessionTimeoutFor]). Leases
// are renewed every TTL/3 (the renew interval, for every lease the worker
// holds, whatever its job type's [WithJobLeaseTTL]). This is the one place
// of the lease TTL: a different lease.WithTTL in [WithLeaseOptions] makes
// [New] fail with [ErrConflictingOptions]. Default 15s.
func WithLeaseTTL(d time.Duration) Opt { return optFunc(func(c *config) { c.leaseTTL = d }) }

// WithRetention sets how long completed and failed records are kept to
// answer duplicates. Default 24h. Changing it between restarts is safe:
// records written under an earlier retention still answer duplicates for as
// long as they live (see package idempotency's layouts). This is the one
// place of the retention: a different idempotency.WithRetention in
// [WithIdempotencyOptions] makes [New] fail with [ErrConflictingOptions].
func WithRetention(d time.Duration) Opt { return optFunc(func(c *config) { c.retention = d }) }

// WithHeartbeatThrottle sets the minimum interval between stored heartbeat
// details of one job. Default: the worker's lease TTL / 3 ([WithLeaseTTL]),
// the lease renew interval: a job's first details are stored at once and
// later ones with the lease renewals, in batches (one script call a round
// for all the worker's jobs), so that a crash loses at most one renew
// interval of progress; no job holds a timer of its own. A throttle shorter
// than the renew interval stores every throttled heartbeat at once, one
// script call each, holding a job's details back on a timer of the job's own
// until the throttle interval has passed; a longer one holds them back until
// the first renew round after the throttle interval has passed, which stores
// them in its batch (no timer of the job's own either).
func WithHeartbeatThrottle(d time.Duration) Opt {
	return optFunc(func(c *config) { c.hbThrottle = d })
}

// WithMaxPayload bounds the record value size; larger records are
// dead-lettered. The worker's Kafka client takes records of n bytes plus
// 64 KiB for the key and headers (kgo.ProducerBatchMaxBytes, at least franz-go's
// default of 1,000,012), so that the dead-letter copy of any record the
// worker accepted fits; a kgo.ProducerBatchMaxBytes given with [WithKafka]
// wins. A copy the dead-letter topic refuses as too large (its
// max.message.bytes, or the broker's message.max.bytes, is lower) is replaced
// by a small stand-in (see [HeaderDLQTruncated]). Default 1 MiB.
func WithMaxPayload(n int) Opt { return optFunc(func(c *config) { c.maxPayload = n }) }

// dlqOverhead is the room the worker's producer limit leaves above the
// payload bound ([WithMaxPayload]) for a dead-letter copy's key and headers
// (the original's, and the dlq-* headers).
const dlqOverhead = 64 << 10

// defaultProducerBatchMax is franz-go's default kgo.ProducerBatchMaxBytes.
const defaultProducerBatchMax = 1_000_012

// producerBatchMax is the producer batch limit for a payload bound of
// maxPayload: room for the payload and dlqOverhead, never below
// franz-go's default, never above what franz-go accepts (1 GiB).
func producerBatchMax(maxPayload int) int32 {
	return int32(min(max(int64(maxPayload)+dlqOverhead, defaultProducerBatchMax), 1<<30)) //nolint:gosec // bounded to [1,000,012, 1 GiB]
}

// WithHeldBackoff sets the backoff bounds for re-claiming a key another worker
// holds. A retry never waits much longer than the holder's lease has left
// (as Redis reports it), so a key of a job type with a shorter lease TTL is
// retried when that lease would run out. Default 100ms up to the worker's
// lease TTL ([WithLeaseTTL]), also for job types with a longer
// [WithJobLeaseTTL]: a held key is looked at again at least that often, to
// see it completed soon after its holder finishes.
func WithHeldBackoff(min, max time.Duration) Opt {
	return optFunc(func(c *config) { c.heldMin, c.heldMax = min, max })
}

// WithRedisProbe sets the backoff bounds for probing Redis while fetching is
// paused because Redis is unreachable. Default 100ms up to 2s.
func WithRedisProbe(min, max time.Duration) Opt {
	return optFunc(func(c *config) { c.probeMin, c.probeMax = min, max })
}

// WithKeyPrefix sets the prefix of every Redis key the worker writes: the
// lease manager's, the idempotency store's and the compensation runner's.
// This is the one place of the prefix: a different lease.WithPrefix,
// idempotency.WithPrefix or compensation.WithPrefix given through
// [WithLeaseOptions], [WithIdempotencyOptions] or [WithCompensation] makes
// [New] fail with [ErrConflictingOptions]. Default "lh:".
func WithKeyPrefix(p string) Opt { return optFunc(func(c *config) { c.keyPrefix = p }) }

// WithJobDefaults sets job options that apply to every job type before the
// type's own options. Default none.
func WithJobDefaults(opts ...JobOpt) Opt {
	return optFunc(func(c *config) { c.jobDefaults = append(c.jobDefaults, opts...) })
}

// WithLeaseOptions passes options to the lease manager the worker builds
// (drift, renew interval, renew batching). Its TTL, prefix, logger and
// providers come from the worker's own options ([WithLeaseTTL],
// [WithKeyPrefix], [WithLogger], [WithTracerProvider], [WithMeterProvider]);
// a lease.WithTTL, lease.WithPrefix, lease.WithTracerProvider or
// lease.WithMeterProvider here that differs from the worker's setting makes
// [New] fail with [ErrConflictingOptions] (one given only here is taken as
// the worker's). Default none.
func WithLeaseOptions(opts ...lease.Opt) Opt {
	return optFunc(func(c *config) { c.leaseOpts = append(c.leaseOpts, opts...) })
}

// WithIdempotencyOptions passes options to the idempotency store the worker
// builds (fingerprinter, result and details limits, shards, eviction
// policy). Prefix, retention and logger come from the worker's own options
// ([WithKeyPrefix], [WithRetention], [WithLogger]); an
// idempotency.WithPrefix or idempotency.WithRetention here that differs from
// the worker's setting makes [New] fail with [ErrConflictingOptions] (one
// given only here is taken as the worker's). Default none.
func WithIdempotencyOptions(opts ...idempotency.Opt) Opt {
	return optFunc(func(c *config) { c.idemOpts = append(c.idemOpts, opts...) })
}

// WithCompensation turns saga steps on: [Job.Step] journals each step's
// intent with its compensation handler (registered by name in reg, in every
// process), and the worker compensates an attempt's journal, in reverse
// order, when the attempt's lease is lost, its fenced commit is rejected or
// its handler fails (retryable or terminal: an attempt is all or nothing); a
// takeover compensates the journals of older fences before running the job
// again, and a periodic sweep recovers journals whose compensating process
// died. opts go to compensation.NewRunner (prefix and logger default to the
// worker's; the sweep's compensation.WithCommitted defaults to a check of the
// idempotency record, which settles journals sealed by owners that died
// around their commit). Default: off; Job.Step returns [ErrNoCompensation].
func WithCompensation(reg *compensation.Registry, opts ...compensation.Opt) Opt {
	return optFunc(func(c *config) { c.compReg, c.compOpts = reg, append(c.compOpts, opts...) })
}

// WithTracerProvider sets the OpenTelemetry tracer provider of everything
// the worker builds: the job spans (`process <topic>` with claim, handler and
// commit children), kotel's spans on the worker's Kafka client, the lease
// manager's spans, the compensation steps' spans, and the producer spans of
// [Enqueue] on [Worker.Client]. Give the host's provider here once; the
// worker does not touch the OpenTelemetry globals. A different provider
// given to a layer ([WithTracing]'s Tracer, lease.WithTracerProvider in
// [WithLeaseOptions]) makes [New] fail with [ErrConflictingOptions].
// Default: otel.GetTracerProvider(), the OpenTelemetry global, the default
// of every leasehold layer (docs/telemetry.md).
func WithTracerProvider(tp trace.TracerProvider) Opt {
	return optFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets the OpenTelemetry meter provider of everything the
// worker builds: the worker's metrics (claims, job durations, dead letters,
// compensations, commit lag), kotel's Kafka client metrics and the lease
// manager's lease metrics. Conflicts as for [WithTracerProvider]. Default:
// otel.GetMeterProvider(), the OpenTelemetry global.
func WithMeterProvider(mp metric.MeterProvider) Opt {
	return optFunc(func(c *config) { c.mp = mp })
}

// WithPropagator sets the propagator that carries the trace context in
// record headers, from [Enqueue] on [Worker.Client] to the job spans.
// Conflicts as for [WithTracerProvider]. Default:
// otel.GetTextMapPropagator(), the OpenTelemetry global.
func WithPropagator(p propagation.TextMapPropagator) Opt {
	return optFunc(func(c *config) { c.prop = p })
}

// WithTracing traces and measures the worker with t (see package tracing),
// for the settings only a Tracer has (key redaction, heartbeat event
// interval); the worker's other layers take t's providers. kotel hooks on the
// Kafka client carry the producer's trace into a span `process <topic>` per
// attempt (the job type is an attribute), with children for each claim, the
// handler and the fenced commit, and events for heartbeats, a lost lease, a
// takeover, a duplicate replay and dead-lettering; claims, job durations,
// dead letters and compensations are counted in t's metrics. Providers given
// with [WithTracerProvider], [WithMeterProvider] or [WithPropagator] must be
// t's own, or [New] fails with [ErrConflictingOptions]. Default: a Tracer
// over those three options' providers (the OpenTelemetry globals unless
// given).
func WithTracing(t *tracing.Tracer) Opt { return optFunc(func(c *config) { c.tracer = t }) }

// JobOpt configures one job type in [Worker.Register]. Each option's doc
// states its default. [Worker.Register] refuses a negative duration: in
// [WithBackoff] or [WithTimeout] with an error naming the option, in
// [WithJobLeaseTTL] with [ErrInvalidLeaseTTL].
type JobOpt interface{ applyJob(*jobConfig) }

type jobOptFunc func(*jobConfig)

func (f jobOptFunc) applyJob(c *jobConfig) { f(c) }

type jobConfig struct {
	maxAttempts int
	backoffMin  time.Duration
	backoffMax  time.Duration
	timeout     time.Duration
	leaseTTL    time.Duration
	retryable   func(error) bool
	middleware  []Middleware
	limits      limitConfig // limits.go
}

// WithMaxAttempts bounds the runs of one key; after the last failed attempt
// the failure is recorded and the record dead-lettered. Default 10.
func WithMaxAttempts(n int) JobOpt { return jobOptFunc(func(c *jobConfig) { c.maxAttempts = n }) }

// WithBackoff sets the backoff between attempts: a step that doubles from
// min with each attempt up to max, each delay drawn between half the step and
// the whole step. Default 1s up to 1m.
func WithBackoff(min, max time.Duration) JobOpt {
	return jobOptFunc(func(c *jobConfig) { c.backoffMin, c.backoffMax = min, max })
}

// WithTimeout bounds one run of the handler; a run that times out counts as
// a retryable failure. Default none.
func WithTimeout(d time.Duration) JobOpt { return jobOptFunc(func(c *jobConfig) { c.timeout = d }) }

// WithJobLeaseTTL sets the lease TTL of this job type's jobs: how long a
// job's lease lives in Redis without a renewal, so how soon a job whose
// worker crashed or stalled is taken over by another. A long job type may
// want a longer TTL (a renewal that comes late costs it nothing), a short
// one a shorter TTL (taken over sooner). The worker renews every lease each
// renew interval (its own lease TTL / 3, see [WithLeaseTTL]), so d must be
// longer than the renew interval plus the drift margin (d/100 + 2ms unless
// set with lease.WithDrift); [Worker.Register] refuses a shorter d with
// [ErrInvalidLeaseTTL]. A shorter d also shortens the Kafka session timeout
// the worker derives ([SessionTimeoutFor]), so that its jobs too are taken
// over at its lease's pace. Default: the worker's lease TTL ([WithLeaseTTL]).
func WithJobLeaseTTL(d time.Duration) JobOpt {
	return jobOptFunc(func(c *jobConfig) { c.leaseTTL = d })
}

// WithRetryClassifier sets the classifier of a handler's errors: an error
// for which retryable returns false is terminal (recorded as failed, not
// retried). Errors wrapping [ErrPermanent] are always terminal. Default:
// every other error is retryable.
func WithRetryClassifier(retryable func(err error) bool) JobOpt {
	return jobOptFunc(func(c *jobConfig) { c.retryable = retryable })
}

// WithRetryable sets the classifier of a handler's errors.
//
// Deprecated: use [WithRetryClassifier]; the name read like a boolean.
// WithRetryable will be removed in the next release.
func WithRetryable(f func(error) bool) JobOpt { return WithRetryClassifier(f) }

// WithJobMiddleware wraps this job type's handler inside the worker-wide
// middleware. Default none.
func WithJobMiddleware(mw ...Middleware) JobOpt {
	return jobOptFunc(func(c *jobConfig) { c.middleware = append(c.middleware, mw...) })
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/internal/httpserve"
	"github.com/leasehold/leasehold/tracing"
)

// DefaultFetchMaxWait is `worker run`'s default longest wait of a Kafka
// fetch for new records: franz-go's own default (fetch.max.wait.ms=5000).
const DefaultFetchMaxWait = 5 * time.Second

// DefaultSweepInterval is `worker run`'s default interval of the
// compensation recovery sweep: package compensation's own default.
const DefaultSweepInterval = 30 * time.Second

// DefaultJournalRetention is `worker run`'s default retention of a finished
// job's saga journal: package compensation's own default.
const DefaultJournalRetention = 24 * time.Hour

// DefaultOpenJournalRetention is how long `worker run` keeps an unfinished
// saga journal after its last write: package compensation's own default.
const DefaultOpenJournalRetention = 7 * 24 * time.Hour

// runConfig is what `worker run` reads from flags and environment.
type runConfig struct {
	brokers, topics, group, redisURL, dlq, httpAddr, prefix string
	dialMap                                                 string
	concurrency, shards                                     int
	memoryBudgetMiB, maxHeldRecords                         int
	leaseTTL, retention, shutdown                           time.Duration
	sessionTimeout, rebalanceTimeout, heartbeatInterval     time.Duration
	fetchMaxWait, sweepInterval, journalRetention           time.Duration
	logLevel, logFormat, kafkaLogLevel                      string
	groupProtocol, shareGroup                               string
	typeLimits                                              string // TYPE=N,... (limits.go)
	embedded                                                string
	embeddedKafka                                           bool
	maxmemoryPolicy                                         *string // policy.go
}

func cmdRun(ctx context.Context, e *Env, args []string) error {
	f := newFlags(e, "run", "")
	var c runConfig
	f.stringVar(&c.brokers, "brokers", "LEASEHOLD_BROKERS", "", "Kafka seed brokers, host:port comma-separated; required unless --embedded-kafka")
	f.boolVar(&c.embeddedKafka, "embedded-kafka", "LEASEHOLD_EMBEDDED_KAFKA", false, "instead of --brokers, start an in-memory Kafka (kfake) with the topics and the dead-letter topic, for development: it keeps nothing when the worker stops")
	f.stringVar(&c.embedded, "embedded-listen", "", "127.0.0.1:0", "address of the in-memory Kafka of --embedded-kafka; port 0 picks a free one")
	f.stringVar(&c.dialMap, "kafka-dial-map", "LEASEHOLD_KAFKA_DIAL_MAP", "", "connect to other addresses than the brokers advertise: advertised=dial pairs, comma-separated (host:port each), for a port-forward or a proxy in front of each broker; unlisted addresses are dialed as advertised")
	f.stringVar(&c.topics, "topics", "LEASEHOLD_TOPICS", leasehold.DefaultTopic, "topics to consume, comma-separated; they and the dead-letter topic must exist")
	f.stringVar(&c.group, "group", "LEASEHOLD_GROUP", leasehold.DefaultGroup, "consumer group; must not be empty")
	f.stringVar(&c.redisURL, "redis", "REDIS_URL", DefaultRedisURL, "Redis URL: redis://, rediss://, redis+cluster://, redis+sentinel:// with user:password@ for ACL")
	f.stringVar(&c.dlq, "dlq", "LEASEHOLD_DLQ", "", "dead-letter topic (default: first topic + .dlq)")
	f.stringVar(&c.httpAddr, "http", "LEASEHOLD_HTTP", "", "HTTP listen address for /healthz, /readyz and /metrics; empty disables")
	f.stringVar(&c.prefix, "prefix", "LEASEHOLD_PREFIX", "lh:", "Redis key prefix; must not be empty")
	f.intVar(&c.concurrency, "concurrency", "LEASEHOLD_CONCURRENCY", leasehold.DefaultConcurrency, "handlers running at once")
	f.intVar(&c.memoryBudgetMiB, "memory-budget", "LEASEHOLD_MEMORY_BUDGET", leasehold.DefaultMemoryBudget>>20, "MiB of records (keys, values, headers) the worker may hold: running, parked, queued behind an ordering key; fetching pauses at it")
	f.intVar(&c.maxHeldRecords, "max-held-records", "LEASEHOLD_MAX_HELD_RECORDS", leasehold.DefaultMaxHeldRecords, "records the worker may hold (running, parked, queued); fetching pauses at it")
	f.durationVar(&c.leaseTTL, "lease-ttl", "LEASEHOLD_LEASE_TTL", leasehold.DefaultLeaseTTL, "lease TTL; renewed every TTL/3")
	f.durationVar(&c.retention, "retention", "LEASEHOLD_RETENTION", leasehold.DefaultRetention, "how long finished keys answer duplicates")
	f.intVar(&c.shards, "shards", "LEASEHOLD_SHARDS", 0, "hash-tag shards the idempotency records are spread over; 0: the count the live records were written with, else 4096; fewer make larger record buckets, each freed in one step when it expires (set Redis's lazyfree-lazy-expire yes); a count other than the live records' is refused while they live")
	f.durationVar(&c.shutdown, "shutdown-timeout", "LEASEHOLD_SHUTDOWN_TIMEOUT", leasehold.DefaultShutdownTimeout, "how long running jobs may finish after SIGTERM or SIGINT, more than 0")
	f.durationVar(&c.sessionTimeout, "session-timeout", "LEASEHOLD_SESSION_TIMEOUT", 0, "Kafka group session timeout: how long a dead member keeps its partitions; 0 derives it from the lease TTL (half of it, 6s to 45s: 7.5s for 15s), so that a killed or stalled worker's jobs run again when their leases lapse; a longer one than the lease TTL makes takeover wait for it (warned at start)")
	f.durationVar(&c.rebalanceTimeout, "rebalance-timeout", "LEASEHOLD_REBALANCE_TIMEOUT", 60*time.Second, "Kafka group rebalance timeout: how long a rebalance waits for members to rejoin")
	f.durationVar(&c.heartbeatInterval, "heartbeat-interval", "LEASEHOLD_HEARTBEAT_INTERVAL", 0, "Kafka group heartbeat interval: how soon a member learns of a rebalance; below the session timeout; 0 derives it: a third of the session timeout, at most 3s")
	f.stringVar(&c.groupProtocol, "group-protocol", "LEASEHOLD_GROUP_PROTOCOL", string(leasehold.GroupProtocolClassic), "Kafka consumer group protocol: classic (client-side cooperative-sticky balancing, any Kafka since 2.4) or consumer (KIP-848, server-side assignment; Kafka 4.0+, 4.3+ advised; the worker sets the group's consumer.session.timeout.ms and consumer.heartbeat.interval.ms from --session-timeout and --heartbeat-interval, which the brokers' group.consumer.min.* settings must allow)")
	f.stringVar(&c.shareGroup, "share-group", "LEASEHOLD_SHARE_GROUP", "", "consume through this Kafka share group (KIP-932, Kafka 4.2+) instead of the consumer group: any number of workers per partition; the worker sets the group's share.record.lock.duration.ms to the lease TTL plus a third, which the brokers' group.share.min/max.record.lock.duration.ms must allow; empty: consumer-group mode")
	f.stringVar(&c.typeLimits, "type-limit", "LEASEHOLD_TYPE_LIMITS", "", "fleet-wide concurrency limits by job type, TYPE=N pairs comma-separated (at most N jobs of TYPE run at once across every worker with the same Redis and prefix; give every worker the same); a type registered with limits of its own keeps them")
	f.durationVar(&c.fetchMaxWait, "fetch-max-wait", "LEASEHOLD_FETCH_MAX_WAIT", DefaultFetchMaxWait, "longest wait of a Kafka fetch for new records; a partition assigned while a fetch waits is fetched after it")
	f.durationVar(&c.sweepInterval, "sweep-interval", "LEASEHOLD_SWEEP_INTERVAL", DefaultSweepInterval, "how often the compensation recovery sweep looks for journals no process is compensating, e.g. one whose compensation failed while Redis was down")
	f.durationVar(&c.journalRetention, "journal-retention", "LEASEHOLD_JOURNAL_RETENTION", DefaultJournalRetention, "how long a committed or compensated saga journal is kept for inspection (an unfinished one: 7 days after its last write)")
	c.maxmemoryPolicy = policyFlag(f)
	f.stringVar(&c.logLevel, "log-level", "LEASEHOLD_LOG_LEVEL", "info", "debug, info, warn or error")
	f.stringVar(&c.logFormat, "log-format", "LEASEHOLD_LOG_FORMAT", "text", "text or json")
	f.stringVar(&c.kafkaLogLevel, "kafka-log-level", "LEASEHOLD_KAFKA_LOG_LEVEL", "warn", "lowest level of franz-go's own lines (group joins, syncs, heartbeats): debug, info, warn or error; the worker's own lines follow --log-level")
	e.application().defineFlags(f)
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	if err := c.check(f); err != nil {
		return err
	}
	return runWorker(ctx, e, c)
}

// session is the Kafka session timeout the worker will use: the one given,
// or the one the library derives from the lease TTL.
func (c *runConfig) session() time.Duration {
	if c.sessionTimeout > 0 {
		return c.sessionTimeout
	}
	return leasehold.SessionTimeoutFor(c.leaseTTL)
}

// check refuses values that would not do what the user meant: limits out
// of range, and empty names that the library would quietly replace by its
// shared defaults.
func (c *runConfig) check(f *flags) error {
	switch {
	case strings.TrimSpace(c.group) == "":
		return usagef("--group is empty: name the consumer group, or leave the flag out for %q", leasehold.DefaultGroup)
	case len(splitList(c.topics)) == 0:
		return usagef("--topics %q names no topic: give topic names, comma-separated, or leave the flag out for %q", c.topics, leasehold.DefaultTopic)
	case c.prefix == "":
		return usagef("--prefix is empty: give a Redis key prefix, or leave the flag out for \"lh:\"")
	case c.shutdown <= 0:
		return usagef("shutdown timeout %v: want more than 0", c.shutdown)
	}
	if _, err := parseTypeLimits(c.typeLimits); err != nil {
		return err
	}
	switch {
	case c.concurrency < 1 || c.concurrency > 10000:
		return usagef("concurrency %d: want 1 to 10000", c.concurrency)

	case c.memoryBudgetMiB < 1 || c.memoryBudgetMiB > 1<<20:
		return usagef("memory budget %d MiB: want 1 to %d", c.memoryBudgetMiB, 1<<20)
	case c.maxHeldRecords < 1 || c.maxHeldRecords > 10_000_000:
		return usagef("max held records %d: want 1 to 10000000", c.maxHeldRecords)
	case c.leaseTTL < 100*time.Millisecond:
		return usagef("lease TTL %v is too short (minimum 100ms)", c.leaseTTL)
	case c.retention < time.Second:
		return usagef("retention %v is too short (minimum 1s)", c.retention)
	case c.shards < 0 || c.shards > 1<<24:
		return usagef("shards %d: want 1 to %d, or 0 for the default", c.shards, 1<<24)
	case c.sessionTimeout < 0:
		return usagef("session timeout %v: want more than 0, or 0 to derive it from the lease TTL", c.sessionTimeout)
	case c.rebalanceTimeout <= 0:
		return usagef("rebalance timeout %v: want more than 0", c.rebalanceTimeout)
	case c.heartbeatInterval < 0:
		return usagef("heartbeat interval %v: want more than 0, or 0 to derive it from the session timeout", c.heartbeatInterval)
	case c.heartbeatInterval > 0 && c.heartbeatInterval >= c.session():
		return usagef("heartbeat interval %v: want less than the session timeout %v", c.heartbeatInterval, c.session())
	case c.groupProtocol != string(leasehold.GroupProtocolClassic) && c.groupProtocol != string(leasehold.GroupProtocolConsumer):
		return usagef("group protocol %q: want classic or consumer", c.groupProtocol)
	case c.fetchMaxWait < time.Millisecond:
		return usagef("fetch max wait %v: want at least 1ms", c.fetchMaxWait)
	case c.sweepInterval < 100*time.Millisecond:
		return usagef("sweep interval %v: want at least 100ms", c.sweepInterval)
	case c.journalRetention < time.Second:
		return usagef("journal retention %v is too short (minimum 1s)", c.journalRetention)
	}
	return c.checkKafka(f)
}

// checkKafka refuses Kafka settings that exclude each other or name no
// broker, and malformed addresses.
func (c *runConfig) checkKafka(f *flags) error {
	hasBrokers := len(splitList(c.brokers)) > 0
	switch {
	case f.isSet("embedded-listen") && !c.embeddedKafka:
		return usagef("--embedded-listen needs --embedded-kafka")
	case hasBrokers:
		if err := checkBrokers("--brokers", splitList(c.brokers)); err != nil {
			return err
		}
		if c.embeddedKafka {
			return usagef("--brokers and --embedded-kafka exclude each other: pass one of them")
		}
	case !c.embeddedKafka:
		return usagef("no Kafka brokers: pass --brokers host:port (env LEASEHOLD_BROKERS), or --embedded-kafka for an in-memory Kafka that keeps nothing")
	}
	if _, err := parseDialMap(c.dialMap); err != nil {
		return err
	}
	if c.httpAddr != "" {
		return checkListen("--http", c.httpAddr)
	}
	return nil
}

func runWorker(ctx context.Context, e *Env, c runConfig) error {
	log, err := newLogger(e.Stderr, c.logLevel, c.logFormat)
	if err != nil {
		return err
	}
	kafkaLevel, err := parseLevel(c.kafkaLogLevel)
	if err != nil {
		return err
	}
	policy, err := c.storeOpts()
	if err != nil {
		return err
	}
	topics := splitList(c.topics)
	dlq := c.dlq
	if dlq == "" {
		dlq = topics[0] + ".dlq"
	}
	rdb, err := openRedis(ctx, c.redisURL)
	if err != nil {
		return err
	}
	defer func() { _ = rdb.Close() }()

	// The application's handlers: compensations first (the recovery
	// sweep starts with the worker), then job types; what they open is
	// closed when the worker has shut down.
	app := e.application()
	setup := &Setup{Log: log, Command: "run"}
	defer setup.close()
	reg := compensation.NewRegistry()
	if err := app.registerCompensations(ctx, reg, setup); err != nil {
		return err
	}

	brokers := splitList(c.brokers)
	if c.embeddedKafka {
		specs := []topicSpec{{dlq, 1}}
		for _, t := range topics {
			specs = append(specs, topicSpec{t, 6})
		}
		kc, err := app.startEmbeddedKafka(ctx, c.embedded, specs)
		if err != nil {
			return err
		}
		defer kc.Close()
		brokers = kc.ListenAddrs()
		log.Warn("embedded kafka started: in memory, for development; every record and offset is lost when the worker stops",
			slog.Any("brokers", brokers), slog.Any("topics", topics), slog.String("dlq", dlq))
	}

	// Traces are exported where the OTEL_* environment asks (nowhere when it
	// names no exporter or endpoint); metrics are served at /metrics.
	tel, tracer, stopTracing, err := startTracing(ctx, "leasehold-worker", log, tracing.WithConsumerGroup(c.group))
	if err != nil {
		return err
	}
	defer stopTracing()
	kopts, err := c.kafkaOpts(brokers)
	if err != nil {
		return err
	}
	opts := []leasehold.Opt{
		leasehold.WithTracing(tracer),
		leasehold.WithKafka(kopts...),
		leasehold.WithTopics(topics...),
		leasehold.WithGroup(c.group),
		leasehold.WithDeadLetterTopic(dlq),
		leasehold.WithConcurrency(c.concurrency),
		leasehold.WithMemoryBudget(int64(c.memoryBudgetMiB)<<20, c.maxHeldRecords),
		leasehold.WithLeaseTTL(c.leaseTTL),
		leasehold.WithRetention(c.retention),
		leasehold.WithShutdownTimeout(c.shutdown),
		leasehold.WithKeyPrefix(c.prefix),
		leasehold.WithLogger(log),
		leasehold.WithKafkaLogLevel(kafkaLevel),
		leasehold.WithGroupProtocol(leasehold.GroupProtocol(c.groupProtocol)),
		leasehold.WithShareGroup(c.shareGroup),
		leasehold.WithIdempotencyOptions(policy...),
	}
	opts = append(opts, c.typeLimitOpts()...)
	opts = append(opts, leasehold.WithCompensation(reg, compensation.WithSweepInterval(c.sweepInterval),
		compensation.WithRetention(DefaultOpenJournalRetention, c.journalRetention)))
	w, err := leasehold.New(rdb, opts...)
	if err != nil {
		return err
	}
	if err := app.registerJobs(ctx, w, setup); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err = policyHint(w.Start(sctx))
	cancel()
	if err != nil {
		return err
	}

	var srv *http.Server
	var draining atomic.Bool
	if c.httpAddr != "" {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", c.httpAddr)
		if err != nil {
			_ = w.Shutdown(context.WithoutCancel(ctx))
			return fmt.Errorf("http listen: %w", err)
		}
		ready := &readiness{w: w, log: log}
		rctx, stopReady := context.WithCancel(context.WithoutCancel(ctx))
		readyDone := make(chan struct{})
		go func() { defer close(readyDone); ready.run(rctx) }()
		defer func() { stopReady(); <-readyDone }()
		mux := healthMux(w, ready, &draining)
		mux.Handle("GET /metrics", tel.MetricsHandler)
		srv = httpserve.New(mux)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server", slog.Any("err", err))
			}
		}()
		log.Info("http listening", slog.String("addr", ln.Addr().String()))
	}

	<-ctx.Done()
	draining.Store(true)
	err = drain(ctx, e.Force, log, w, c.shutdown)
	if srv != nil {
		// Up until the drain ends: /healthz answers, /readyz says 503.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = srv.Shutdown(hctx)
		cancel()
	}
	return err
}

// kafkaOpts are the worker's franz-go options from the flags. Unset (0), the
// session timeout and heartbeat interval are the library's: derived from the
// lease TTL.
func (c *runConfig) kafkaOpts(brokers []string) ([]kgo.Opt, error) {
	dialMap, err := parseDialMap(c.dialMap)
	if err != nil {
		return nil, err
	}
	kopts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RebalanceTimeout(c.rebalanceTimeout), kgo.FetchMaxWait(c.fetchMaxWait)}
	if c.sessionTimeout > 0 {
		kopts = append(kopts, kgo.SessionTimeout(c.sessionTimeout))
	}
	if c.heartbeatInterval > 0 {
		kopts = append(kopts, kgo.HeartbeatInterval(c.heartbeatInterval))
	}
	if len(dialMap) > 0 {
		kopts = append(kopts, kgo.Dialer(dialMap.dial))
	}
	return kopts, nil
}

// healthMux serves /healthz (the process is up) and /readyz (not draining,
// and the last readiness check found fetching running and Redis and Kafka
// answering: see readiness). Neither calls Redis or Kafka.
func healthMux(w *leasehold.Worker, ready *readiness, draining *atomic.Bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain")
		_, _ = rw.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain")
		rw.Header().Set("Cache-Control", "no-store")
		if draining.Load() {
			rw.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(rw, "not ready: shutting down, %d running jobs left\n", len(w.Running()))
			return
		}
		if err := ready.state(time.Now()); err != nil {
			rw.WriteHeader(http.StatusServiceUnavailable)
			_, _ = rw.Write([]byte("not ready: " + oneLine(err) + "\n"))
			return
		}
		_, _ = rw.Write([]byte("ready\n"))
	})
	return mux
}

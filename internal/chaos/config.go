package chaos

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/demo"
)

// Config holds the settings of a chaos run. [Config.Flags] binds them to
// command-line flags whose defaults come from the environment variables
// named in each field's comment.
type Config struct {
	// Seed drives the fault schedule and the job mix (CHAOS_SEED; default:
	// derived from the clock, printed first so the run can be replayed).
	Seed uint64
	// Jobs is the number of distinct job keys enqueued (CHAOS_JOBS, 20000).
	Jobs int
	// Workers is the number of `worker run` processes at the start
	// (CHAOS_WORKERS, 3).
	Workers int
	// KillEvery is the mean interval between SIGKILLs (CHAOS_KILL_EVERY, 5s).
	KillEvery time.Duration
	// Pause is how long a worker stays SIGSTOPped; it must exceed the lease
	// TTL (CHAOS_PAUSE, default 2*LeaseTTL + 1s).
	Pause time.Duration
	// LeaseTTL is the workers' lease TTL (CHAOS_LEASE_TTL, 2s).
	LeaseTTL time.Duration
	// Duplicates is the fraction of extra records that repeat an earlier
	// key, half of them re-sent long after the original (CHAOS_DUPLICATES, 0.2).
	Duplicates float64
	// Rate is the number of distinct jobs enqueued per second; the fault
	// phase lasts Jobs/Rate (CHAOS_RATE, 200).
	Rate int
	// Concurrency is each worker's handler concurrency (CHAOS_CONCURRENCY, 16).
	Concurrency int
	// SlowFraction is the fraction of jobs, drawn from the seed, whose
	// transfer holds for Hold between its charge and its fenced write
	// (demo.transfer's hold_ms), so that pauses land in that window and the
	// paused worker's write, attempted after a newer owner's, is refused by
	// the fence guard (CHAOS_SLOW_FRACTION, 0.05; 0 turns holds off).
	SlowFraction float64
	// Hold is the hold of the slow jobs (their first attempt only). A pause
	// that lands in it makes a zombie: the job is taken over and written
	// under a newer fence before the pause ends, and the zombie's write
	// after it is refused (CHAOS_HOLD, default LeaseTTL; at most 60s).
	Hold time.Duration
	// SessionTimeout is the workers' Kafka group session timeout: how long a
	// SIGKILLed or paused worker keeps its partitions. The dev-broker's
	// group.min.session.timeout.ms is lowered to it when it is shorter
	// than kfake's 6s (CHAOS_SESSION_TIMEOUT; default the workers' own,
	// derived from the lease TTL: leasehold.SessionTimeoutFor, 6s for
	// TTLs up to 12s).
	SessionTimeout time.Duration
	// HeartbeatInterval is the workers' Kafka group heartbeat interval: how
	// soon the survivors learn of a rebalance (CHAOS_HEARTBEAT_INTERVAL;
	// default the workers' own, leasehold.HeartbeatIntervalFor the session
	// timeout; less than SessionTimeout).
	HeartbeatInterval time.Duration
	// FetchMaxWait is the workers' Kafka fetch max wait: a partition handed
	// over in a rebalance is fetched once the fetch in flight returns, up
	// to this long on a quiet topic (CHAOS_FETCH_MAX_WAIT, 250ms).
	FetchMaxWait time.Duration
	// Drain bounds the wait for the jobs to finish after the fault phase
	// (CHAOS_DRAIN, 3m).
	Drain time.Duration
	// Worker is the worker binary; empty builds ./cmd/worker (CHAOS_WORKER_BIN).
	Worker string
	// RedisServer is the redis-server binary (CHAOS_REDIS_SERVER, redis-server).
	RedisServer string
	// PostgresURL is the PostgreSQL server; the run uses a fresh schema in
	// it (PG_URL, postgres://postgres@127.0.0.1:5432/test?sslmode=disable).
	PostgresURL string
	// Dir receives the logs and Redis data (CHAOS_DIR; default a new
	// directory under the system temp dir). It is kept after the run.
	Dir string
	// KeepSchema keeps the PostgreSQL schema after the run (CHAOS_KEEP_SCHEMA).
	KeepSchema bool
	// Kafka is the broker the run goes against: [KafkaFake] runs `worker
	// dev-broker` (franz-go's kfake) in its own process, [KafkaApache] a
	// single-node Apache Kafka broker (internal/kafkabroker; needs java),
	// which the schedule also kills and pauses, [KafkaApacheCluster] three
	// such nodes (CHAOS_KAFKA, kfake).
	Kafka string
	// BrokerFaultEvery is the mean interval between broker faults with
	// Kafka=apache, alternately a SIGKILL followed by a restart on the
	// broker's data and a SIGSTOP for BrokerPause; a run has at least one
	// of each (CHAOS_BROKER_FAULT_EVERY, 30s).
	BrokerFaultEvery time.Duration
	// BrokerPause is how long the broker stays SIGSTOPped; it must exceed
	// SessionTimeout, so that the group's members time out on the broker
	// (CHAOS_BROKER_PAUSE, default 2*SessionTimeout + 1s).
	BrokerPause time.Duration
	// PartitionEvery is the mean interval between network partitions of a
	// worker: its links to Redis, to Kafka or to both blackholed in one
	// direction or both while it keeps running (CHAOS_PARTITION_EVERY,
	// 10s).
	PartitionEvery time.Duration
	// PartitionFor is how long a partition lasts; it must exceed the lease
	// TTL, so that a partitioned worker's leases can be taken over
	// (CHAOS_PARTITION, default 2*LeaseTTL + SessionTimeout + 1s).
	PartitionFor time.Duration
	// PartitionNets are the links partitions may cut: Redis and Kafka
	// together, Redis alone, Kafka alone; empty means all three. The tests
	// on the dev-broker cut Redis only, and Kafka partitions are tested on
	// Apache Kafka, the broker they are about (kfake's group used to wedge
	// after them: see docs/chaos.md).
	PartitionNets []Service
	// Retention is the workers' --retention: how long a finished key
	// answers duplicates (CHAOS_RETENTION, 1h). A soak sets it short, so
	// that Redis's keys reach their steady state within the run.
	Retention time.Duration
	// Soak, when above 0, makes the run a soak: faults at the schedule's
	// steady pace for this long, jobs enqueued at Rate all along (Jobs is
	// Rate*Soak), and the workers' RSS and goroutines and Redis's memory
	// and keys sampled every SoakSample, then checked to be flat
	// ([Flatness]) (SOAK_DURATION, 0: no soak).
	Soak time.Duration
	// SoakSample is the sampling interval of a soak (SOAK_SAMPLE_EVERY, 10s).
	SoakSample time.Duration

	// Cancels is how many jobs, drawn from the seed in the middle of the
	// run, are cancelled while they run, as `worker cancel` does; they
	// hold (Hold) so that they run when their cancel comes (CHAOS_CANCELS,
	// 10; Finish lowers it to a tenth of Jobs).
	Cancels int
	// TypePauses is how many times demo.transfer is paused fleet-wide
	// during the fault phase, as `worker pause` does, and resumed after
	// TypePauseFor (CHAOS_PAUSES, 1).
	TypePauses int
	// TypePauseFor is how long each pause of the job type lasts; more than
	// one renew interval (LeaseTTL/3) (CHAOS_PAUSE_TYPE_FOR, default
	// 2*LeaseTTL; at most 1m).
	TypePauseFor time.Duration

	// GroupProtocol is the workers' --group-protocol (CHAOS_GROUP_PROTOCOL,
	// classic): consumer runs them in a KIP-848 group.
	GroupProtocol string

	// Share runs the workers in share-group mode (`worker run
	// --share-group`, a group of the run's own: [Config.ShareGroup]) instead
	// of a consumer group, with the same faults and checks, and one more:
	// every record acknowledged after the drain (see share.go). Share
	// groups need Apache Kafka: CHAOS_SHARE=1 makes CHAOS_KAFKA default to
	// apache, and Finish refuses Share with kfake (CHAOS_SHARE, off).
	Share bool

	envErrs []error // malformed environment variables, reported by Finish
}

// workerGroupArgs are the `worker run` flags of the workers' Kafka group
// timeouts: none for the ones the workers derive from the lease TTL
// themselves (their defaults), so that the run goes with the defaults
// unless told otherwise.
func (c *Config) workerGroupArgs() []string {
	var args []string
	if c.SessionTimeout != leasehold.SessionTimeoutFor(c.LeaseTTL) {
		args = append(args, "--session-timeout", c.SessionTimeout.String())
	}
	if c.HeartbeatInterval != leasehold.HeartbeatIntervalFor(c.SessionTimeout) {
		args = append(args, "--heartbeat-interval", c.HeartbeatInterval.String())
	}
	if c.GroupProtocol != "" && c.GroupProtocol != string(leasehold.GroupProtocolClassic) {
		args = append(args, "--group-protocol", c.GroupProtocol)
	}
	if c.Share {
		args = append(args, "--share-group", c.ShareGroup())
	}
	return args
}

// The brokers a chaos run can go against (Config.Kafka).
const (
	// KafkaFake is `worker dev-broker`: franz-go's kfake in a process of
	// its own. The default.
	KafkaFake = "kfake"
	// KafkaApache is a single-node Apache Kafka broker (KRaft) from
	// internal/kafkabroker, killed, restarted and paused by the schedule.
	KafkaApache = "apache"
	// KafkaApacheCluster is three Apache Kafka nodes (KRaft, broker and
	// controller each; kafkabroker.StartCluster) with the topics at
	// replication 3 and min.insync.replicas 2. The schedule's broker
	// faults go in turn to the leader of a partition, the group's
	// coordinator and the active controller (kills), and to a leader
	// (pauses).
	KafkaApacheCluster = "apache-cluster"
)

// DefaultPostgresURL is the PostgreSQL server used when PG_URL is not set.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Flags registers the settings on fs, with defaults from the environment.
// Call [Config.Finish] after parsing.
func (c *Config) Flags(fs *flag.FlagSet) {
	fs.Uint64Var(&c.Seed, "seed", c.envUint("CHAOS_SEED", 0), "schedule seed; 0 picks one from the clock (env CHAOS_SEED)")
	fs.IntVar(&c.Jobs, "jobs", c.envInt("CHAOS_JOBS", 20000), "distinct jobs to enqueue (env CHAOS_JOBS)")
	fs.IntVar(&c.Workers, "workers", c.envInt("CHAOS_WORKERS", 3), "worker processes at the start (env CHAOS_WORKERS)")
	fs.DurationVar(&c.KillEvery, "kill-every", c.envDur("CHAOS_KILL_EVERY", 5*time.Second), "mean interval between SIGKILLs (env CHAOS_KILL_EVERY)")
	fs.DurationVar(&c.Pause, "pause", c.envDur("CHAOS_PAUSE", 0), "how long a worker stays SIGSTOPped; > lease TTL; 0 means 2*lease-ttl+1s (env CHAOS_PAUSE)")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", c.envDur("CHAOS_LEASE_TTL", 2*time.Second), "workers' lease TTL (env CHAOS_LEASE_TTL)")
	fs.Float64Var(&c.Duplicates, "duplicates", c.envFloat("CHAOS_DUPLICATES", 0.2), "fraction of extra duplicate and re-sent records (env CHAOS_DUPLICATES)")
	fs.IntVar(&c.Rate, "rate", c.envInt("CHAOS_RATE", 200), "distinct jobs enqueued per second (env CHAOS_RATE)")
	fs.IntVar(&c.Concurrency, "concurrency", c.envInt("CHAOS_CONCURRENCY", 16), "handler concurrency per worker (env CHAOS_CONCURRENCY)")
	fs.Float64Var(&c.SlowFraction, "slow-fraction", c.envFloat("CHAOS_SLOW_FRACTION", 0.05), "fraction of jobs that hold between charge and fenced write (env CHAOS_SLOW_FRACTION)")
	fs.DurationVar(&c.Hold, "hold", c.envDur("CHAOS_HOLD", 0), "hold of the slow jobs; 0 means the lease TTL (env CHAOS_HOLD)")
	fs.DurationVar(&c.SessionTimeout, "session-timeout", c.envDur("CHAOS_SESSION_TIMEOUT", 0), "workers' Kafka group session timeout; 0 means the workers' default, derived from the lease TTL (env CHAOS_SESSION_TIMEOUT)")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", c.envDur("CHAOS_HEARTBEAT_INTERVAL", 0), "workers' Kafka group heartbeat interval; 0 means the workers' default, derived from the session timeout (env CHAOS_HEARTBEAT_INTERVAL)")
	fs.StringVar(&c.GroupProtocol, "group-protocol", cmp.Or(os.Getenv("CHAOS_GROUP_PROTOCOL"), string(leasehold.GroupProtocolClassic)), "workers' Kafka group protocol: classic or consumer (KIP-848; Apache Kafka only) (env CHAOS_GROUP_PROTOCOL)")
	fs.DurationVar(&c.FetchMaxWait, "fetch-max-wait", c.envDur("CHAOS_FETCH_MAX_WAIT", 250*time.Millisecond), "workers' Kafka fetch max wait (env CHAOS_FETCH_MAX_WAIT)")
	fs.DurationVar(&c.Drain, "drain", c.envDur("CHAOS_DRAIN", 3*time.Minute), "longest wait for the jobs to finish after the faults (env CHAOS_DRAIN)")
	fs.StringVar(&c.Worker, "worker", os.Getenv("CHAOS_WORKER_BIN"), "worker binary; empty builds ./cmd/worker (env CHAOS_WORKER_BIN)")
	fs.StringVar(&c.RedisServer, "redis-server", cmp.Or(os.Getenv("CHAOS_REDIS_SERVER"), "redis-server"), "redis-server binary (env CHAOS_REDIS_SERVER)")
	fs.StringVar(&c.PostgresURL, "pg", cmp.Or(os.Getenv("PG_URL"), DefaultPostgresURL), "PostgreSQL URL; the run uses a fresh schema (env PG_URL)")
	fs.StringVar(&c.Dir, "dir", os.Getenv("CHAOS_DIR"), "directory for logs and Redis data (env CHAOS_DIR; default a new temp dir)")
	fs.BoolVar(&c.Share, "share", envBool("CHAOS_SHARE"), "workers in share-group mode (worker run --share-group); needs -kafka apache or apache-cluster, the default with CHAOS_SHARE=1 (env CHAOS_SHARE)")
	defKafka := KafkaFake
	if envBool("CHAOS_SHARE") {
		defKafka = KafkaApache
	}
	fs.StringVar(&c.Kafka, "kafka", cmp.Or(os.Getenv("CHAOS_KAFKA"), defKafka), "broker: kfake (the dev-broker), apache (a real Apache Kafka broker, killed and paused too; needs java) or apache-cluster (three nodes; leaders, coordinator and controller killed) (env CHAOS_KAFKA)")
	fs.DurationVar(&c.BrokerFaultEvery, "broker-fault-every", c.envDur("CHAOS_BROKER_FAULT_EVERY", 30*time.Second), "with -kafka apache, mean interval between broker kills and pauses (env CHAOS_BROKER_FAULT_EVERY)")
	fs.DurationVar(&c.BrokerPause, "broker-pause", c.envDur("CHAOS_BROKER_PAUSE", 0), "with -kafka apache, how long the broker stays SIGSTOPped; > session timeout; 0 means 2*session-timeout+1s (env CHAOS_BROKER_PAUSE)")
	fs.DurationVar(&c.PartitionEvery, "partition-every", c.envDur("CHAOS_PARTITION_EVERY", 10*time.Second), "mean interval between network partitions of a worker (env CHAOS_PARTITION_EVERY)")
	fs.DurationVar(&c.PartitionFor, "partition", c.envDur("CHAOS_PARTITION", 0), "how long a partition lasts; > lease TTL; 0 means 2*lease-ttl+session-timeout+1s (env CHAOS_PARTITION)")
	fs.DurationVar(&c.Retention, "retention", c.envDur("CHAOS_RETENTION", time.Hour), "workers' --retention (env CHAOS_RETENTION)")
	fs.DurationVar(&c.Soak, "soak", c.envDur("SOAK_DURATION", 0), "run a soak this long: steady faults and jobs, resources sampled and checked flat; 0: a plain run (env SOAK_DURATION)")
	fs.DurationVar(&c.SoakSample, "soak-sample", c.envDur("SOAK_SAMPLE_EVERY", 10*time.Second), "sampling interval of a soak (env SOAK_SAMPLE_EVERY)")
	fs.IntVar(&c.Cancels, "cancels", c.envInt("CHAOS_CANCELS", 10), "jobs cancelled while they run, as worker cancel does (env CHAOS_CANCELS)")
	fs.IntVar(&c.TypePauses, "type-pauses", c.envInt("CHAOS_PAUSES", 1), "pauses of the job type, as worker pause does, each resumed (env CHAOS_PAUSES)")
	fs.DurationVar(&c.TypePauseFor, "type-pause-for", c.envDur("CHAOS_PAUSE_TYPE_FOR", 0), "how long each pause of the job type lasts; 0 means 2*lease-ttl (env CHAOS_PAUSE_TYPE_FOR)")
	fs.BoolVar(&c.KeepSchema, "keep-schema", os.Getenv("CHAOS_KEEP_SCHEMA") != "", "keep the PostgreSQL schema after the run (env CHAOS_KEEP_SCHEMA)")
}

// Finish fills the defaults that depend on other settings and validates.
func (c *Config) Finish() error {
	if err := errors.Join(c.envErrs...); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	for c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	c.Jobs = cmp.Or(c.Jobs, 20000)
	c.Workers = cmp.Or(c.Workers, 3)
	c.KillEvery = cmp.Or(c.KillEvery, 5*time.Second)
	c.LeaseTTL = cmp.Or(c.LeaseTTL, 2*time.Second)
	c.Pause = cmp.Or(c.Pause, 2*c.LeaseTTL+time.Second)
	c.Rate = cmp.Or(c.Rate, 200)
	c.Concurrency = cmp.Or(c.Concurrency, 16)
	c.Hold = cmp.Or(c.Hold, c.LeaseTTL)
	// Unset, the workers derive these themselves (see workerGroupArgs); the
	// run's other defaults and checks use the same values.
	c.SessionTimeout = cmp.Or(c.SessionTimeout, leasehold.SessionTimeoutFor(c.LeaseTTL))
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, leasehold.HeartbeatIntervalFor(c.SessionTimeout))
	c.FetchMaxWait = cmp.Or(c.FetchMaxWait, 250*time.Millisecond)
	c.Drain = cmp.Or(c.Drain, 3*time.Minute)
	c.Kafka = cmp.Or(c.Kafka, KafkaFake)
	if _, err := leasehold.ParseGroupProtocol(c.GroupProtocol); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.BrokerFaultEvery = cmp.Or(c.BrokerFaultEvery, 30*time.Second)
	c.BrokerPause = cmp.Or(c.BrokerPause, 2*c.SessionTimeout+time.Second)
	c.PartitionEvery = cmp.Or(c.PartitionEvery, 10*time.Second)
	c.PartitionFor = cmp.Or(c.PartitionFor, 2*c.LeaseTTL+c.SessionTimeout+time.Second)
	c.Retention = cmp.Or(c.Retention, time.Hour)
	c.SoakSample = cmp.Or(c.SoakSample, 10*time.Second)
	if c.Soak > 0 {
		c.Jobs = max(1, int(c.Soak.Seconds()*float64(c.Rate)))
	}
	c.RedisServer = cmp.Or(c.RedisServer, "redis-server")
	c.PostgresURL = cmp.Or(c.PostgresURL, DefaultPostgresURL)
	switch {
	case c.Jobs < 1 || c.Jobs > 10_000_000:
		return fmt.Errorf("%w: jobs %d: want 1 to 10,000,000", ErrConfig, c.Jobs)
	case c.Workers < 2 || c.Workers > 64:
		return fmt.Errorf("%w: workers %d: want 2 to 64 (faults need a survivor)", ErrConfig, c.Workers)
	case c.KillEvery < 100*time.Millisecond:
		return fmt.Errorf("%w: kill interval %s: want at least 100ms", ErrConfig, c.KillEvery)
	case c.LeaseTTL < 300*time.Millisecond:
		return fmt.Errorf("%w: lease TTL %s: want at least 300ms", ErrConfig, c.LeaseTTL)
	case c.Pause <= c.LeaseTTL:
		return fmt.Errorf("%w: pause %s must be longer than the lease TTL %s to make a zombie", ErrConfig, c.Pause, c.LeaseTTL)
	case c.Duplicates < 0 || c.Duplicates > 1:
		return fmt.Errorf("%w: duplicates %v: want 0 to 1", ErrConfig, c.Duplicates)
	case c.Rate < 1:
		return fmt.Errorf("%w: rate %d: want at least 1", ErrConfig, c.Rate)
	case c.Concurrency < 1 || c.Concurrency > 10000:
		return fmt.Errorf("%w: concurrency %d: want 1 to 10000", ErrConfig, c.Concurrency)
	case c.SlowFraction < 0 || c.SlowFraction > 1:
		return fmt.Errorf("%w: slow fraction %v: want 0 to 1", ErrConfig, c.SlowFraction)
	case c.Hold < time.Millisecond || c.Hold > demo.MaxHoldMS*time.Millisecond:
		return fmt.Errorf("%w: hold %s: want 1ms to %s", ErrConfig, c.Hold, demo.MaxHoldMS*time.Millisecond)
	case c.SessionTimeout < 100*time.Millisecond || c.SessionTimeout > 5*time.Minute:
		return fmt.Errorf("%w: session timeout %s: want 100ms to 5m", ErrConfig, c.SessionTimeout)
	case c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.SessionTimeout:
		return fmt.Errorf("%w: heartbeat interval %s: want more than 0 and less than the session timeout %s",
			ErrConfig, c.HeartbeatInterval, c.SessionTimeout)
	case c.FetchMaxWait < time.Millisecond || c.FetchMaxWait > time.Minute:
		return fmt.Errorf("%w: fetch max wait %s: want 1ms to 1m", ErrConfig, c.FetchMaxWait)
	case c.Kafka != KafkaFake && c.Kafka != KafkaApache && c.Kafka != KafkaApacheCluster:
		return fmt.Errorf("%w: kafka %q (CHAOS_KAFKA): want %s (the dev-broker), %s (a real Apache Kafka broker, needs java) or %s (three)",
			ErrConfig, c.Kafka, KafkaFake, KafkaApache, KafkaApacheCluster)
	case c.PartitionEvery < time.Second:
		return fmt.Errorf("%w: partition interval %s: want at least 1s", ErrConfig, c.PartitionEvery)
	case c.PartitionFor <= c.LeaseTTL || c.PartitionFor > 5*time.Minute:
		return fmt.Errorf("%w: partition %s: want longer than the lease TTL %s (so that leases can be taken over) and at most 5m",
			ErrConfig, c.PartitionFor, c.LeaseTTL)
	case c.Soak < 0 || c.Soak > 0 && c.SoakWarmup()+8*c.SoakSample > c.Soak:
		return fmt.Errorf("%w: soak %s: want longer than the warm-up %s (1.5 x retention + 30s) plus 8 samples of %s",
			ErrConfig, c.Soak, c.SoakWarmup(), c.SoakSample)
	case c.Retention < time.Second:
		return fmt.Errorf("%w: retention %s: want at least 1s", ErrConfig, c.Retention)
	case c.BrokerFaultEvery < time.Second:
		return fmt.Errorf("%w: broker fault interval %s: want at least 1s", ErrConfig, c.BrokerFaultEvery)
	case c.BrokerPause <= c.SessionTimeout || c.BrokerPause > 5*time.Minute:
		return fmt.Errorf("%w: broker pause %s: want longer than the session timeout %s (so that the members time out) and at most 5m",
			ErrConfig, c.BrokerPause, c.SessionTimeout)
	}
	return c.finishControls()
}

// finishControls checks share mode's settings (checkShare), and fills and
// checks the operator controls'.
func (c *Config) finishControls() error {
	if err := c.checkShare(); err != nil {
		return err
	}
	c.TypePauseFor = cmp.Or(c.TypePauseFor, 2*c.LeaseTTL)
	c.Cancels = min(c.Cancels, c.Jobs/10)
	switch {
	case c.Cancels < 0:
		return fmt.Errorf("%w: cancels %d: want 0 or more", ErrConfig, c.Cancels)
	case c.TypePauses < 0 || c.TypePauses > 100:
		return fmt.Errorf("%w: type pauses %d: want 0 to 100", ErrConfig, c.TypePauses)
	case c.TypePauseFor <= c.LeaseTTL/3 || c.TypePauseFor > time.Minute:
		return fmt.Errorf("%w: type pause %s: want longer than a renew interval (%s) and at most 1m",
			ErrConfig, c.TypePauseFor, c.LeaseTTL/3)
	}
	return nil
}

// checkShare refuses share mode on kfake (its share-group support is
// partial) and with a consumer-group protocol.
func (c *Config) checkShare() error {
	switch {
	case !c.Share:
		return nil
	case c.Kafka == KafkaFake:
		return fmt.Errorf("%w: share mode (CHAOS_SHARE) needs Apache Kafka, and kfake's share groups are partial: "+
			"set CHAOS_KAFKA=apache or apache-cluster (-kafka), or leave CHAOS_KAFKA unset", ErrConfig)
	case c.GroupProtocol != "" && c.GroupProtocol != string(leasehold.GroupProtocolClassic):
		return fmt.Errorf("%w: share mode (CHAOS_SHARE) and group protocol %s: a share group has no consumer-group "+
			"protocol; drop CHAOS_GROUP_PROTOCOL", ErrConfig, c.GroupProtocol)
	}
	return nil
}

// SoakWarmup is how long a soak runs before its samples count: the
// workers' retention plus one record window (half the retention), after
// which finished records expire as fast as new ones arrive, and 30s.
func (c *Config) SoakWarmup() time.Duration {
	return c.Retention + c.Retention/2 + 30*time.Second
}

// Horizon is the length of the fault phase: the time it takes to enqueue
// the jobs at Rate, and at least four kill intervals.
func (c *Config) Horizon() time.Duration {
	h := time.Duration(c.Jobs) * time.Second / time.Duration(c.Rate)
	return max(h, 4*c.KillEvery, 2*c.Pause)
}

// envBool reports whether environment variable name is set to a true
// value (1, t, true, y, yes; case-insensitive).
func envBool(name string) bool {
	switch strings.ToLower(os.Getenv(name)) {
	case "1", "t", "true", "y", "yes":
		return true
	}
	return false
}

func (c *Config) envInt(name string, def int) int {
	return envParse(c, name, def, strconv.Atoi)
}

func (c *Config) envUint(name string, def uint64) uint64 {
	return envParse(c, name, def, func(v string) (uint64, error) { return strconv.ParseUint(v, 10, 64) })
}

func (c *Config) envFloat(name string, def float64) float64 {
	return envParse(c, name, def, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) })
}

func (c *Config) envDur(name string, def time.Duration) time.Duration {
	return envParse(c, name, def, time.ParseDuration)
}

// envParse returns the parsed value of environment variable name, or def
// when it is unset; a malformed value is remembered for Finish to report.
func envParse[T any](c *Config, name string, def T, parse func(string) (T, error)) T {
	raw, ok := os.LookupEnv(name)
	if !ok || raw == "" {
		return def
	}
	v, err := parse(raw)
	if err != nil {
		c.envErrs = append(c.envErrs, fmt.Errorf("%s=%q: %w", name, raw, err))
		return def
	}
	return v
}

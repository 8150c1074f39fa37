package chaos

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"
)

// Figures is the outcome of a chaos run, printed one figure a line as
// `name=value unit`.
type Figures struct {
	// Seed is the schedule's seed, so that the run can be replayed.
	Seed uint64
	// JobsEnqueued counts the distinct job keys the harness produced
	// (duplicates and re-sent records not counted).
	JobsEnqueued int
	// JobsCompleted counts distinct keys whose fenced transfer is in
	// PostgreSQL.
	JobsCompleted int
	// JobsLost counts enqueued keys with no fenced transfer in PostgreSQL.
	// Must be 0.
	JobsLost int
	// FencedEffectsDuplicated counts keys whose fenced transfer was applied
	// more than once. Must be 0.
	FencedEffectsDuplicated int
	// UnfencedNetNotOne counts keys whose payment-stub charges minus
	// refunds is not exactly 1. Must be 0.
	UnfencedNetNotOne int
	// JobsCancelled counts keys an operator cancelled (their record FAILED
	// as cancelled): CancelledEffectAbsent of them never wrote their
	// transfer, CancelledEffectApplied wrote it once (a held transfer
	// writes after its hold). Neither counts in JobsCompleted or JobsLost.
	JobsCancelled, CancelledEffectAbsent, CancelledEffectApplied int
	// CancelledNotCompensated counts cancelled keys whose payment-stub
	// charges minus refunds is not 0: their saga must refund every charge.
	// Must be 0.
	CancelledNotCompensated int
	// ZombieWritesRejected counts fenced writes the fence guard refused
	// because a newer fence had been seen.
	ZombieWritesRejected int
	// CompensationsRun counts refunds the payment stub received.
	CompensationsRun int
	// Takeovers counts leases observed to change owner without having been
	// released by the previous owner.
	Takeovers int
	// TakeoverLatencies are the delays from a worker's SIGKILL to another
	// owner taking over one of the leases it held.
	TakeoverLatencies []time.Duration
	// RedisOutage is the total time Redis was unreachable because of the
	// scheduled restart.
	RedisOutage time.Duration
	// Drain is the time from the end of the fault phase (every record
	// enqueued, every fault over, dead workers started again) until every
	// job's transfer was in PostgreSQL; the whole drain timeout when they
	// never all were.
	Drain time.Duration
	// DrainUnfinished counts the jobs whose transfer was not in PostgreSQL
	// when the drain timed out (0 when it finished): the other figures are
	// then of a run still moving.
	DrainUnfinished int
	// BrokerKills counts the SIGKILLs of the Kafka broker that were carried
	// out (each followed by a restart on its data); 0 on the dev-broker.
	BrokerKills int
	// BrokerPauses counts the SIGSTOPs of the Kafka broker that were
	// carried out (each followed by SIGCONT); 0 on the dev-broker.
	BrokerPauses int
	// BrokerOutage is the total time the broker did not answer because of
	// those faults: from each kill until the restarted broker answered
	// metadata requests, and from each SIGSTOP to its SIGCONT.
	BrokerOutage time.Duration
	// Partitions are the network partitions of workers carried out.
	Partitions []PartitionMark
	// Soak holds a soak's resource figures (nil for a plain run).
	Soak *SoakFigures
	// History is the verdict of the history check (nil: not checked).
	History *HistoryVerdict
	// PartitionVerdict times the takeovers of partitioned workers' leases
	// (nil: not judged).
	PartitionVerdict *PartitionVerdict
	// Controls are the operator controls injected (nil: none).
	Controls *ControlFigures
	// ShareUnacknowledged counts the records of the jobs topic the share
	// group had not acknowledged (below its start offset) after the drain
	// and a wait for the acknowledgements; share mode only. Must be 0.
	ShareUnacknowledged int64
	// Share is whether the workers ran in share-group mode.
	Share bool
	// Audit is what `worker audit` made of the jobs topic after the drain
	// (nil: not audited). Its unaccounted records must be 0.
	Audit *AuditFigures
	// Attempts is what the keys' attempt histories say against their
	// records (nil: not checked). Its mismatched keys must be 0.
	Attempts *AttemptFigures
}

// MustBeZero returns `name=value` for each must-be-zero figure that is not.
func (f Figures) MustBeZero() []string {
	var out []string
	for _, x := range []struct {
		name string
		v    int
	}{
		{"drain_unfinished", f.DrainUnfinished},
		{"jobs_lost", f.JobsLost},
		{"fenced_effects_duplicated", f.FencedEffectsDuplicated},
		{"unfenced_net_not_one", f.UnfencedNetNotOne},
		{"cancelled_not_compensated", f.CancelledNotCompensated},
		{"soak_resources_growing", f.soakGrowing()},
		{"history_not_linearizable", f.historyIllegal()},
		{"partition_overlap_positive", f.overlapPositive()},
		{"partition_zombie_writes_after_newer_applied", f.zombieAfterNewer()},
		{"audit_unaccounted", f.auditUnaccounted()},
		{"share_records_unacknowledged", int(f.ShareUnacknowledged)},
		{"attempt_history_mismatched", f.attemptsMismatched()},
	} {
		if x.v != 0 {
			out = append(out, fmt.Sprintf("%s=%d", x.name, x.v))
		}
	}
	return out
}

// Err returns an *InvariantError if a must-be-zero figure is not zero.
func (f Figures) Err() error {
	if v := f.MustBeZero(); len(v) > 0 {
		return &InvariantError{Violations: v}
	}
	return nil
}

// Write prints the figures, one `name=value unit` line each.
func (f Figures) Write(w io.Writer) error {
	p50, p99 := Percentile(f.TakeoverLatencies, 50), Percentile(f.TakeoverLatencies, 99)
	lines := []line{
		{"jobs_enqueued", f.JobsEnqueued, "jobs"},
		{"jobs_completed", f.JobsCompleted, "jobs"},
		{"jobs_lost", f.JobsLost, "jobs"},
		{"fenced_effects_duplicated", f.FencedEffectsDuplicated, "keys"},
		{"unfenced_net_not_one", f.UnfencedNetNotOne, "keys"},
		{"zombie_writes_rejected", f.ZombieWritesRejected, "writes"},
		{"compensations_run", f.CompensationsRun, "refunds"},
		{"takeovers", f.Takeovers, "leases"},
		{"takeover_latency_p50_ms", ms(p50), "ms"},
		{"takeover_latency_p99_ms", ms(p99), "ms"},
		{"redis_outage_ms", ms(f.RedisOutage), "ms"},
		{"drain_ms", ms(f.Drain), "ms"},
		{"drain_unfinished", f.DrainUnfinished, "jobs"},
		{"broker_kills", f.BrokerKills, "kills"},
		{"broker_pauses", f.BrokerPauses, "pauses"},
		{"broker_outage_ms", ms(f.BrokerOutage), "ms"},
	}
	if f.Share {
		lines = append(lines, line{"share_records_unacknowledged", f.ShareUnacknowledged, "records"})
	}
	lines = append(lines, f.controlLines()...)
	lines = append(lines, f.partitionLines()...)
	lines = append(lines, f.historyLines()...)
	lines = append(lines, f.auditLines()...)
	if a := f.Attempts; a != nil {
		lines = append(lines, line{"attempt_history_keys", a.Keys, "keys"}, line{"attempt_history_attempts", a.Attempts, "attempts"},
			line{"attempt_history_mismatched", a.Mismatched, "keys"})
	}
	lines = append(lines, f.soakLines()...)
	lines = append(lines, line{"seed", f.Seed, "seed"})
	for _, l := range lines {
		if _, err := fmt.Fprintf(w, "%s=%v %s\n", l.name, l.value, l.unit); err != nil {
			return err
		}
	}
	return nil
}

// line is one `name=value unit` figure.
type line struct {
	name  string
	value any
	unit  string
}

func (f Figures) attemptsMismatched() int {
	if f.Attempts == nil {
		return 0
	}
	return f.Attempts.Mismatched
}

func (f Figures) historyIllegal() int {
	if f.History != nil && f.History.Result == porcupine.Illegal {
		return 1
	}
	return 0
}

func (f Figures) overlapPositive() int {
	if f.PartitionVerdict != nil && f.PartitionVerdict.Measured > 0 && f.PartitionVerdict.OverlapMax > 0 {
		return 1
	}
	return 0
}

func (f Figures) zombieAfterNewer() int {
	if f.PartitionVerdict == nil {
		return 0
	}
	return f.PartitionVerdict.ZombieWritesAfterNewerApplied
}

// historyLines are the history check's and the partition takeovers'
// figures (none when the run did not judge them).
func (f Figures) historyLines() []line {
	var out []line
	if v := f.PartitionVerdict; v != nil {
		out = append(out,
			line{"partition_takeovers", v.Takeovers, "leases"},
			line{"partition_takeovers_measured", v.Measured, "leases"},
			line{"partition_overlap_ms_max", v.OverlapMax.Milliseconds(), "ms"},
			line{"partition_zombie_writes", v.ZombieWrites, "writes"},
			line{"partition_zombie_writes_applied_before_newer", v.ZombieWritesApplied - v.ZombieWritesAfterNewerApplied, "writes"},
			line{"partition_zombie_writes_after_newer", v.ZombieWritesAfterNewer, "writes"},
			line{"partition_zombie_writes_after_newer_applied", v.ZombieWritesAfterNewerApplied, "writes"},
			line{"partition_kafka_only_commits", v.KafkaOnlyCommits, "commits"},
			line{"partition_kafka_only_takeovers", v.KafkaOnlyTakeovers, "leases"},
		)
	}
	if h := f.History; h != nil {
		lin := map[porcupine.CheckResult]string{porcupine.Ok: "1", porcupine.Illegal: "0", porcupine.Unknown: "unknown"}[h.Result]
		out = append(out,
			line{"history_ops", h.Ops, "ops"},
			line{"history_ambiguous_ops", h.Ambiguous, "ops"},
			line{"history_keys", h.Keys, "keys"},
			line{"history_claims", h.Claims, "claims"},
			line{"history_claims_full", h.ClaimsFull, "claims"},
			line{"history_linearizable", lin, "bool"},
		)
	}
	return out
}

func (f Figures) soakGrowing() int {
	if f.Soak == nil {
		return 0
	}
	return len(f.Soak.Growing)
}

// partitionLines are the partition counts: all, and per service cut.
func (f Figures) partitionLines() []line {
	n := map[Service]int{}
	for _, p := range f.Partitions {
		n[p.Net]++
	}
	return []line{
		{"partitions", len(f.Partitions), "partitions"},
		{"partitions_redis", n[NetRedis], "partitions"},
		{"partitions_kafka", n[NetKafka], "partitions"},
		{"partitions_redis_kafka", n[NetAll], "partitions"},
	}
}

// soakLines are a soak's figures (none for a plain run).
func (f Figures) soakLines() []line {
	s := f.Soak
	if s == nil {
		return nil
	}
	mb := func(b int64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) }
	return []line{
		{"soak_samples", s.Samples, "samples"},
		{"soak_worker_rss_first_mb", mb(s.RSSFirst), "MiB"},
		{"soak_worker_rss_last_mb", mb(s.RSSLast), "MiB"},
		{"soak_worker_goroutines_first", s.GoroutinesFirst, "goroutines"},
		{"soak_worker_goroutines_last", s.GoroutinesLast, "goroutines"},
		{"soak_redis_used_memory_first_mb", mb(s.UsedMemoryFirst), "MiB"},
		{"soak_redis_used_memory_last_mb", mb(s.UsedMemoryLast), "MiB"},
		{"soak_redis_keys_first", s.KeysFirst, "keys"},
		{"soak_redis_keys_last", s.KeysLast, "keys"},
		{"soak_jobs_per_s_first", strconv.FormatFloat(s.JobsPerSecondFirst, 'f', 1, 64), "jobs/s"},
		{"soak_jobs_per_s_last", strconv.FormatFloat(s.JobsPerSecondLast, 'f', 1, 64), "jobs/s"},
		{"soak_resources_growing", len(s.Growing), "resources"},
	}
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// Percentile returns the p-th percentile (nearest rank) of ds, or 0 when ds
// is empty.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

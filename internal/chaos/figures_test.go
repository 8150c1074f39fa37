package chaos

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/audit"
)

func TestFiguresFormat(t *testing.T) {
	t.Parallel()
	f := Figures{
		Seed: 99, JobsEnqueued: 10, JobsCompleted: 10, ZombieWritesRejected: 2, CompensationsRun: 3, Takeovers: 4,
		TakeoverLatencies: []time.Duration{300 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond},
		RedisOutage:       1500 * time.Millisecond, Drain: 2500 * time.Millisecond,
		BrokerKills: 1, BrokerPauses: 2, BrokerOutage: 14 * time.Second,
		Partitions:       []PartitionMark{{Net: NetRedis}, {Net: NetAll}, {Net: NetKafka}, {Net: NetRedis}},
		PartitionVerdict: &PartitionVerdict{Takeovers: 3, Measured: 2, OverlapMax: -40 * time.Millisecond, ZombieWrites: 1},
		History:          &HistoryVerdict{Ops: 40, Ambiguous: 2, Keys: 10, Result: porcupine.Ok},
	}
	var b strings.Builder
	if err := f.Write(&b); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^[a-z0-9_]+=-?[0-9]+ [a-z]+$`)
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if !line.MatchString(l) {
			t.Errorf("line %q is not `name=value unit`", l)
		}
		name, rest, _ := strings.Cut(l, "=")
		got[name] = rest
	}
	want := map[string]string{
		"jobs_enqueued": "10 jobs", "jobs_completed": "10 jobs", "jobs_lost": "0 jobs",
		"fenced_effects_duplicated": "0 keys", "unfenced_net_not_one": "0 keys",
		"zombie_writes_rejected": "2 writes", "compensations_run": "3 refunds", "takeovers": "4 leases",
		"takeover_latency_p50_ms": "200 ms", "takeover_latency_p99_ms": "300 ms",
		"redis_outage_ms": "1500 ms", "drain_ms": "2500 ms", "drain_unfinished": "0 jobs", "broker_kills": "1 kills", "broker_pauses": "2 pauses",
		"broker_outage_ms": "14000 ms", "seed": "99 seed",
		"partitions": "4 partitions", "partitions_redis": "2 partitions", "partitions_kafka": "1 partitions",
		"partitions_redis_kafka": "1 partitions", "partition_takeovers": "3 leases", "partition_takeovers_measured": "2 leases",
		"partition_overlap_ms_max": "-40 ms", "partition_zombie_writes": "1 writes",
		"partition_zombie_writes_applied_before_newer": "0 writes", "partition_zombie_writes_after_newer": "0 writes",
		"partition_zombie_writes_after_newer_applied": "0 writes", "partition_kafka_only_commits": "0 commits",
		"partition_kafka_only_takeovers": "0 leases", "history_ops": "40 ops", "history_ambiguous_ops": "2 ops",
		"history_keys": "10 keys", "history_linearizable": "1 bool", "history_claims": "0 claims",
		"history_claims_full": "0 claims",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("figures (-want +got):\n%s", diff)
	}
	if err := f.Err(); err != nil {
		t.Fatalf("clean figures: %v", err)
	}
}

// TestFiguresMustBeZeroOfTheHistory: an illegal history, a positive
// partition overlap, a zombie write applied after a newer one, a growing
// soak resource and a record the audit cannot account for each fail the run.
func TestFiguresMustBeZeroOfTheHistory(t *testing.T) {
	t.Parallel()
	f := Figures{
		History:          &HistoryVerdict{Result: porcupine.Illegal},
		PartitionVerdict: &PartitionVerdict{Measured: 1, OverlapMax: time.Millisecond, ZombieWritesAfterNewerApplied: 2},
		Soak:             &SoakFigures{Growing: []string{"redis_keys 10 -> 100"}},
		Audit:            &AuditFigures{Records: 10, Counts: map[audit.Outcome]int64{audit.Completed: 9, audit.Unaccounted: 1}},
	}
	want := []string{"soak_resources_growing=1", "history_not_linearizable=1", "partition_overlap_positive=1",
		"partition_zombie_writes_after_newer_applied=2", "audit_unaccounted=1"}
	if diff := cmp.Diff(want, f.MustBeZero()); diff != "" {
		t.Fatalf("violations (-want +got):\n%s", diff)
	}
}

func TestFiguresMustBeZero(t *testing.T) {
	t.Parallel()
	f := Figures{JobsLost: 1, UnfencedNetNotOne: 2, ZombieWritesRejected: 5}
	err := f.Err()
	var ie *InvariantError
	if !errors.As(err, &ie) || !errors.Is(err, ErrInvariant) {
		t.Fatalf("Err() = %v, want *InvariantError wrapping ErrInvariant", err)
	}
	if diff := cmp.Diff([]string{"jobs_lost=1", "unfenced_net_not_one=2"}, ie.Violations); diff != "" {
		t.Fatalf("violations (-want +got):\n%s", diff)
	}
	f = Figures{FencedEffectsDuplicated: 1}
	if err := f.Err(); !errors.Is(err, ErrInvariant) {
		t.Fatalf("duplicated fenced effect not reported: %v", err)
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := Percentile(ds, c.p); got != c.want {
			t.Errorf("p%v = %s, want %s", c.p, got, c.want)
		}
	}
	if got := Percentile(nil, 99); got != 0 {
		t.Errorf("p99 of nothing = %s", got)
	}
}

package chaos

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFiguresFormat(t *testing.T) {
	t.Parallel()
	f := Figures{
		Seed: 99, JobsEnqueued: 10, JobsCompleted: 10, ZombieWritesRejected: 2, CompensationsRun: 3, Takeovers: 4,
		TakeoverLatencies: []time.Duration{300 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond},
		RedisOutage:       1500 * time.Millisecond, Drain: 2500 * time.Millisecond,
		BrokerKills: 1, BrokerPauses: 2, BrokerOutage: 14 * time.Second,
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
		"redis_outage_ms": "1500 ms", "drain_ms": "2500 ms", "broker_kills": "1 kills", "broker_pauses": "2 pauses",
		"broker_outage_ms": "14000 ms", "seed": "99 seed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("figures (-want +got):\n%s", diff)
	}
	if err := f.Err(); err != nil {
		t.Fatalf("clean figures: %v", err)
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

package chaos

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func testScheduleConfig(seed uint64) ScheduleConfig {
	return ScheduleConfig{
		Seed:      seed,
		Horizon:   2 * time.Minute,
		KillEvery: 5 * time.Second,
		PauseFor:  4 * time.Second,
		Slots:     3,
	}
}

func TestScheduleReplaysFromSeed(t *testing.T) {
	t.Parallel()
	a, err := NewSchedule(testScheduleConfig(42))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSchedule(testScheduleConfig(42))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("same seed, different schedules (-a +b):\n%s", diff)
	}
	c, err := NewSchedule(testScheduleConfig(43))
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Equal(a, c) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
	if !strings.HasPrefix(a.String(), "seed=42\n") {
		t.Fatalf("schedule does not print its seed first:\n%s", a)
	}
	if got, want := strings.Count(a.String(), "\n"), len(a.Events)+1; got != want {
		t.Fatalf("printed %d lines, want %d (seed + one per event)", got, want)
	}
}

func TestScheduleShape(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 200; seed++ {
		c := testScheduleConfig(seed)
		s, err := NewSchedule(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range []Action{RestartRedis, AddWorker, RemoveWorker} {
			if n := s.Count(a); n != 1 {
				t.Fatalf("seed %d: %d %s events, want 1", seed, n, a)
			}
		}
		if s.Count(Pause) < 1 {
			t.Fatalf("seed %d: no pause", seed)
		}
		// Kills every 5s on average over 2 minutes: between 16 and 48 kills
		// (intervals are drawn from [2.5s, 7.5s]).
		if n := s.Count(Kill); n < 15 || n > 48 {
			t.Fatalf("seed %d: %d kills over %s with a %s mean interval", seed, n, c.Horizon, c.KillEvery)
		}
		var prev time.Duration
		for _, e := range s.Events {
			if e.At < prev {
				t.Fatalf("seed %d: events out of order at %s", seed, e)
			}
			prev = e.At
			if e.At < 0 || e.At >= c.Horizon {
				t.Fatalf("seed %d: event outside the horizon: %s", seed, e)
			}
			if e.Slot < 0 || e.Slot >= c.Slots {
				t.Fatalf("seed %d: slot out of range: %s", seed, e)
			}
			switch e.Action {
			case Pause:
				if e.For != c.PauseFor {
					t.Fatalf("seed %d: pause for %s, want %s", seed, e.For, c.PauseFor)
				}
			case RestartRedis:
				if e.At < c.Horizon/4 || e.At > 3*c.Horizon/4 {
					t.Fatalf("seed %d: redis restart outside the middle half: %s", seed, e)
				}
			case AddWorker:
				if e.At > c.Horizon/2 {
					t.Fatalf("seed %d: worker added late: %s", seed, e)
				}
			case RemoveWorker:
				if e.At < c.Horizon/2 {
					t.Fatalf("seed %d: worker removed early: %s", seed, e)
				}
			}
		}
	}
}

func TestScheduleShortHorizonStillPauses(t *testing.T) {
	t.Parallel()
	c := testScheduleConfig(7)
	c.Horizon = time.Second // shorter than the first pause would be
	s, err := NewSchedule(c)
	if err != nil {
		t.Fatal(err)
	}
	if s.Count(Pause) != 1 || s.Count(RestartRedis) != 1 {
		t.Fatalf("short schedule:\n%s", s)
	}
}

func TestScheduleRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []ScheduleConfig{
		{Horizon: 0, KillEvery: time.Second, PauseFor: time.Second, Slots: 1},
		{Horizon: time.Minute, KillEvery: 0, PauseFor: time.Second, Slots: 1},
		{Horizon: time.Minute, KillEvery: time.Second, PauseFor: 0, Slots: 1},
		{Horizon: time.Minute, KillEvery: time.Second, PauseFor: time.Second, Slots: 0},
	} {
		if _, err := NewSchedule(c); !errors.Is(err, ErrConfig) {
			t.Errorf("NewSchedule(%+v): %v, want ErrConfig", c, err)
		}
	}
}

func TestScheduleBrokerFaults(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 200; seed++ {
		plain := testScheduleConfig(seed)
		withBroker := plain
		withBroker.BrokerEvery, withBroker.BrokerPauseFor = 40*time.Second, 3*time.Second
		if seed%2 == 1 {
			// Longer than the horizon: only the kill and pause always added.
			withBroker.BrokerEvery = 10 * time.Minute
		}
		a, err := NewSchedule(plain)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewSchedule(withBroker)
		if err != nil {
			t.Fatal(err)
		}
		if a.Count(KillBroker)+a.Count(PauseBroker) != 0 {
			t.Fatalf("seed %d: broker faults without BrokerEvery:\n%s", seed, a)
		}
		if b.Count(KillBroker) < 1 || b.Count(PauseBroker) < 1 {
			t.Fatalf("seed %d: %d broker kills, %d broker pauses, want at least one each:\n%s",
				seed, b.Count(KillBroker), b.Count(PauseBroker), b)
		}
		var rest []Event
		for _, e := range b.Events {
			switch e.Action {
			case KillBroker:
				if e.For < 500*time.Millisecond || e.For > 2*time.Second {
					t.Fatalf("seed %d: %s: down outside 0.5s to 2s", seed, e)
				}
			case PauseBroker:
				if e.For != withBroker.BrokerPauseFor {
					t.Fatalf("seed %d: %s: want for=%s", seed, e, withBroker.BrokerPauseFor)
				}
			default:
				rest = append(rest, e)
				continue
			}
			if e.At < 0 || e.At >= withBroker.Horizon {
				t.Fatalf("seed %d: %s outside the horizon %s", seed, e, withBroker.Horizon)
			}
		}
		// The worker faults of a seed do not change with broker faults, so
		// that runs on the two brokers compare.
		if diff := cmp.Diff(a.Events, rest); diff != "" {
			t.Fatalf("seed %d: broker faults changed the other events (-without +with):\n%s", seed, diff)
		}
	}
	if _, err := NewSchedule(ScheduleConfig{Seed: 1, Horizon: time.Minute, KillEvery: time.Second, PauseFor: time.Second,
		Slots: 3, BrokerEvery: time.Second}); !errors.Is(err, ErrConfig) {
		t.Fatalf("broker faults without a pause length: %v, want ErrConfig", err)
	}
}

// TestSchedulePartitions: partitions come from a stream of their own (the
// other events of a seed are the same with and without them), within the
// horizon, the first six cycling through a worker cut off from Redis and
// Kafka, from Redis, then from Kafka, both ways.
func TestSchedulePartitions(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 100; seed++ {
		c := testScheduleConfig(seed)
		plain, err := NewSchedule(c)
		if err != nil {
			t.Fatal(err)
		}
		c.PartitionEvery, c.PartitionFor = 10*time.Second, 4*time.Second
		s, err := NewSchedule(c)
		if err != nil {
			t.Fatal(err)
		}
		var others, parts []Event
		for _, e := range s.Events {
			if e.Action == Partition {
				parts = append(parts, e)
			} else {
				others = append(others, e)
			}
		}
		if diff := cmp.Diff(plain.Events, others); diff != "" {
			t.Fatalf("seed %d: partitions changed the other events (-without +with):\n%s", seed, diff)
		}
		// 2 minutes at one every 10s on average: 8 to 24.
		if len(parts) < 8 || len(parts) > 24 || parts[0].At < c.PartitionEvery/2 {
			t.Fatalf("seed %d: %d partitions", seed, len(parts))
		}
		for i, want := range []Service{NetAll, NetRedis, NetKafka, NetAll, NetRedis, NetKafka} {
			if parts[i].Net != want || parts[i].Cut != Both {
				t.Fatalf("seed %d: partition %d is %s, want %s both ways", seed, i, parts[i], want)
			}
		}
		for _, e := range parts {
			if e.At >= c.Horizon || e.For != c.PartitionFor || e.Slot < 0 || e.Slot >= c.Slots ||
				e.Net&^NetAll != 0 || e.Net == 0 || e.Cut&^Both != 0 || e.Cut == 0 {
				t.Fatalf("seed %d: bad partition %s", seed, e)
			}
		}
	}
}

package chaos_test

import (
	"fmt"
	"os"
	"time"

	"github.com/leasehold/leasehold/internal/chaos"
)

// A fault schedule is a pure function of its seed and settings: printing it
// (seed first) is how a failing run is replayed.
func ExampleNewSchedule() {
	s, err := chaos.NewSchedule(chaos.ScheduleConfig{
		Seed:      42,
		Horizon:   20 * time.Second,
		KillEvery: 5 * time.Second,
		PauseFor:  5 * time.Second,
		Slots:     3,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("seed:", s.Seed)
	fmt.Println("kills:", s.Count(chaos.Kill) > 0, "pauses:", s.Count(chaos.Pause) > 0,
		"redis restarts:", s.Count(chaos.RestartRedis), "added:", s.Count(chaos.AddWorker), "removed:", s.Count(chaos.RemoveWorker))
	// Output:
	// seed: 42
	// kills: true pauses: true redis restarts: 1 added: 1 removed: 1
}

// The figures of a run, one `name=value unit` line each; Err fails the run
// when a must-be-zero figure is not zero.
func ExampleFigures_Write() {
	f := chaos.Figures{
		Seed: 7, JobsEnqueued: 3, JobsCompleted: 2, JobsLost: 1, CompensationsRun: 1, Takeovers: 1,
		TakeoverLatencies: []time.Duration{2500 * time.Millisecond}, RedisOutage: 1200 * time.Millisecond,
		Drain: 180 * time.Second, BrokerKills: 1, BrokerPauses: 1, BrokerOutage: 16 * time.Second,
	}
	_ = f.Write(os.Stdout)
	fmt.Println(f.Err())
	// Output:
	// jobs_enqueued=3 jobs
	// jobs_completed=2 jobs
	// jobs_lost=1 jobs
	// fenced_effects_duplicated=0 keys
	// unfenced_net_not_one=0 keys
	// zombie_writes_rejected=0 writes
	// compensations_run=1 refunds
	// takeovers=1 leases
	// takeover_latency_p50_ms=2500 ms
	// takeover_latency_p99_ms=2500 ms
	// redis_outage_ms=1200 ms
	// drain_ms=180000 ms
	// drain_unfinished=0 jobs
	// broker_kills=1 kills
	// broker_pauses=1 pauses
	// broker_outage_ms=16000 ms
	// partitions=0 partitions
	// partitions_redis=0 partitions
	// partitions_kafka=0 partitions
	// partitions_redis_kafka=0 partitions
	// seed=7 seed
	// chaos: invariant violated: jobs_lost=1
}

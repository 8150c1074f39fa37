package chaos

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestJudgePartitions times the takeover of a partitioned worker's lease
// against its old handler's cancellation, leaves out takeovers explained by
// a kill or by no partition, and sorts a zombie's late writes.
func TestJudgePartitions(t *testing.T) {
	t.Parallel()
	at := func(ms int64) time.Time { return time.Unix(1000, ms*int64(time.Millisecond)) }
	ns := func(ms int64) int64 { return at(ms).UnixNano() }
	ops := history(
		// k: w1 partitioned from Redis at 100ms, w2 takes over at 2000ms.
		hop{"w1", ns(0), ns(10), Op{Key: "k", Kind: OpClaim, Out: OpOutput{Code: ClaimAcquired, Fence: 10}}},
		hop{"w2", ns(1990), ns(2000), Op{Key: "k", Kind: OpClaim, Out: OpOutput{Code: ClaimTakeover, Fence: 11, Prev: 10}}},
		// j: w3 was killed, not partitioned.
		hop{"w3", ns(0), ns(10), Op{Key: "j", Kind: OpClaim, Out: OpOutput{Code: ClaimAcquired, Fence: 20}}},
		hop{"w2", ns(1990), ns(2000), Op{Key: "j", Kind: OpClaim, Out: OpOutput{Code: ClaimTakeover, Fence: 21, Prev: 20}}},
		// m: w1's claim answer was lost in the partition: no handler to time.
		hop{"w1", ns(150), ns(160), Op{Key: "m", Kind: OpClaim, Out: OpOutput{Code: ClaimAcquired, Fence: 30}}},
		hop{"w2", ns(2500), ns(2510), Op{Key: "m", Kind: OpClaim, Out: OpOutput{Code: ClaimTakeover, Fence: 31, Prev: 30}}},
	)
	ev := workerEvents{
		cancels: map[attempt]time.Time{{"k", 10}: at(1500), {"j", 20}: at(3000)},
		writes: []writeEvent{
			{worker: "w2", key: "k", fence: 11, began: at(2100), end: at(2110), outcome: "applied"},
			{worker: "w1", key: "k", fence: 10, began: at(2050), end: at(2060), outcome: "applied"},
			{worker: "w1", key: "k", fence: 10, began: at(2200), end: at(2210), outcome: "refused"},
		},
	}
	parts := []PartitionMark{
		{Worker: "w1", Net: NetAll, Cut: Both, From: at(100), To: at(4000)},
		{Worker: "w3", Net: NetKafka, Cut: Both, From: at(100), To: at(4000)},
	}
	kills := []KillMark{{Worker: "w3", At: at(50)}}
	v := judgePartitions(ops, ev, parts, kills)
	want := PartitionVerdict{Takeovers: 2, Measured: 1, OverlapMax: -500 * time.Millisecond,
		ZombieWrites: 2, ZombieWritesApplied: 1, ZombieWritesAfterNewer: 1,
		Closest: []TimedTakeover{{Key: "k", Fence: 10, Old: "w1", New: "w2", Cancelled: at(1500), Overlap: -500 * time.Millisecond}}}
	if !cmp.Equal(v, want) {
		t.Fatalf("verdict\n%+v\nwant\n%+v", v, want)
	}
	// A handler cancelled after the takeover answered is an overlap.
	ev.cancels[attempt{"k", 10}] = at(2100)
	if v := judgePartitions(ops, ev, parts, kills); v.OverlapMax != 100*time.Millisecond {
		t.Fatalf("overlap %s, want 100ms", v.OverlapMax)
	}
}

// TestReadWorkerEvents reads demo.transfer's debug lines as `worker run`
// writes them: a write that began and ended, one cut short by a kill (no
// end: unknown), and a cancellation.
func TestReadWorkerEvents(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "worker-1.log")
	log := `time=2026-11-24T04:38:24.123Z level=DEBUG msg="fenced write begins" key=k1 fence=10 began_us=1000
time=2026-11-24T04:38:24.124Z level=DEBUG msg="fenced write" key=k1 fence=10 began_us=1000 ended_us=1500 outcome=refused
time=2026-11-24T04:38:24.125Z level=DEBUG msg="transfer cancelled" key=k2 fence=20 at_us=2000 cause="lease lost"
time=2026-11-24T04:38:24.126Z level=DEBUG msg="fenced write begins" key=k2 fence=20 began_us=2500
time=1970-01-01T00:00:00.001Z level=WARN msg="lease lost" lease={i:7}:k2 fence=20 cause="lease: renewals failed until the local deadline"
time=2026-11-24T04:38:24.127Z level=DEBUG msg="transfer cancelled" key=k3 fence=30 at_us=3000 cause="lease lost"
time=1970-01-01T00:00:00.004Z level=WARN msg="lease lost" lease={i:7}:k3 fence=30 cause="lease: renewals failed until the local deadline"
=== chaos: start #2 of worker-1 at 2026-11-24T04:38:25Z
`
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	ev, err := readWorkerEvents(map[string]string{"worker-1": path})
	if err != nil {
		t.Fatal(err)
	}
	want := []writeEvent{
		{worker: "worker-1", key: "k1", fence: 10, began: time.UnixMicro(1000), end: time.UnixMicro(1500), outcome: "refused"},
		{worker: "worker-1", key: "k2", fence: 20, began: time.UnixMicro(2500), outcome: "unknown"},
	}
	if !slices.Equal(ev.writes, want) {
		t.Fatalf("writes %+v, want %+v", ev.writes, want)
	}
	// The earlier of the lease's local deadline and the handler's
	// cancellation counts.
	if got := ev.cancels[attempt{"k2", 20}]; !got.Equal(time.UnixMicro(1000)) {
		t.Fatalf("cancellation of k2 at %v, want the lease lost at %v", got, time.UnixMicro(1000))
	}
	if got := ev.cancels[attempt{"k3", 30}]; !got.Equal(time.UnixMicro(3000)) {
		t.Fatalf("cancellation of k3 at %v, want the handler's at %v", got, time.UnixMicro(3000))
	}
}

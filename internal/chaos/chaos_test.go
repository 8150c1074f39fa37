package chaos

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasehold/leasehold/internal/audit"
)

// TestChaosShortRun is the short seeded chaos run that `make test` includes:
// real dev-broker, AOF Redis, payment stub and worker processes, with kills,
// a zombie pause, a Redis restart, a worker added and removed, and network
// partitions of workers from Redis (from Kafka too on Apache Kafka: see
// TestChaosApacheRun), checked from
// PostgreSQL and the stub's ledger, and the Redis operations and fenced
// writes checked against the record's model (Porcupine). CHAOS_SEED
// replays a failing seed.
func TestChaosShortRun(t *testing.T) {
	// Not parallel: the chaos runs take both cores, and a starved run
	// misses its own timing (takeovers, the dev-broker group).
	dir := t.TempDir()
	bin := buildWorker(t, dir)
	c := Config{
		Seed:        envUint(t, "CHAOS_SEED", uint64(time.Now().UnixNano())),
		Jobs:        800,
		Workers:     3,
		KillEvery:   1500 * time.Millisecond,
		LeaseTTL:    time.Second,
		Duplicates:  0.2,
		Rate:        40,
		Concurrency: 8,
		// One job in ten stalls for 3s between its charge and its fenced
		// write, so that every worker has a few in flight when a pause or
		// a partition comes, and a zombie's write may be refused.
		SlowFraction: 0.1,
		Hold:         3 * time.Second,
		// About five partitions of a worker from Redis, each taking the
		// worker with the most jobs in flight. Redis only on the
		// dev-broker (Config.PartitionNets); TestChaosApacheRun cuts Kafka
		// too.
		PartitionEvery: 4 * time.Second,
		PartitionNets:  []Service{NetRedis},
		// Four jobs cancelled while they run, and the job type paused
		// once for two lease TTLs, as an operator would.
		Cancels:    4,
		TypePauses: 1,
		Drain:      90 * time.Second,
		Worker:     bin,
		Dir:        filepath.Join(dir, "run"),
	}
	f, progress := runChaos(t, &c)
	// The schedule must really have injected its faults.
	for _, want := range []string{"msg=killed", "msg=paused", `msg="redis restarted"`, "msg=added", "msg=partitioned", "msg=healed",
		`msg="type paused"`, `msg="type resumed"`} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress log lacks %s:\n%s", want, progress)
		}
	}
	wantCancels(t, f, progress)
	if f.RedisOutage <= 0 {
		t.Errorf("redis_outage_ms = %s, want the restart measured", f.RedisOutage)
	}
	wantPartitions(t, f, progress)
}

// wantPartitions fails the test unless the run partitioned a worker from
// Redis, the history was checked linearizable and worker audit read every
// record
// (runChaos has already failed a positive overlap or an illegal history).
func wantPartitions(t *testing.T, f Figures, progress string) {
	t.Helper()
	redis := 0
	for _, p := range f.Partitions {
		if p.Net&NetRedis != 0 {
			redis++
		}
	}
	if redis == 0 {
		t.Errorf("no worker was partitioned from Redis:\n%s", progress)
	}
	// A takeover of a partitioned worker's lease is timed when one
	// happens (runChaos fails a positive overlap); a short run under CI's
	// load does not always hold one (the 20,000-job runs in docs/chaos.md
	// time dozens), so it is logged, not required.
	if v := f.PartitionVerdict; v != nil {
		t.Logf("partition takeovers timed: %d", v.Measured)
	}
	if h := f.History; h == nil || h.Result != porcupine.Ok || h.Ops == 0 {
		t.Errorf("history not checked linearizable: %+v", h)
	}
	if a := f.Audit; a == nil || a.Records < int64(f.JobsEnqueued) || f.JobsEnqueued == 0 {
		t.Errorf("the jobs topic not audited: %+v", a)
	}
}

// wantCancels fails the test unless the run cancelled a running job and
// worker audit counted each cancelled key as cancelled.
func wantCancels(t *testing.T, f Figures, progress string) {
	t.Helper()
	if c := f.Controls; c == nil || c.CancelsRequested == 0 || f.JobsCancelled == 0 || c.TypePauses == 0 {
		// What became of each cancel: requested, missed, or beaten by its
		// attempt's commit.
		var lines []string
		for l := range strings.Lines(progress) {
			if strings.Contains(l, "cancel") || strings.Contains(l, "type paused") {
				lines = append(lines, l)
			}
		}
		t.Errorf("no job cancelled while it ran, or the type never paused: %+v, %d cancelled; from the progress log:\n%s",
			c, f.JobsCancelled, strings.Join(lines, ""))
	}
	if a := f.Audit; a == nil || a.Counts[audit.Cancelled] != int64(f.JobsCancelled) {
		t.Errorf("audit %+v: want %d cancelled records", a, f.JobsCancelled)
	}
}

// TestChaosSoak is a short `make soak`: the chaos schedule at a steady pace
// for two minutes with a 20s retention, the workers' RSS and goroutines and
// Redis's memory and keys sampled every 5s and checked flat after the
// warm-up (SoakBound), as well as every figure of a chaos run.
func TestChaosSoak(t *testing.T) {
	// Not parallel: the chaos runs take both cores, and a starved run
	// misses its own timing (takeovers, the dev-broker group).
	dir := t.TempDir()
	bin := buildWorker(t, dir)
	c := Config{
		Seed:         envUint(t, "CHAOS_SEED", uint64(time.Now().UnixNano())),
		Workers:      3,
		KillEvery:    5 * time.Second,
		LeaseTTL:     time.Second,
		Rate:         30,
		Concurrency:  8,
		SlowFraction: 0.05,
		Retention:    20 * time.Second,
		// A 20s retention lets the soak's records expire within its two
		// minutes, so it must outlast every redelivery: with a kill every 5s
		// and the derived 6s session (1s lease TTL) the group rebalances
		// nearly all the time, committed offsets lag, and records came back
		// after their idempotency records had expired (31 keys run twice in
		// one run). The soak keeps the short session it was sized for; the
		// other chaos runs go with the workers' derived defaults.
		SessionTimeout:    1500 * time.Millisecond,
		HeartbeatInterval: 300 * time.Millisecond,
		PartitionNets:     []Service{NetRedis}, // the dev-broker: see TestChaosShortRun
		Soak:              2 * time.Minute,
		SoakSample:        5 * time.Second,
		Drain:             90 * time.Second,
		Worker:            bin,
		Dir:               filepath.Join(dir, "run"),
	}
	f, _ := runChaos(t, &c)
	if f.Soak == nil || f.Soak.Samples < 8 {
		t.Fatalf("soak figures %+v, want at least 8 samples after the warm-up", f.Soak)
	}
	if f.Soak.RSSFirst == 0 || f.Soak.GoroutinesFirst == 0 || f.Soak.KeysFirst == 0 || f.Soak.UsedMemoryFirst == 0 {
		t.Fatalf("soak figures %+v: a resource was never read", f.Soak)
	}
}

// TestChaosApacheRun is the short seeded chaos run against a real Apache
// Kafka broker (internal/kafkabroker): the faults of TestChaosShortRun's
// kind on 3,000 jobs, plus the broker killed (-9) and restarted on its data
// and the broker paused (SIGSTOP) for longer than the workers' session
// timeout. It fails, never skips, when java or the broker cannot start.
// CHAOS_SEED replays a failing seed.
func TestChaosApacheRun(t *testing.T) {
	// Not parallel: the chaos runs take both cores, and a starved run
	// misses its own timing (takeovers, the dev-broker group).
	dir := t.TempDir()
	bin := buildWorker(t, dir)
	c := Config{
		Seed:        envUint(t, "CHAOS_SEED", uint64(time.Now().UnixNano())),
		Jobs:        3000,
		Workers:     3,
		KillEvery:   3 * time.Second,
		LeaseTTL:    time.Second,
		Duplicates:  0.2,
		Rate:        100,
		Concurrency: 8,
		// One job in twenty stalls for 3s between its charge and its
		// fenced write, so that a worker pause or partition catches some
		// and a zombie's write may be refused.
		SlowFraction: 0.05,
		Hold:         3 * time.Second,
		// About five partitions, twice from Redis and Kafka (see
		// TestChaosShortRun).
		PartitionEvery: 6 * time.Second,
		// Within the 30s fault phase, the kill and the pause the schedule
		// always holds, rarely more: a restart takes 10 to 15s here.
		BrokerFaultEvery: 40 * time.Second,
		Kafka:            KafkaApache,
		// A bound, not a wait: the drain ends when every transfer is in
		// (about a minute on a quiet machine). Beside other test runs at
		// load 29 it moved at 25 jobs/s after a 46s broker outage and
		// timed out at 2 minutes with 71 of 3,000 left.
		Drain:  4 * time.Minute,
		Worker: bin,
		Dir:    filepath.Join(dir, "run"),
	}
	f, progress := runChaos(t, &c, filepath.Join(c.Dir, "kafka"))
	// The broker faults must really have happened, not only been scheduled.
	if f.BrokerKills < 1 || f.BrokerPauses < 1 {
		t.Fatalf("broker_kills=%d broker_pauses=%d, want at least one of each:\n%s",
			f.BrokerKills, f.BrokerPauses, progress)
	}
	for _, want := range []string{`msg="broker killed"`, `msg="broker restarted"`, `msg="broker paused"`,
		`msg="broker resumed"`, "msg=killed", "msg=paused", `msg="redis restarted"`} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress log lacks %s:\n%s", want, progress)
		}
	}
	if f.BrokerOutage < c.BrokerPause {
		t.Errorf("broker_outage_ms = %s, want at least the pause %s", f.BrokerOutage, c.BrokerPause)
	}
	wantPartitions(t, f, progress)
}

// runChaos finishes c's settings (in place, so that the caller sees the
// defaults) and runs it, logging the seed (with the
// command that replays it) and the figures. It fails the test, with the
// progress log and the process logs under c.Dir and dumpDirs, when the run
// fails or does not complete every job; else it returns the figures and the
// progress log.
func runChaos(t *testing.T, c *Config, dumpDirs ...string) (Figures, string) {
	t.Helper()
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	t.Logf("seed=%d (replay: CHAOS_SEED=%d go test -run %s ./internal/chaos)", c.Seed, c.Seed, t.Name())
	var progress bytes.Buffer
	f, err := Run(t.Context(), *c, slog.New(slog.NewTextHandler(&progress, nil)))
	var figures strings.Builder
	_ = f.Write(&figures)
	t.Logf("figures:\n%s", figures.String())
	if err != nil {
		t.Logf("progress:\n%s", progress.String())
		for _, d := range append([]string{c.Dir}, dumpDirs...) {
			dumpLogs(t, d)
		}
		t.Fatalf("chaos run (kafka %s): %v", c.Kafka, err)
	}
	if f.JobsEnqueued != c.Jobs || f.JobsCompleted+f.JobsCancelled != c.Jobs {
		t.Fatalf("enqueued %d, completed %d and cancelled %d, want %d each", f.JobsEnqueued, f.JobsCompleted, f.JobsCancelled, c.Jobs)
	}
	return f, progress.String()
}

func envUint(t *testing.T, name string, def uint64) uint64 {
	t.Helper()
	var c Config
	v := c.envUint(name, def)
	if err := errors.Join(c.envErrs...); err != nil {
		t.Fatal(err)
	}
	return v
}

// dumpLogs prints the tail of every child log of a failed run.
func dumpLogs(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Logf("--- %s (tail)\n%s", filepath.Base(l), b)
	}
}

package chaos

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestChaosApacheClusterRun is the short seeded chaos run against three
// Apache Kafka nodes (CHAOS_KAFKA=apache-cluster): the worker faults of
// TestChaosApacheRun, and kills (-9, then a restart on the node's data) that
// go in turn to the leader of a jobs partition, the group's coordinator and
// the active controller, and a partition leader paused past the session
// timeout. The same figures must be zero, and every job done.
func TestChaosApacheClusterRun(t *testing.T) {
	// Not parallel: the chaos runs take both cores.
	dir := t.TempDir()
	bin := buildWorker(t, dir)
	c := Config{
		Seed:             envUint(t, "CHAOS_SEED", uint64(time.Now().UnixNano())),
		Jobs:             2000,
		Workers:          3,
		KillEvery:        3 * time.Second,
		LeaseTTL:         time.Second,
		Duplicates:       0.2,
		Rate:             100,
		Concurrency:      8,
		SlowFraction:     0.05,
		Hold:             3 * time.Second,
		PartitionEvery:   6 * time.Second,
		BrokerFaultEvery: 12 * time.Second,
		Kafka:            KafkaApacheCluster,
		Drain:            3 * time.Minute,
		Worker:           bin,
		Dir:              filepath.Join(dir, "run"),
	}
	f, progress := runChaos(t, &c, filepath.Join(c.Dir, "kafka"))
	if f.BrokerKills < 1 || f.BrokerPauses < 1 {
		t.Fatalf("broker_kills=%d broker_pauses=%d, want at least one of each:\n%s", f.BrokerKills, f.BrokerPauses, progress)
	}
	for _, want := range []string{`msg="broker killed".* role=partition-leader`, `msg="broker restarted"`,
		`msg="broker paused".* role=partition-leader`, `msg="broker resumed"`} {
		if !regexp.MustCompile(want).MatchString(progress) {
			t.Errorf("progress log lacks %s:\n%s", want, progress)
		}
	}
	for _, role := range clusterRoles {
		n := len(regexp.MustCompile(`msg="broker killed".* role=`+role).FindAllString(progress, -1))
		t.Logf("kills_%s=%d", strings.ReplaceAll(role, "-", "_"), n)
	}
}

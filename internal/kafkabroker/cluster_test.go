package kafkabroker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/kafkabroker"
)

// TestClusterFailover starts three nodes, produces with acks=all to a topic
// at replication 3 and min.insync.replicas 2, kills the partition's leader
// with SIGKILL and produces and consumes on after the election, every
// acknowledged record kept; then stops a second node and checks that an
// acks=all produce is refused with NOT_ENOUGH_REPLICAS, not acknowledged by
// the last replica alone.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test needs three Kafka brokers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := kafkabroker.StartCluster(ctx, kafkabroker.ClusterConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster_start_ms=%d ms", time.Since(start).Milliseconds())
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
		defer scancel()
		_ = c.Stop(sctx)
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic("t"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "t"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	produce := func(cl *kgo.Client, from, n int) error {
		for i := from; i < from+n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := produce(cl, 0, 10); err != nil {
		t.Fatalf("produce: %v", err)
	}
	old, err := c.Leader(ctx, "t", 0)
	if err != nil || old < 0 {
		t.Fatalf("leader of t/0: %d, %v", old, err)
	}
	if got := isr(ctx, t, adm); got != 3 {
		t.Fatalf("t/0 has %d in-sync replicas, want 3", got)
	}

	killed := time.Now()
	c.Node(old).Kill()
	if err := produce(cl, 10, 10); err != nil {
		t.Fatalf("produce after the leader (node %d) was killed: %v", old, err)
	}
	t.Logf("produce_after_leader_kill_ms=%d ms", time.Since(killed).Milliseconds())
	now, err := c.Leader(ctx, "t", 0)
	if err != nil || now == old || now < 0 {
		t.Fatalf("leader after the kill: %d (was %d), %v", now, old, err)
	}
	if got := readAll(ctx, t, c.Addrs()); got != 20 {
		t.Fatalf("read %d records after failover, want the 20 acknowledged", got)
	}

	// Stop the follower left cleanly: it leaves the in-sync replicas, and
	// the leader alone is fewer than min.insync.replicas.
	for _, b := range c.Nodes() {
		if id := b.NodeID(); id != old && id != now {
			sctx, scancel := context.WithTimeout(ctx, time.Minute)
			err := b.Stop(sctx)
			scancel()
			if err != nil {
				t.Fatalf("stop node %d: %v", id, err)
			}
		}
	}
	strict, err := kgo.NewClient(kgo.SeedBrokers(c.Node(now).Addr()), kgo.DefaultProduceTopic("t"), kgo.RecordRetries(3))
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	if err := produce(strict, 20, 1); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all produce with one of three replicas left: %v, want NOT_ENOUGH_REPLICAS", err)
	}
}

// isr returns the number of in-sync replicas of t/0.
func isr(ctx context.Context, t *testing.T, adm *kadm.Client) int {
	t.Helper()
	d, err := adm.ListTopics(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	return len(d["t"].Partitions[0].ISR)
}

// readAll reads t/0 from the start up to its end offset and returns the
// number of records.
func readAll(ctx context.Context, t *testing.T, addrs []string) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	end, err := kadm.NewClient(cl).ListEndOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	o, _ := end.Lookup("t", 0)
	n := 0
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for int64(n) < o.Offset && rctx.Err() == nil {
		n += cl.PollFetches(rctx).NumRecords()
	}
	return n
}

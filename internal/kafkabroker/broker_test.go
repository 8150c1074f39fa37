package kafkabroker_test

import (
	"context"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/kafkabroker"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// TestVersionMatchesCompose keeps the broker the tests run (tools/kafka/pom.xml)
// the same as the one deploy/docker-compose.yml deploys.
func TestVersionMatchesCompose(t *testing.T) {
	pom, err := os.ReadFile("../../tools/kafka/pom.xml")
	if err != nil {
		t.Fatal(err)
	}
	compose, err := os.ReadFile("../../deploy/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	pv := regexp.MustCompile(`<kafka.version>([^<]+)</kafka.version>`).FindSubmatch(pom)
	cv := regexp.MustCompile(`image: apache/kafka:(\S+)`).FindSubmatch(compose)
	if pv == nil || cv == nil {
		t.Fatalf("version not found: pom %q, compose %q", pv, cv)
	}
	if string(pv[1]) != string(cv[1]) {
		t.Errorf("tools/kafka/pom.xml pins Kafka %s, deploy/docker-compose.yml runs %s", pv[1], cv[1])
	}
}

// TestBrokerLifecycle starts a broker, writes a record, kills it with SIGKILL,
// restarts it on its data directory and reads the record back; then pauses it
// and checks that a request times out until it is resumed.
func TestBrokerLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test needs a Kafka broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	b, err := kafkabroker.Start(ctx, kafkabroker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		_ = b.Stop(sctx)
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("t"), kgo.RequestTimeoutOverhead(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("kept")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	b.Kill()
	if b.Running() {
		t.Fatal("running after Kill")
	}
	if err := b.Restart(ctx); err != nil {
		t.Fatalf("restart on the same data dir: %v", err)
	}
	end, err := adm.ListEndOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := end.Lookup("t", 0); o.Offset != 1 {
		t.Fatalf("end offset after kill and restart = %d (err %v), want 1: the record was lost", o.Offset, o.Err)
	}

	if err := b.Pause(); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = adm.ListEndOffsets(pctx, "t")
	pcancel()
	if err == nil {
		t.Error("a paused broker answered")
	}
	if err := b.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.ListEndOffsets(ctx, "t"); err != nil {
		t.Errorf("after resume: %v", err)
	}
}

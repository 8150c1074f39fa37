package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/leasehold/leasehold/internal/kafkabroker"
)

// Kafka is a Kafka cluster for one test: an in-process kfake cluster, the
// shared Apache Kafka broker of the test binary (TEST_KAFKA=apache), its
// shared three-node cluster (TEST_KAFKA=apache-cluster), or the cluster that
// KAFKA_BROKERS names (comma-separated host:port list). Topics made with
// [Kafka.Topic] carry a random suffix so that tests sharing a real cluster
// do not see each other's records.
type Kafka struct {
	t       testing.TB
	brokers []string
	cluster *kfake.Cluster // nil against a real cluster
	rf      int16          // replication factor of the topics the test makes
}

// KafkaEnv names the environment variable that chooses the tests' Kafka:
// "kfake" (or empty) for an in-process kfake cluster per test, "apache" for
// one Apache Kafka broker (tools/kafka) started by the first test that needs
// it and shared by every test of the binary until [Main] stops it,
// "apache-cluster" for three Apache Kafka nodes shared the same way, where
// topics have replication 3 and min.insync.replicas 2. KAFKA_BROKERS, when
// set, wins over all.
const KafkaEnv = "TEST_KAFKA"

// StartKafka returns the test's Kafka: the KAFKA_BROKERS cluster if set, the
// shared Apache Kafka broker if TEST_KAFKA=apache, else a kfake cluster with
// three brokers closed at cleanup.
func StartKafka(t testing.TB) *Kafka {
	t.Helper()
	SkipShort(t, "Kafka")
	if env := strings.TrimSpace(os.Getenv("KAFKA_BROKERS")); env != "" {
		return realKafka(t, strings.Split(env, ","))
	}
	switch kind := os.Getenv(KafkaEnv); kind {
	case "", "kfake":
	case "apache":
		return realKafka(t, []string{sharedApache(t)})
	case "apache-cluster":
		k := realKafka(t, sharedApacheCluster(t))
		k.rf = 3
		return k
	default:
		t.Fatalf("testkit: %s=%q: want kfake, apache or apache-cluster", KafkaEnv, kind)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.DefaultNumPartitions(1))
	if err != nil {
		t.Fatalf("testkit: start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return &Kafka{t: t, brokers: c.ListenAddrs(), cluster: c, rf: 1}
}

// IsFake reports whether the tests run on kfake (neither KAFKA_BROKERS nor
// TEST_KAFKA=apache or apache-cluster is set), for the few tests that reach
// into kfake.
func IsFake() bool {
	kind := os.Getenv(KafkaEnv)
	return strings.TrimSpace(os.Getenv("KAFKA_BROKERS")) == "" && kind != "apache" && kind != "apache-cluster"
}

func realKafka(t testing.TB, brokers []string) *Kafka {
	t.Helper()
	k := &Kafka{t: t, brokers: brokers, rf: 1}
	cl := k.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("testkit: Kafka at %s does not answer: %v", strings.Join(brokers, ","), err)
	}
	return k
}

var apache struct {
	once   sync.Once
	broker *kafkabroker.Broker
	err    error
}

// sharedApache starts the test binary's Apache Kafka broker on first use and
// returns its address.
func sharedApache(t testing.TB) string {
	t.Helper()
	apache.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		apache.broker, apache.err = kafkabroker.Start(ctx, kafkabroker.Config{})
	})
	if apache.err != nil {
		t.Fatalf("testkit: start Apache Kafka (TEST_KAFKA=apache): %v", apache.err)
	}
	return apache.broker.Addr()
}

var apacheCluster struct {
	once    sync.Once
	cluster *kafkabroker.Cluster
	err     error
}

// sharedApacheCluster starts the test binary's three-node Apache Kafka
// cluster on first use and returns its addresses.
func sharedApacheCluster(t testing.TB) []string {
	t.Helper()
	apacheCluster.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		apacheCluster.cluster, apacheCluster.err = kafkabroker.StartCluster(ctx, kafkabroker.ClusterConfig{})
	})
	if apacheCluster.err != nil {
		t.Fatalf("testkit: start an Apache Kafka cluster (TEST_KAFKA=apache-cluster): %v", apacheCluster.err)
	}
	return apacheCluster.cluster.Addrs()
}

// StartApacheKafka starts an Apache Kafka broker of the test's own (a
// cluster of its own, unlike the shared one of TEST_KAFKA=apache), stopped at
// cleanup: for a test that needs a second, independent cluster.
func StartApacheKafka(t testing.TB) *Kafka {
	t.Helper()
	SkipShort(t, "Apache Kafka")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := kafkabroker.Start(ctx, kafkabroker.Config{})
	if err != nil {
		t.Fatalf("testkit: start Apache Kafka: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = b.Stop(ctx)
	})
	return realKafka(t, []string{b.Addr()})
}

// Main runs m's tests and then stops what the package's tests shared (the
// Apache Kafka broker). Wrap m with it in TestMain:
//
//	goleak.VerifyTestMain(testkit.Main(m))
func Main(m *testing.M) interface{ Run() int } { return mainM{m} }

type mainM struct{ m *testing.M }

func (w mainM) Run() int {
	code := w.m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if apache.broker != nil {
		if err := apache.broker.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "testkit:", err)
		}
	}
	if apacheCluster.cluster != nil {
		if err := apacheCluster.cluster.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "testkit:", err)
		}
	}
	return code
}

// Brokers returns the seed broker addresses.
func (k *Kafka) Brokers() []string { return append([]string(nil), k.brokers...) }

// Fake returns the kfake cluster, or nil against a real cluster.
func (k *Kafka) Fake() *kfake.Cluster { return k.cluster }

// Client returns a client seeded with the cluster's brokers plus opts,
// closed at cleanup.
func (k *Kafka) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("testkit: kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Topic creates a topic named base plus a random suffix with the given
// partitions and returns its name.
func (k *Kafka) Topic(t testing.TB, base string, partitions int32) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := base + "-" + hex.EncodeToString(b[:])
	k.CreateTopic(t, name, partitions)
	return name
}

// CreateTopic creates the topic name with the given partitions, at
// replication 3 on TEST_KAFKA=apache-cluster (min.insync.replicas 2, the
// cluster's default), else 1.
func (k *Kafka) CreateTopic(t testing.TB, name string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(k.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, k.rf, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("testkit: create topic %s: %v", name, err)
	}
	if k.cluster == nil {
		k.waitEveryBroker(t, name, partitions)
	}
}

// waitEveryBroker waits until each of a real cluster's brokers lists topic
// with a leader for each partition: a broker learns of a new topic from the
// controller a moment after the create returns (seconds on a loaded
// machine), and a worker that asks it first would find the topic missing.
// A single KRaft broker too: its metadata cache applies the controller's
// record after CreateTopics has answered.
func (k *Kafka) waitEveryBroker(t testing.TB, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, addr := range k.brokers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatalf("testkit: kafka client: %v", err)
		}
		for !listsTopic(ctx, cl, topic, partitions) {
			if ctx.Err() != nil {
				cl.Close()
				t.Fatalf("testkit: broker %s does not list topic %s: %v", addr, topic, ctx.Err())
			}
			time.Sleep(100 * time.Millisecond)
		}
		cl.Close()
	}
}

// listsTopic asks cl's seed broker itself whether it lists topic with a
// leader for each of its partitions.
func listsTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32) bool {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].RetriableRequest(rctx, req)
	if err != nil {
		return false
	}
	topics := resp.(*kmsg.MetadataResponse).Topics
	if len(topics) != 1 || topics[0].ErrorCode != 0 || len(topics[0].Partitions) != int(partitions) {
		return false
	}
	for _, p := range topics[0].Partitions {
		if p.ErrorCode != 0 || p.Leader < 0 {
			return false
		}
	}
	return true
}

// Committed returns the group's committed offsets for topic, by partition.
func (k *Kafka) Committed(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(k.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.FetchOffsets(ctx, group)
	// No group yet, or a group whose coordinator is not ready yet (a real
	// broker answers COORDINATOR_NOT_AVAILABLE, a retriable error, while it
	// loads): nothing is committed for it yet.
	if errors.Is(err, kerr.GroupIDNotFound) || kerr.IsRetriable(err) {
		return map[int32]int64{}
	}
	if err != nil {
		t.Fatalf("testkit: fetch offsets of %s: %v", group, err)
	}
	out := make(map[int32]int64)
	for p, o := range resp[topic] {
		if o.Err == nil {
			out[p] = o.At
		}
	}
	return out
}

// EndOffsets returns the topic's end offsets (the next offset to be
// written), by partition.
func (k *Kafka) EndOffsets(t testing.TB, topic string) map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(k.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("testkit: end offsets of %s: %v", topic, err)
	}
	out := make(map[int32]int64)
	resp.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			out[o.Partition] = o.Offset
		}
	})
	return out
}

// ReadAll consumes topic from the start until every partition reaches its
// end offset as of the call, and returns the records.
func (k *Kafka) ReadAll(t testing.TB, topic string) []*kgo.Record {
	t.Helper()
	end := k.EndOffsets(t, topic)
	want := int64(0)
	for _, o := range end {
		want += o
	}
	cl := k.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("testkit: read %s: got %d of %d records: %v", topic, len(out), want, err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// RecreateTopic deletes topic and creates it again with the given
// partitions, waiting until the brokers list it under a new topic ID.
func (k *Kafka) RecreateTopic(t testing.TB, topic string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(k.Client(t))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	before, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	oldID := before[topic].ID
	resp, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := adm.CreateTopic(ctx, partitions, k.rf, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) || ctx.Err() != nil {
			t.Fatalf("create %s again: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		got, err := adm.ListTopics(ctx, topic)
		if err == nil {
			if d := got[topic]; d.Err == nil && d.ID != oldID && len(d.Partitions) == int(partitions) {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s not listed under a new topic ID: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

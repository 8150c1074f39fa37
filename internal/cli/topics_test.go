package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestTopicsCreateDescribeCheck: on a cluster without the worker's topics,
// `topics check` names both as problems and exits 1; `topics create` makes
// them (the dead-letter topic with its retention and size limit) and
// checks them; `describe` shows them; a second create leaves them as they
// are.
func TestTopicsCreateDescribeCheck(t *testing.T) {
	t.Parallel()
	k := testkit.StartKafka(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	topic := "cli-topics-" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := map[string]string{"LEASEHOLD_BROKERS": strings.Join(k.Brokers(), ","), "LEASEHOLD_TOPICS": topic}

	r := run(ctx, t, env, "topics", "check")
	if r.code != 1 || strings.Count(r.stdout, "does not exist") != 2 || !strings.Contains(r.stderr, "2 problems") {
		t.Fatalf("check before create: want exit 1 and both topics missing: %+v", r)
	}

	r = run(ctx, t, env, "topics", "create", "--partitions", "3")
	if r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	for _, want := range []string{"created  " + topic + ".dlq: 1 partitions", "created  " + topic + ": 3 partitions",
		"retention.ms=2592000000", "max.message.bytes=1114112", "ok       " + topic + ": job topic, 3 partitions"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("create output lacks %q:\n%s", want, r.stdout)
		}
	}
	details, err := kadm.NewClient(k.Client(t)).ListTopics(ctx, topic, topic+".dlq")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(details[topic].Partitions); n != 3 {
		t.Errorf("%s has %d partitions, want 3", topic, n)
	}

	r = run(ctx, t, env, "topics", "describe")
	if r.code != 0 || !strings.Contains(r.stdout, topic+" (job topic): 3 partitions") ||
		!strings.Contains(r.stdout, topic+".dlq (dead-letter topic): 1 partitions") {
		t.Errorf("describe: %+v", r)
	}
	if r := run(ctx, t, env, "topics", "check"); r.code != 0 || strings.Contains(r.stdout, "problem") {
		t.Errorf("check after create: %+v", r)
	}
	if r := run(ctx, t, env, "topics", "create"); r.code != 0 || strings.Count(r.stdout, "exists ") != 2 {
		t.Errorf("second create: want both left as they are: %+v", r)
	}
}

func TestTopicsUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := map[string]string{"LEASEHOLD_BROKERS": "127.0.0.1:1"}
	wantFailure(t, run(ctx, t, env, "topics"), 2, "want 'topics create'")
	wantFailure(t, run(ctx, t, nil, "topics", "check"), 2, "no Kafka brokers")
	wantFailure(t, run(ctx, t, env, "topics", "create", "--replication-factor", "1", "--min-insync-replicas", "2"), 2, "min.insync.replicas 2")
	wantFailure(t, run(ctx, t, env, "topics", "create", "--config", "retention.ms"), 2, "want key=value")
	wantFailure(t, run(ctx, t, env, "topics", "create", "--partitions", "0"), 2, "want 1 to 10000")
}

// TestTopicFindings judges topic states without a broker: what check calls
// a problem (worker run refuses, or the worker cannot dead-letter) and what
// only a warning.
func TestTopicFindings(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	state := func(dlq bool, rf, isr int, configs map[string]string) topicState {
		s := topicState{topicPlan: topicPlan{name: "t", dlq: dlq}, exists: true, configs: map[string]kadm.Config{}}
		s.detail.Partitions = kadm.PartitionDetails{0: {Leader: 1, Replicas: make([]int32, rf), ISR: make([]int32, isr)}}
		for k, v := range configs {
			s.configs[k] = kadm.Config{Key: k, Value: str(v)}
		}
		return s
	}
	good := map[string]string{"min.insync.replicas": "2", "max.message.bytes": "1114112"}
	for _, tc := range []struct {
		name    string
		state   topicState
		brokers int
		problem bool
		want    string // "" for no finding
	}{
		{"missing", topicState{topicPlan: topicPlan{name: "t"}}, 3, true, "does not exist"},
		{"unauthorized", topicState{topicPlan: topicPlan{name: "t"}, exists: true, detail: kadm.TopicDetail{Err: kerr.TopicAuthorizationFailed}}, 3, true, "refuses to start"},
		{"good at 3", state(true, 3, 3, good), 3, false, ""},
		{"single broker", state(false, 1, 1, map[string]string{"min.insync.replicas": "1"}), 1, false, ""},
		{"dlq min isr above replicas", state(true, 1, 1, map[string]string{"min.insync.replicas": "2"}), 1, true, "no record can be dead-lettered"},
		{"jobs min isr above replicas", state(false, 2, 2, map[string]string{"min.insync.replicas": "3"}), 3, true, "no job can be enqueued"},
		{"rf 1 on 3", state(false, 1, 1, nil), 3, false, "replication factor 1 on 3 brokers"},
		{"rf 2 on 3", state(false, 2, 2, map[string]string{"min.insync.replicas": "1"}), 3, false, "replication factor 2 on 3 brokers"},
		{"min isr 1 at 3", state(false, 3, 3, map[string]string{"min.insync.replicas": "1"}), 3, false, "acknowledged once one replica"},
		{"compacted", state(false, 3, 3, map[string]string{"min.insync.replicas": "2", "cleanup.policy": "compact"}), 3, false, "compaction"},
		{"unclean", state(false, 3, 3, map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}), 3, false, "unclean"},
		{"small dlq", state(true, 3, 3, map[string]string{"min.insync.replicas": "2", "max.message.bytes": "1048588"}), 3, false, "stand-in"},
		{"isr below min", state(false, 3, 1, map[string]string{"min.insync.replicas": "2"}), 3, false, "refused now"},
	} {
		fs := topicFindings([]topicState{tc.state}, tc.brokers)
		if tc.want == "" {
			if len(fs) != 0 {
				t.Errorf("%s: want no finding, got %+v", tc.name, fs)
			}
			continue
		}
		if len(fs) != 1 || fs[0].problem != tc.problem || !strings.Contains(fs[0].msg, tc.want) {
			t.Errorf("%s: want one finding (problem %v) containing %q, got %+v", tc.name, tc.problem, tc.want, fs)
		}
	}
}

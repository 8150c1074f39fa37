package leasehold

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/leasehold/leasehold/internal/testkit"
)

func TestParseGroupProtocol(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]GroupProtocol{"": GroupProtocolClassic, "classic": GroupProtocolClassic,
		"consumer": GroupProtocolConsumer} {
		if got, err := ParseGroupProtocol(in); err != nil || got != want {
			t.Errorf("ParseGroupProtocol(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseGroupProtocol("cooperative"); !errors.Is(err, ErrGroupProtocol) {
		t.Errorf("ParseGroupProtocol(cooperative): err = %v, want ErrGroupProtocol", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	if _, err := New(rdb, WithGroupProtocol("KIP-848")); !errors.Is(err, ErrGroupProtocol) {
		t.Errorf("New with an unknown protocol: err = %v, want ErrGroupProtocol", err)
	}
}

// TestConsumerGroupProtocolTakeover runs two workers in a KIP-848 group
// (WithGroupProtocol(GroupProtocolConsumer)): the broker lists the group as
// a "consumer" group, the worker has set the group's session timeout, and
// when one worker freezes (every connection, Kafka and Redis, held: it never
// leaves the group) the coordinator evicts it after that session timeout, the
// survivor takes its keys over and every job runs to completion once.
func TestConsumerGroupProtocolTakeover(t *testing.T) {
	h := setup(t, 4)
	const (
		jobs   = 12
		ttl    = 2 * time.Second
		jobLen = 4 * time.Second
	)
	session := SessionTimeoutFor(ttl) // 6s: the worker writes it on the group
	fx := newEffects()
	reg := func(w *Worker) { must(t, w.Register("test.long", sleeper(fx, jobLen, 10))) }
	group := []Opt{WithGroupProtocol(GroupProtocolConsumer), WithLeaseTTL(ttl), WithConcurrency(jobs),
		WithHeartbeatThrottle(200 * time.Millisecond)}

	gate := testkit.NewGate()
	shared := h.rdb.(*redis.Client).Options()
	gated := redis.NewClient(&redis.Options{Addr: shared.Addr, DB: shared.DB, Dialer: gate.DialContext, MaxRetries: -1,
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = gated.Close() })
	doomed := h.start(t, gated, reg, append(group, WithKafka(kgo.Dialer(gate.DialContext)))...)
	survivor := h.start(t, h.rdb, reg, group...)

	cl := h.kafka.Client(t)
	adm := kadm.NewClient(cl)
	testkit.Eventually(t, 60*time.Second, "the group listed as a KIP-848 consumer group", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		groups, err := adm.ListGroupsByType(ctx, []string{"consumer"})
		_, ok := groups[h.group]
		return err == nil && ok
	})
	if got := groupConfig(t, cl, h.group, "consumer.session.timeout.ms"); got != fmt.Sprint(session.Milliseconds()) {
		t.Fatalf("group consumer.session.timeout.ms = %q, want %d", got, session.Milliseconds())
	}
	testkit.Eventually(t, 60*time.Second, "both workers assigned partitions by the coordinator", func() bool {
		return assignedMembers(cl, h.group) == 2
	})

	var recs []*kgo.Record
	for i := range jobs {
		recs = append(recs, jobRecord(t, NewJob{Type: "test.long", Key: fmt.Sprintf("k-%02d", i)}))
	}
	h.produce(t, recs)
	testkit.Eventually(t, 60*time.Second, "jobs running on both workers", func() bool {
		return len(doomed.Running()) > 0 && len(survivor.Running()) > 0
	})
	frozenKeys := len(doomed.Running())
	gate.Freeze()
	t.Logf("froze a worker running %d jobs", frozenKeys)

	testkit.Eventually(t, 90*time.Second, "every job done once", func() bool { return len(fx.snapshot()) == jobs })
	h.waitCommitted(t, 60*time.Second)
	for i := range jobs {
		if n := fx.count(fmt.Sprintf("k-%02d", i)); n != 1 {
			t.Errorf("k-%02d ran to completion %d times, want 1", i, n)
		}
	}
	if n := survivor.Stats().Claimed[OutcomeTakeover]; n < int64(frozenKeys) {
		t.Errorf("survivor took over %d keys, want at least the %d the frozen worker held", n, frozenKeys)
	}
	if s := doomed.Stats(); s.Succeeded != 0 {
		t.Errorf("the frozen worker finished %d jobs", s.Succeeded)
	}
	// Still frozen, it shuts down within its context: franz-go's own Close
	// would retry the leave against the unanswering coordinator for minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = doomed.Shutdown(ctx)
	if ctx.Err() != nil {
		t.Errorf("the frozen worker's Shutdown outlived its 30s context")
	}
}

// assignedMembers counts the members of a KIP-848 group that the coordinator
// has assigned partitions to and that own them (ConsumerGroupDescribe).
func assignedMembers(cl *kgo.Client, group string) int {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		return 0
	}
	n := 0
	for _, m := range resp.Groups[0].Members {
		if len(m.Assignment.TopicPartitions) > 0 && len(m.TargetAssignment.TopicPartitions) > 0 {
			n++
		}
	}
	return n
}

// groupConfig reads one config of a group (DescribeConfigs on the group
// resource).
func groupConfig(t *testing.T, cl *kgo.Client, group, name string) string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	res.ConfigNames = []string{name}
	req.Resources = append(req.Resources, res)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("describe group configs: %v", err)
	}
	for _, r := range resp.Resources {
		for _, c := range r.Configs {
			if c.Name == name && c.Value != nil {
				return *c.Value
			}
		}
	}
	return ""
}

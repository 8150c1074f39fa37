package leasehold

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestKilledMemberEvictedBySessionTimeout freezes a worker's every
// connection, to Kafka and to Redis, while its jobs run: the process is as
// good as dead, but it never leaves the group. The broker must evict it when
// its session times out, its partitions must move to the other worker, its
// leases must lapse (its handlers cancelled by their local deadline), and the
// survivor must take its keys over and run every job exactly once. When the
// frozen worker comes back, nothing runs again.
func TestKilledMemberEvictedBySessionTimeout(t *testing.T) {
	h := setup(t, 4)
	const (
		jobs    = 16
		session = 6 * time.Second // Kafka's default floor for group.min.session.timeout.ms
		jobLen  = 5 * time.Second
	)
	fx := newEffects()
	reg := func(w *Worker) { must(t, w.Register("test.long", sleeper(fx, jobLen, 10))) }
	group := []Opt{
		WithLeaseTTL(2 * time.Second), WithConcurrency(jobs), WithHeartbeatThrottle(200 * time.Millisecond),
		WithKafka(kgo.SessionTimeout(session), kgo.HeartbeatInterval(500*time.Millisecond)),
	}

	gate := testkit.NewGate()
	shared := h.rdb.(*redis.Client).Options()
	gated := redis.NewClient(&redis.Options{Addr: shared.Addr, DB: shared.DB, Dialer: gate.DialContext, MaxRetries: -1,
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = gated.Close() })
	doomed := h.start(t, gated, reg, append(group, WithKafka(kgo.Dialer(gate.DialContext)))...)
	survivor := h.start(t, h.rdb, reg, group...)

	adm := kadm.NewClient(h.kafka.Client(t))
	members := func() (int, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		described, err := adm.DescribeGroups(ctx, h.group)
		if err != nil {
			return 0, false
		}
		g := described[h.group]
		assigned := true
		for _, m := range g.Members {
			c, _ := m.Assigned.AsConsumer()
			assigned = assigned && c != nil && len(c.Topics) > 0
		}
		return len(g.Members), g.Err == nil && g.State == "Stable" && assigned
	}
	testkit.Eventually(t, 30*time.Second, "both workers assigned partitions", func() bool {
		n, ok := members()
		return ok && n == 2
	})

	var recs []*kgo.Record
	for i := range jobs {
		recs = append(recs, jobRecord(t, NewJob{Type: "test.long", Key: fmt.Sprintf("k-%02d", i)}))
	}
	h.produce(t, recs)
	testkit.Eventually(t, 30*time.Second, "jobs running on both workers", func() bool {
		return len(doomed.Running()) > 0 && len(survivor.Running()) > 0
	})
	if s := doomed.Stats(); s.Succeeded != 0 {
		t.Fatalf("the doomed worker finished %d jobs before the freeze; the jobs are too short for this test", s.Succeeded)
	}
	frozenKeys := len(doomed.Running())
	gate.Freeze()
	frozeAt := time.Now()
	t.Logf("froze a worker running %d jobs", frozenKeys)

	// The frozen member never leaves: the group shrinks to one member only
	// when its session times out.
	testkit.Eventually(t, session+20*time.Second, "the frozen member evicted", func() bool {
		n, ok := members()
		return ok && n == 1
	})
	evicted := time.Since(frozeAt)
	if evicted < session-time.Second {
		t.Errorf("the frozen member left the group %v after the freeze, before its %v session timeout", evicted, session)
	}

	testkit.Eventually(t, 60*time.Second, "every job done once", func() bool { return len(fx.snapshot()) == jobs })
	h.waitCommitted(t, 30*time.Second)
	for i := range jobs {
		if n := fx.count(fmt.Sprintf("k-%02d", i)); n != 1 {
			t.Errorf("k-%02d ran to completion %d times, want 1", i, n)
		}
	}
	// Its handlers end when their local deadlines pass, as lost leases (or,
	// for one caught in a heartbeat write, with that write's failure).
	if s := doomed.Stats(); s.LeasesLost == 0 || s.Succeeded != 0 {
		t.Errorf("frozen worker: %d leases lost (want some), %d succeeded (want 0)", s.LeasesLost, s.Succeeded)
	}
	if n := survivor.Stats().Claimed[OutcomeTakeover]; n < int64(frozenKeys) {
		t.Errorf("survivor took over %d keys, want at least the %d the frozen worker held", n, frozenKeys)
	}

	// The frozen worker comes back: it rejoins, finds the offsets committed,
	// and runs nothing.
	startedBefore := doomed.Stats().Started
	gate.Thaw()
	// Back means Redis and Kafka answering it again and its member (the
	// evicted one is gone from the group) assigned partitions.
	testkit.Eventually(t, session+30*time.Second, "the thawed worker ready and back in the group, assigned partitions", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if doomed.Ready(ctx) != nil {
			return false
		}
		member, _ := doomed.Client().GroupMetadata()
		if member == "" {
			return false
		}
		described, err := adm.DescribeGroups(ctx, h.group)
		if err != nil {
			return false
		}
		g := described[h.group]
		if g.Err != nil || g.State != "Stable" || len(g.Members) != 2 {
			return false
		}
		for _, m := range g.Members {
			if m.MemberID == member {
				c, _ := m.Assigned.AsConsumer()
				return c != nil && slices.ContainsFunc(c.Topics, func(tp kmsg.ConsumerMemberAssignmentTopic) bool {
					return tp.Topic == h.topic && len(tp.Partitions) > 0
				})
			}
		}
		return false
	})
	h.waitCommitted(t, 30*time.Second)
	if s := doomed.Stats(); s.Started != startedBefore {
		t.Errorf("the thawed worker started %d jobs after it rejoined", s.Started-startedBefore)
	}
	if s := doomed.Stats(); s.Succeeded != 0 {
		t.Errorf("the thawed worker finished %d jobs after the survivor committed them", s.Succeeded)
	}
	for k, n := range fx.snapshot() {
		if n != 1 {
			t.Errorf("%s ran %d times after the thaw", k, n)
		}
	}
	t.Logf("evicted %v after the freeze; survivor takeovers %d", evicted.Round(100*time.Millisecond),
		survivor.Stats().Claimed[OutcomeTakeover])
}

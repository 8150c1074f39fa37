package idempotency

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestClusterFailover claims and completes a batch of keys spread over a
// real Redis Cluster, then fails over one master right after it acknowledged
// completions that had not reached its replica (so they are lost: Redis
// replication is asynchronous). It checks what survives:
//   - every result that had reached a replica is still replayed (Duplicate);
//   - a key whose completion was lost is not reported done: it goes back to
//     its replicated PROCESSING record, is Held until the old lease's TTL
//     runs out, and is then taken over with a higher fence, naming the old
//     fence for compensation. The job runs again; no stale record passes
//     for a result, and the fence, seen downstream, still moves forward.
//
// It runs without t.Parallel, so its cluster is gone before the package's
// parallel tests (TestCluster among them) start theirs.
func TestClusterFailover(t *testing.T) {
	cl := testkit.StartCluster(t)
	c := cl.Client(t)
	e := setupOn(t, c, "fo:", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const n = 300
	reqs := make([]Request, n)
	for i := range reqs {
		reqs[i] = Request{Key: fmt.Sprintf("order-%d", i), Fingerprint: fp("p")}
	}
	claims := e.s.ClaimBatch(ctx, reqs)
	for _, cm := range claims {
		if cm.Outcome != Acquired {
			t.Fatalf("claim %s: %v %v", cm.Key, cm.Outcome, cm.Err)
		}
	}

	// The first half completes and replicates (WAIT on every master).
	half := n / 2
	complete := func(cs []*Claim) {
		t.Helper()
		comps := make([]Completion, len(cs))
		for i, cm := range cs {
			comps[i] = Completion{Claim: cm, Result: []byte("done:" + cm.Key)}
		}
		for i, err := range e.s.CompleteBatch(ctx, comps) {
			if err != nil {
				t.Fatalf("complete %s: %v", cs[i].Key, err)
			}
		}
	}
	complete(claims[:half])
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.Do(ctx, "WAIT", 1, 5000).Err()
	}); err != nil {
		t.Fatal(err)
	}

	// The victim: the master of the first key's slot. The second half's
	// completions reach it but not its replica, which it then fails over to.
	victim, err := cl.MasterFor(ctx, e.s.Tag(reqs[0].Key))
	if err != nil {
		t.Fatal(err)
	}
	onVictim := map[string]bool{}
	for _, r := range reqs {
		m, err := c.MasterForKey(ctx, e.s.Tag(r.Key))
		if err != nil {
			t.Fatal(err)
		}
		onVictim[r.Key] = m.Options().Addr == victim.Addr()
	}
	if _, err := cl.FailoverLosingWrites(ctx, e.s.Tag(reqs[0].Key), func() error {
		complete(claims[half:])
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c.ReloadState(ctx)

	lost := map[string]uint64{} // key -> fence of the lost completion
	for i, cm := range claims {
		if i >= half && onVictim[cm.Key] {
			lost[cm.Key] = cm.Fence
		}
	}
	if len(lost) == 0 {
		t.Fatal("no completion went to the killed master: the test shows nothing")
	}

	// Claims until every lost key has been taken over.
	taken := map[string]bool{}
	for len(taken) < len(lost) {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d lost keys taken over before the deadline", len(taken), len(lost))
		}
		for i, cm := range e.s.ClaimBatch(ctx, reqs) {
			k := reqs[i].Key
			oldFence, wasLost := lost[k]
			switch {
			case cm.Err != nil && cm.Outcome == 0:
				continue // the cluster is still settling: transient
			case !wasLost:
				if cm.Outcome != Duplicate || string(cm.Record.Result) != "done:"+k {
					t.Fatalf("%s (replicated) after failover: %v, want its result replayed", k, cm.Outcome)
				}
			case taken[k]:
				if cm.Outcome != Held {
					t.Fatalf("%s after its takeover: %v, want Held by the new owner", k, cm.Outcome)
				}
			case cm.Outcome == Held:
			case cm.Outcome == Takeover:
				if cm.Fence <= oldFence || cm.PrevFence != oldFence {
					t.Fatalf("%s takeover: fence %d, previous %d; want above and naming the lost %d", k, cm.Fence, cm.PrevFence, oldFence)
				}
				taken[k] = true
			default:
				t.Fatalf("%s (completion lost) after failover: %v, want Held then Takeover", k, cm.Outcome)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d keys on the killed master lost their completion and were taken over; %d results replayed",
		len(lost), n-len(lost))
}

package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/testkit"
)

// shareLock is the acquisition lock `worker run --share-group` sets with the
// default lease TTL: the TTL plus a third, rounded up to a second.
const shareLock = leasehold.DefaultLeaseTTL + leasehold.DefaultLeaseTTL/3

// shareTakeoverBound is the share-group mode's promise: a record comes back
// within its lock (a killed worker's at once, when its connection closes; a
// stalled one's when the lock lapses), and its claim takes the job over
// within the lease TTL; 5s of margin for a loaded machine.
const shareTakeoverBound = shareLock + leasehold.DefaultLeaseTTL + 5*time.Second

// TestShareTakeoverWithinLease runs two `worker run --share-group`
// processes with the default lease TTL, kills -9 (or SIGSTOPs) the one
// running a long job, and waits for the other to take the job over within
// shareTakeoverBound; the job completes once, under the survivor's fence.
// TAKEOVER_TRIALS=N repeats each case and logs p50 and p99 as name=value
// lines (docs/kafka.md's figures).
func TestShareTakeoverWithinLease(t *testing.T) {
	bin := buildWorker(t)
	brokers, kind := startBroker(t)
	trials := 1
	if s := os.Getenv("TAKEOVER_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("TAKEOVER_TRIALS=%q: want a count", s)
		}
		trials = n
	}
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{{"kill", syscall.SIGKILL}, {"stop", syscall.SIGSTOP}} {
		t.Run(tc.name, func(t *testing.T) {
			if trials == 1 {
				t.Parallel()
			}
			var took []time.Duration
			for range trials {
				took = append(took, shareTakeoverTrial(t, bin, brokers, tc.sig))
			}
			fmt.Printf("share_takeover_p50_%s_%s=%.1f s\n", tc.name, kind, quantile(took, 0.5))
			fmt.Printf("share_takeover_p99_%s_%s=%.1f s\n", tc.name, kind, quantile(took, 0.99))
			fmt.Printf("share_takeover_trials_%s_%s=%d\n", tc.name, kind, len(took))
		})
	}
}

// shareTakeoverTrial runs one job on two fresh share-group workers,
// signals the one running it, and returns how long after the signal the
// other took the job over.
func shareTakeoverTrial(t *testing.T, bin string, brokers []string, sig syscall.Signal) time.Duration {
	t.Helper()
	rdb, prefix := testkit.SharedRedis(t)
	topic := createTopic(t, brokers)
	group := "g-" + topic
	workers := []*workerProc{
		startWorker(t, bin, brokers, rdb, prefix, topic, group, "--share-group", "sg-"+topic),
		startWorker(t, bin, brokers, rdb, prefix, topic, group, "--share-group", "sg-"+topic),
	}
	testkit.Eventually(t, 60*time.Second, "both workers ready", func() bool {
		return workers[0].ready() && workers[1].ready()
	})
	key := "takeover-" + topic
	produceJob(t, brokers, topic, key)
	insp := inspect.New(rdb, inspect.WithPrefix(prefix))
	t.Cleanup(func() { _ = insp.Close(context.Background()) })
	readKey := func() leasehold.KeyInfo {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ki, _ := insp.Key(ctx, key)
		return ki
	}
	var first leasehold.KeyInfo
	testkit.Eventually(t, 60*time.Second, "the job running", func() bool {
		first = readKey()
		return first.Leased
	})
	runner := runnerOf(t, insp, key, first.LeaseFence, workers)
	runner.signal(t, sig)
	signalled := time.Now()
	var took time.Duration
	testkit.Eventually(t, shareTakeoverBound, fmt.Sprintf("the job taken over within %v of the %v", shareTakeoverBound, sig), func() bool {
		ki := readKey()
		if ki.Leased && ki.LeaseFence > first.LeaseFence || ki.State == idempotency.Completed && ki.Fence > first.LeaseFence {
			took = time.Since(signalled)
			return true
		}
		return false
	})
	t.Logf("share group: took over %.1fs after the %v (lease TTL %v, lock %v)", took.Seconds(), sig,
		leasehold.DefaultLeaseTTL, shareLock)
	var done leasehold.KeyInfo
	testkit.Eventually(t, 60*time.Second, "the job completed by the survivor", func() bool {
		done = readKey()
		return done.State == idempotency.Completed
	})
	if done.Fence <= first.LeaseFence {
		t.Fatalf("completed under fence %d, want the survivor's, above the first owner's %d", done.Fence, first.LeaseFence)
	}
	if sig == syscall.SIGSTOP {
		runner.signal(t, syscall.SIGCONT)
		testkit.Eventually(t, 30*time.Second, "the resumed worker's lease lost", func() bool {
			return runner.logged(`"msg":"lease lost"`)
		})
		if after := readKey(); after.State != idempotency.Completed || after.Fence != done.Fence {
			t.Fatalf("after the stalled worker resumed: state %v fence %d, want the survivor's fence %d",
				after.State, after.Fence, done.Fence)
		}
	}
	return took
}

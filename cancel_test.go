package leasehold

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestCancelRunningJob: one worker; 20 long jobs, each cancelled while it
// runs through the Inspector. Each handler's context ends with a cause
// matching ErrCancelled (within a renew interval: the figures are logged),
// its saga step is compensated, the key is recorded cancelled, a duplicate
// is replayed and not run, and after a reset the key runs again. Every
// offset is committed.
func TestCancelRunningJob(t *testing.T) {
	t.Parallel()
	runCancels(t, "one_worker", 1, 20)
}

// TestCancelAcrossThreeWorkers: TestCancelRunningJob with three Workers in
// one test binary sharing the group (three partitions), cancelled through
// the first worker's Inspector: the request reaches whichever worker holds
// the key.
func TestCancelAcrossThreeWorkers(t *testing.T) {
	t.Parallel()
	runCancels(t, "three_workers", 3, 30)
}

type keyTime struct {
	key string
	at  time.Time
}

func runCancels(t *testing.T, name string, workers, n int) {
	h := setup(t, int32(workers)) //nolint:gosec // a handful of workers
	led := &ledger{charged: map[string]int{}, refunds: map[string]int{}}
	reg := compensation.NewRegistry()
	compensation.MustRegister(reg, "test.refund", func(_ context.Context, a refundArgs) error {
		led.refund(a.Key)
		return nil
	})
	runs := newEffects()
	running, stopped := make(chan string, n), make(chan keyTime, n)
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		runs.add(j.Key)
		if runs.count(j.Key) > 1 {
			return []byte("ran again"), nil // the run after the reset
		}
		if err := j.Step(ctx, "charge", func(context.Context) error { led.charge(j.Key); return nil },
			"test.refund", refundArgs{Key: j.Key}); err != nil {
			return nil, err
		}
		running <- j.Key
		<-ctx.Done()
		stopped <- keyTime{j.Key, time.Now()}
		if cause := context.Cause(ctx); !errors.Is(cause, ErrCancelled) {
			t.Errorf("%s: cause %v, want ErrCancelled", j.Key, cause)
		}
		return nil, context.Cause(ctx)
	}
	var hooked atomic.Int64
	hooks := Hooks{OnCancel: func(_ context.Context, _ *Job, err error) {
		if errors.Is(err, ErrCancelled) {
			hooked.Add(1)
		}
	}}
	var ws []*Worker
	for range workers {
		ws = append(ws, h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.cancel", handler)) },
			WithCompensation(reg), WithConcurrency(n), WithHooks(hooks)))
	}
	stats := func() (s Stats) {
		for _, w := range ws {
			x := w.Stats()
			s.Cancelled += x.Cancelled
			s.Replayed += x.Replayed
			s.Succeeded += x.Succeeded
		}
		return s
	}
	waitMembers(t, h, workers)
	in := ws[0].Inspector()
	t.Cleanup(func() { _ = in.Close(context.Background()) })
	ctx := t.Context()

	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = jobRecord(t, NewJob{Type: "test.cancel", Key: fmt.Sprintf("cancel-%d", i)})
	}
	h.produce(t, recs)
	asked := make(map[string]time.Time, n)
	for range n {
		var k string
		select {
		case k = <-running:
		case <-time.After(60 * time.Second):
			t.Fatalf("%d of %d jobs started", len(asked), n)
		}
		asked[k] = time.Now()
		if _, err := in.Cancel(ctx, k, "test"); err != nil {
			t.Fatalf("Cancel(%s): %v", k, err)
		}
	}
	took := make([]time.Duration, 0, n)
	for range n {
		select {
		case s := <-stopped:
			took = append(took, s.at.Sub(asked[s.key]))
		case <-time.After(60 * time.Second):
			t.Fatalf("%d of %d cancelled handlers returned", len(took), n)
		}
	}
	testkit.Eventually(t, 30*time.Second, "every cancel recorded", func() bool { return stats().Cancelled == int64(n) })
	for i, w := range ws {
		t.Logf("cancelled_on_worker_%d_%s=%d jobs", i, name, w.Stats().Cancelled)
	}
	if hooked.Load() != int64(n) {
		t.Errorf("OnCancel ran %d times, want %d", hooked.Load(), n)
	}
	slices.Sort(took)
	t.Logf("cancel_latency_p50_%s=%d ms", name, took[len(took)/2].Milliseconds())
	t.Logf("cancel_latency_p99_%s=%d ms", name, took[min(len(took)-1, len(took)*99/100)].Milliseconds())
	t.Logf("cancel_latency_max_%s=%d ms", name, took[len(took)-1].Milliseconds())
	t.Logf("renew_interval=%d ms", (2 * time.Second / 3).Milliseconds())
	for i := range n {
		k := fmt.Sprintf("cancel-%d", i)
		if c, r := led.net(k); c != 1 || r != 1 {
			t.Errorf("%s: %d charges, %d refunds; want 1 and 1 (the cancelled attempt undone)", k, c, r)
		}
		ki, err := in.Key(ctx, k)
		must(t, err)
		if !IsCancelledFailure(ki.Failure) || ki.Leased {
			t.Errorf("%s: record %s %q (leased %v), want the cancel recorded", k, ki.State, ki.Failure, ki.Leased)
		}
		// The history is written by an observer of the end, maybe after
		// the one that counts it.
		testkit.Eventually(t, 10*time.Second, k+"'s history tells the cancel", func() bool {
			hs, err := in.History(ctx, k)
			return err == nil && len(hs) == 1 && hs[0].End == idempotency.EndCancelled
		})
	}

	// A duplicate is answered from the record, not run; after a reset the
	// key runs again. (A rebalance may have redelivered some of the
	// cancelled records already: they were replayed, not run.)
	h.waitCommitted(t, 30*time.Second)
	replayed := stats().Replayed
	h.produce(t, recs[:1])
	testkit.Eventually(t, 30*time.Second, "the duplicate replayed", func() bool { return stats().Replayed == replayed+1 })
	if got := runs.count("cancel-0"); got != 1 {
		t.Fatalf("cancel-0 ran %d times after its duplicate, want 1", got)
	}
	if _, err := in.Reset(ctx, "cancel-0", false); err != nil {
		t.Fatal(err)
	}
	h.produce(t, recs[:1])
	testkit.Eventually(t, 30*time.Second, "the reset key ran again", func() bool { return stats().Succeeded == 1 })
	if got := runs.count("cancel-0"); got != 2 {
		t.Fatalf("cancel-0 ran %d times, want 2", got)
	}
	h.waitCommitted(t, 30*time.Second)
}

// waitMembers waits until the group is stable with n members and every
// partition of the topic assigned, so that the jobs spread over the workers.
func waitMembers(t *testing.T, h *harness, n int) {
	t.Helper()
	adm := kadm.NewClient(h.kafka.Client(t))
	testkit.Eventually(t, 60*time.Second, "the group stable with every worker", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dg, err := adm.DescribeGroups(ctx, h.group)
		if err != nil {
			return false
		}
		g, ok := dg[h.group]
		return ok && g.State == "Stable" && len(g.Members) == n && len(dg.AssignedPartitions()[h.topic]) == n
	})
}

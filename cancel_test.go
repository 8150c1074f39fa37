package leasehold

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lua"
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
	led, reg := refundLedger()
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

// TestCancelCoversTakeover: an operator cancels a running attempt, and its
// lease is lost before the renewal carries the cancel to it (the request
// and the expiry in one transaction: the attempt never learns of the
// cancel). The worker's takeover is covered by the cancel: it compensates
// the lost attempt's charge, records the key as cancelled, never runs the
// handler again, and the history shows the lost attempt and the cancelled
// takeover.
func TestCancelCoversTakeover(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	led, reg := refundLedger()
	runs := newEffects()
	running := make(chan *Job, 1)
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		runs.add(j.Key)
		if err := j.Step(ctx, "charge", func(context.Context) error { led.charge(j.Key); return nil },
			"test.refund", refundArgs{Key: j.Key}); err != nil {
			return nil, err
		}
		running <- j
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	w := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.cancel", handler)) },
		WithCompensation(reg), WithLeaseTTL(time.Second))
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.cancel", Key: "covered-1"})})

	j := <-running
	rs := w.store.(*redisStore)
	ctx := t.Context()
	lk, mk := rs.m.Key(rs.s.LeaseName(j.Key)), rs.s.CancelMarkKey(j.Key)
	// What Inspector.Cancel sends, and the lease's end (a delete: a 1 ms TTL
	// would lose to a renewal within that millisecond), in one step.
	src, err := fs.ReadFile(lua.FS, "lease_cancel.lua")
	must(t, err)
	_, err = h.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Eval(ctx, string(src), []string{lk, mk}, fmt.Sprint(j.fence), rs.s.Retention().Milliseconds())
		p.Del(ctx, lk)
		return nil
	})
	must(t, err)

	testkit.Eventually(t, 30*time.Second, "the key recorded as cancelled", func() bool { return w.Stats().Cancelled == 1 })
	ki, err := rs.s.LookupResult(ctx, "covered-1")
	must(t, err)
	if ki.State != idempotency.Failed || !IsCancelledFailure(string(ki.Result)) {
		t.Fatalf("record %+v, want failed as cancelled", ki)
	}
	if n := runs.count("covered-1"); n != 1 {
		t.Fatalf("the handler ran %d times, want once (the takeover is covered by the cancel)", n)
	}
	testkit.Eventually(t, 10*time.Second, "the charge refunded", func() bool {
		charged, refunded := led.net("covered-1")
		return charged == 1 && refunded == 1
	})
	var hs []idempotency.Attempt
	testkit.Eventually(t, 10*time.Second, "both attempts ended in the history", func() bool {
		hs, err = rs.s.History(ctx, "covered-1")
		must(t, err)
		return len(hs) == 2 && hs[0].End != "" && hs[1].End != ""
	})
	if hs[0].Fence != j.fence || hs[0].End != idempotency.EndLeaseLost || hs[1].End != idempotency.EndCancelled {
		t.Fatalf("history %+v", hs)
	}
}

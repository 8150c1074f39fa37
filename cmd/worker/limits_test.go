package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/outcome"
)

// limitGroup is the limit group `--type-limit demo.sleep=N` makes.
const limitGroup = "type:demo.sleep"

// TestTypeLimitAcrossProcesses runs three `worker run` processes of
// concurrency 8 with `--type-limit demo.sleep=2` on real Redis and the
// embedded broker (Apache Kafka with TEST_KAFKA=apache): 16 jobs of 1.5 s
// spread over six partitions. A sampler reads the group's running slots
// from Redis every 10 ms (a job's slot is taken before its claim and given
// back after its handler ended, so it bounds the handlers running); the test
// fails if it ever sees more than 2, or never 2. While the limit is full,
// a worker holding a slot is killed -9: its slot lapses one lease TTL after
// its last renewal and the other workers run the rest; every job completes
// once, and no slot is left when all are done. It prints the slots' peak,
// how many samples found the limit full, and the run's length.
func TestTypeLimitAcrossProcesses(t *testing.T) {
	bin := buildWorker(t)
	brokers, kind := startBroker(t)
	f := startControls(t, bin, brokers, "--type-limit", "demo.sleep=2")

	keys := make([]string, 16)
	for i := range keys {
		keys[i] = fmt.Sprintf("limited-%s-%02d", f.topic, i)
	}
	var peak, fullSamples atomic.Int64
	ctx, stopSampling := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond) // the sampling period
		defer tick.Stop()
		for ; ctx.Err() == nil; <-tick.C {
			if gs, err := f.insp.Limits(ctx, limitGroup); err == nil && len(gs) == 1 {
				n := int64(gs[0].Running)
				if n > peak.Load() {
					peak.Store(n)
				}
				if n == 2 {
					fullSamples.Add(1)
				}
			}
		}
	})
	defer func() { stopSampling(); wg.Wait() }()

	start := time.Now()
	f.produce(t, keys, cli.SleepJob{DurationMS: 1500, Steps: 3})
	var victim *workerProc
	testkit.Eventually(t, 60*time.Second, "a worker running a limited job while the limit is full", func() bool {
		if fullSamples.Load() == 0 {
			return false
		}
		for _, w := range f.workers {
			if w.leasesHeld() > 0 {
				victim = w
				return true
			}
		}
		return false
	})
	victim.signal(t, syscall.SIGKILL)
	killed := time.Now()

	done := func(k string) bool {
		ki := f.key(t, k)
		return ki.State == idempotency.Completed
	}
	testkit.Eventually(t, 180*time.Second, "every limited job completed", func() bool {
		for _, k := range keys {
			if !done(k) {
				return false
			}
		}
		return true
	})
	elapsed := time.Since(start)
	for _, k := range keys {
		if n := completions(f.history(t, k)); n != 1 {
			t.Errorf("%s: %d completed attempts in its history, want 1", k, n)
		}
	}
	testkit.Eventually(t, 2*controlsLeaseTTL+5*time.Second, "no slot left of the limited type", func() bool {
		gs, err := f.insp.Limits(context.Background(), limitGroup)
		return err == nil && len(gs) == 1 && gs[0].Running == 0
	})
	stopSampling()
	wg.Wait()
	held := f.holdAcrossProcesses(t, 3*time.Second)
	t.Logf("type_limit=2")
	t.Logf("type_limit_peak_running_%s=%d", kind, peak.Load())
	t.Logf("type_limit_full_samples_%s=%d", kind, fullSamples.Load())
	t.Logf("type_limit_run_%s=%.1f s (16 jobs of 1.5 s, one worker killed -9 at %.1f s)", kind, elapsed.Seconds(),
		killed.Sub(start).Seconds())
	if peak.Load() > 2 {
		t.Errorf("%d limited jobs held slots at once, want at most 2", peak.Load())
	}
	if fullSamples.Load() == 0 {
		t.Error("the limit was never full: the test did not exercise it")
	}
	t.Logf("type_limit_hold_first_start_after_hold_end_%s=%.3f s", kind, held.Seconds())
}

// holdAcrossProcesses holds the limited type's group for d with `worker
// limits --hold` (what a handler's RetryAfter does), enqueues four jobs of
// it, and checks on the two workers left that none starts (its history's
// first start, Redis time) before the hold ends and that all complete. It
// returns how long after the hold's end the first one started.
func (f *controls) holdAcrossProcesses(t *testing.T, d time.Duration) time.Duration {
	t.Helper()
	out := f.operator(t, "limits", "--hold", d.String(), limitGroup)
	holdEnd := time.Now().Add(d) // the hold runs d from the command's answer (Redis time: at most this)
	t.Logf("worker limits --hold: %s", strings.TrimSpace(out))
	keys := make([]string, 4)
	for i := range keys {
		keys[i] = fmt.Sprintf("held-%s-%02d", f.topic, i)
	}
	f.produce(t, keys, cli.SleepJob{DurationMS: 100, Steps: 1})
	testkit.Eventually(t, d+60*time.Second, "the held jobs completed after the hold", func() bool {
		for _, k := range keys {
			if f.key(t, k).State != idempotency.Completed {
				return false
			}
		}
		return true
	})
	first := time.Time{}
	for _, k := range keys {
		h := f.history(t, k)
		if len(h) == 0 {
			t.Fatalf("%s: no history", k)
		}
		if s := h[0].Started; first.IsZero() || s.Before(first) {
			first = s
		}
	}
	// The hold was set before holdEnd - d was read here; allow the
	// command's own round trip (100 ms) for the clocks' difference.
	if first.Before(holdEnd.Add(-100 * time.Millisecond)) {
		t.Errorf("a held job started at %v, %v before the hold's end", first, holdEnd.Sub(first))
	}
	return first.Sub(holdEnd)
}

// completions counts the completed attempts of a key's history.
func completions(h []idempotency.Attempt) int {
	n := 0
	for _, a := range h {
		if a.End == string(outcome.Completed) {
			n++
		}
	}
	return n
}

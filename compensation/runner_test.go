package compensation_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

func TestCompensateReverseOrder(t *testing.T) {
	t.Parallel()
	rc := newRecorder()
	c := setupJournal(t, "order-1", rc)
	e, r, j := c.env, c.r, c.j
	ctx := t.Context()
	runSteps(t, j, 3)
	// A fourth step whose effect fails stays in doubt and is undone too.
	boom := errors.New("boom")
	if err := j.Step(ctx, "step-4", func(context.Context) error { return boom }, "undo", undoArgs{Step: 4}); !errors.Is(err, boom) {
		t.Fatalf("failing step: %v", err)
	}
	if err := j.Compensate(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{4, 3, 2, 1}, rc.steps()); diff != "" {
		t.Errorf("compensation order (-want +got):\n%s", diff)
	}
	rc.mu.Lock()
	inDoubt := []bool{}
	for _, c := range rc.calls {
		inDoubt = append(inDoubt, c.InDoubt)
	}
	rc.mu.Unlock()
	if diff := cmp.Diff([]bool{true, false, false, false}, inDoubt); diff != "" {
		t.Errorf("in-doubt flags (-want +got):\n%s", diff)
	}
	info, err := r.Inspect(ctx, j.Ref())
	if err != nil {
		t.Fatal(err)
	}
	if info.State != compensation.StateCompensated {
		t.Errorf("state %q, want compensated", info.State)
	}
	if diff := cmp.Diff([]string{"comp", "comp", "comp", "comp"}, stepStates(info)); diff != "" {
		t.Errorf("step states (-want +got):\n%s", diff)
	}
	want := compensation.StepRecord{Step: 4, Name: "step-4", Handler: "undo", State: "comp", Done: false,
		Attempts: 1, Generation: 1, ArgsBytes: len(`{"step":4}`)}
	if diff := cmp.Diff(want, info.Steps[3]); diff != "" {
		t.Errorf("step 4 record (-want +got):\n%s", diff)
	}
	// Compensating again is a no-op, and new steps are refused.
	if err := j.Compensate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(rc.steps()); got != 4 {
		t.Errorf("%d calls after a second Compensate, want 4", got)
	}
	ran := false
	if err := j.Step(ctx, "late", func(context.Context) error { ran = true; return nil }, "undo", undoArgs{Step: 5}); !errors.Is(err, compensation.ErrNotOpen) || ran {
		t.Errorf("step after compensation: err %v, ran %v", err, ran)
	}
	if n, _ := e.client.ZCard(ctx, e.prefix+"comp:index").Result(); n != 0 {
		t.Errorf("index holds %d journals after compensation", n)
	}
}

func TestStepRefusedAfterLeaseLost(t *testing.T) {
	t.Parallel()
	rc := newRecorder()
	c := setupJournal(t, "order-2", rc)
	e, m, j := c.env, c.m, c.j
	ctx := t.Context()
	runSteps(t, j, 1)
	// Another owner takes the key: delete the lease and acquire elsewhere.
	if err := e.client.Del(ctx, m.Key("order-2")).Err(); err != nil {
		t.Fatal(err)
	}
	m2 := e.manager(false)
	if _, err := m2.Acquire(ctx, "order-2"); err != nil {
		t.Fatal(err)
	}
	ran := false
	err := j.Step(ctx, "step-2", func(context.Context) error { ran = true; return nil }, "undo", undoArgs{Step: 2})
	if !errors.Is(err, lease.ErrLost) || ran {
		t.Fatalf("step after takeover: err %v, ran %v; want lease.ErrLost and no effect", err, ran)
	}
	if err := j.Step(ctx, "x", func(context.Context) error { return nil }, "nope", nil); !errors.Is(err, compensation.ErrUnknownHandler) {
		t.Errorf("unregistered handler: %v", err)
	}
	// The zombie still compensates its own journal (lease-lost trigger).
	if err := j.Compensate(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1}, rc.steps()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestRetryWithBackoffThenSuccess(t *testing.T) {
	t.Parallel()
	rc := newRecorder()
	rc.setFailures(1, 3)
	var (
		mu       sync.Mutex
		outcomes []compensation.Outcome
	)
	obs := compensation.ObserverFuncs{End: func(_ context.Context, s compensation.StepInfo, o compensation.Outcome, _ error) {
		mu.Lock()
		outcomes = append(outcomes, o)
		mu.Unlock()
	}}
	c := setupJournal(t, "order-3", rc, compensation.WithAttempts(5), compensation.WithObserver(obs),
		compensation.WithBackoff(20*time.Millisecond, time.Second))
	r, j := c.r, c.j
	ctx := t.Context()
	runSteps(t, j, 1)
	start := time.Now()
	if err := j.Compensate(ctx); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	// Backoffs of steps 20, 40 and 80ms, each at least half its step,
	// separate the four attempts.
	if min := 70 * time.Millisecond; elapsed < min {
		t.Errorf("4 attempts took %s, want at least %s of backoff", elapsed, min)
	}
	want := []compensation.Outcome{compensation.OutcomeRetry, compensation.OutcomeRetry, compensation.OutcomeRetry, compensation.OutcomeCompensated}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, outcomes); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	info, err := r.Inspect(ctx, j.Ref())
	if err != nil {
		t.Fatal(err)
	}
	if info.Steps[0].Attempts != 4 || info.State != compensation.StateCompensated {
		t.Errorf("journal %+v: want 4 attempts and compensated", info)
	}
	t.Logf("attempts=4 elapsed=%s", elapsed)
}

func TestDeadLetterThenRetry(t *testing.T) {
	t.Parallel()
	rc := newRecorder()
	rc.setFailures(2, -1) // step 2's compensation always fails until fixed
	c := setupJournal(t, "{i:7}:order-4", rc, compensation.WithAttempts(3))
	r, j := c.r, c.j
	ctx := t.Context()
	runSteps(t, j, 3)
	err := j.Compensate(ctx)
	var dl *compensation.DeadLetterError
	if !errors.As(err, &dl) || !errors.Is(err, compensation.ErrDeadLettered) {
		t.Fatalf("Compensate: %v, want a dead letter", err)
	}
	if dl.Step != 2 || dl.Attempts != 3 {
		t.Errorf("dead letter %+v: want step 2 after 3 attempts", dl)
	}
	// Step 1 waits behind the dead step: sagas undo in reverse order.
	if diff := cmp.Diff([]int{3, 2, 2, 2}, rc.steps()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	list, err := r.List(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Ref != j.Ref() || list[0].State != compensation.StateDeadLettered {
		t.Fatalf("dead letters %+v", list)
	}
	if got := stepStates(list[0].JournalInfo); !cmp.Equal(got, []string{"done", "dead", "comp"}) {
		t.Errorf("step states %v", got)
	}
	if list[0].Steps[1].Error == "" || list[0].Steps[1].Attempts != 3 {
		t.Errorf("dead step %+v: want its error and 3 attempts", list[0].Steps[1])
	}
	// A sweep does not touch dead letters.
	if _, err := r.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(rc.steps()); got != 4 {
		t.Errorf("sweep ran a dead-lettered step: %d calls", got)
	}

	rc.setFailures(2, 0)              // the cause is fixed
	n, err := r.Retry(ctx, "order-4") // the idempotency key form
	if err != nil || n != 1 {
		t.Fatalf("Retry = %d, %v", n, err)
	}
	if diff := cmp.Diff([]int{3, 2, 2, 2, 2, 1}, rc.steps()); diff != "" {
		t.Errorf("calls after retry (-want +got):\n%s", diff)
	}
	list, err = r.List(ctx, 10)
	if err != nil || len(list) != 0 {
		t.Fatalf("dead letters after retry: %+v, %v", list, err)
	}
	info, err := r.Inspect(ctx, j.Ref())
	if err != nil || info.State != compensation.StateCompensated {
		t.Fatalf("after retry: %+v, %v", info, err)
	}
}

// TestConcurrentCompensatorsRunEachStepOnce races the zombie's own trigger,
// the new owner's takeover and two sweeps on one journal.
func TestConcurrentCompensatorsRunEachStepOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const steps = 12
	rc := newRecorder()
	reg := rc.registry(t)
	zm, nm := e.manager(true), e.manager(false)
	zr, nr := e.runner(zm, reg), e.runner(nm, reg)
	sm := e.manager(false)
	sr := e.runner(sm, reg)
	ctx := t.Context()
	zl, err := zm.Acquire(ctx, "order-5")
	if err != nil {
		t.Fatal(err)
	}
	zj := zr.Journal(zl)
	runSteps(t, zj, steps)
	// The zombie's lease expires; the new owner takes the key over.
	if err := e.client.Del(ctx, zm.Key("order-5")).Err(); err != nil {
		t.Fatal(err)
	}
	nl, err := nm.Acquire(ctx, "order-5")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	start := make(chan struct{})
	wg.Go(func() { <-start; errs <- zj.Compensate(ctx) })
	wg.Go(func() { <-start; errs <- nr.CompensatePrevious(ctx, "order-5", nl.Fence()) })
	for range 2 {
		wg.Go(func() {
			<-start
			_, err := sr.Sweep(ctx)
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	// A sweep may have been turned away while another held the journal; let
	// it finish anything left.
	testkit.Eventually(t, 5*time.Second, "journal compensated", func() bool {
		_, _ = sr.Sweep(ctx)
		info, err := sr.Inspect(ctx, zj.Ref())
		return err == nil && info.State == compensation.StateCompensated
	})
	want := make([]int, steps)
	for i := range want {
		want[i] = steps - i
	}
	if diff := cmp.Diff(want, rc.steps()); diff != "" {
		t.Errorf("each step once, in reverse (-want +got):\n%s", diff)
	}
}

// TestLateEffectReopensStep: the zombie's effect completes after the new
// owner compensated the step as in doubt; the step is compensated again
// under a new generation (with a new idempotency key), exactly once more.
func TestLateEffectReopensStep(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rc := newRecorder()
	reg := rc.registry(t)
	zm, nm := e.manager(true), e.manager(false)
	zr, nr := e.runner(zm, reg), e.runner(nm, reg)
	ctx := t.Context()
	zl, err := zm.Acquire(ctx, "order-6")
	if err != nil {
		t.Fatal(err)
	}
	zj := zr.Journal(zl)
	inDo, release := make(chan struct{}), make(chan struct{})
	stepErr := make(chan error, 1)
	go func() {
		stepErr <- zj.Step(ctx, "charge", func(context.Context) error {
			close(inDo)
			<-release // paused: the zombie's effect is still on its way
			return nil
		}, "undo", undoArgs{Step: 1})
	}()
	<-inDo
	if err := e.client.Del(ctx, zm.Key("order-6")).Err(); err != nil {
		t.Fatal(err)
	}
	nl, err := nm.Acquire(ctx, "order-6")
	if err != nil {
		t.Fatal(err)
	}
	if err := nr.CompensatePrevious(ctx, "order-6", nl.Fence()); err != nil {
		t.Fatal(err)
	}
	close(release)
	err = <-stepErr
	var late *compensation.LateEffectError
	if !errors.As(err, &late) || late.Step != 1 {
		t.Fatalf("zombie step: %v, want a late effect on step 1", err)
	}
	if err := zj.Compensate(ctx); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.calls) != 2 {
		t.Fatalf("%d compensations, want 2 (in doubt, then after the late effect)", len(rc.calls))
	}
	first, second := rc.calls[0], rc.calls[1]
	if !first.InDoubt || second.InDoubt || first.Generation != 1 || second.Generation != 2 ||
		first.IdempotencyKey() == second.IdempotencyKey() {
		t.Errorf("calls %+v / %+v: want in-doubt gen 1 then confirmed gen 2 with distinct keys", first, second)
	}
}

func TestSweepLeavesLiveAndCompensatesAbandoned(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rc := newRecorder()
	reg := rc.registry(t)
	ctx := t.Context()
	dead := e.manager(true) // shut down without releasing: its leases expire
	dr := e.runner(dead, reg)
	live := e.manager(false)
	lr := e.runner(live, reg)

	mk := func(r *compensation.Runner, m *lease.Manager, name string, n int) *compensation.Journal {
		l, err := m.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		j := r.Journal(l)
		for i := 1; i <= n; i++ {
			if err := j.Step(ctx, fmt.Sprint(i), func(context.Context) error { return nil }, "undo", undoArgs{Step: i}); err != nil {
				t.Fatal(err)
			}
		}
		return j
	}
	abandoned := mk(dr, dead, "abandoned", 2)
	sealed := mk(dr, dead, "sealed", 1)
	if err := sealed.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	committed := mk(dr, dead, "committed", 1)
	if err := committed.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := committed.Close(ctx); err != nil {
		t.Fatal(err)
	}
	running := mk(lr, live, "running", 1)

	sweeper := e.runner(e.manager(false), reg, compensation.WithSweepBatch(2)) // pages of 2
	rep, err := sweeper.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Live != 3 || rep.Compensated != 0 {
		t.Fatalf("sweep while owners live: %+v", rep)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := dead.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	total := 0
	testkit.Eventually(t, 5*time.Second, "abandoned journal compensated, sealed one left", func() bool {
		rep, err = sweeper.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total += rep.Compensated
		return total == 1 && rep.Sealed == 1
	})
	if rep.Live != 1 {
		t.Errorf("sweep after the owner died: %+v, want the running journal live", rep)
	}
	for j, want := range map[*compensation.Journal]compensation.State{
		abandoned: compensation.StateCompensated, sealed: compensation.StateSealed,
		committed: compensation.StateCommitted, running: compensation.StateOpen,
	} {
		info, err := sweeper.Inspect(ctx, j.Ref())
		if err != nil || info.State != want {
			t.Errorf("%s: state %q (%v), want %q", j.Ref(), info.State, err, want)
		}
	}
	if diff := cmp.Diff([]int{2, 1}, rc.steps()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}

	// With a commit check, the sweep settles the sealed journal too.
	checked := e.runner(e.manager(false), reg, compensation.WithCommitted(func(_ context.Context, ref compensation.Ref) (bool, error) {
		return false, nil // the record shows the commit did not land
	}))
	rep, err = checked.Sweep(ctx)
	if err != nil || rep.Compensated != 1 {
		t.Fatalf("sweep with commit check: %+v, %v", rep, err)
	}
	if diff := cmp.Diff([]int{2, 1, 1}, rc.steps()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestTakeoverSkipsCommittedJournals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rc := newRecorder()
	reg := rc.registry(t)
	m := e.manager(false)
	r := e.runner(m, reg)
	ctx := t.Context()
	// Attempt 1 commits; attempt 2 dies sealed (its commit did not land).
	l1, err := m.Acquire(ctx, "order-7")
	if err != nil {
		t.Fatal(err)
	}
	j1 := r.Journal(l1)
	runSteps(t, j1, 1)
	if err := j1.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := j1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := m.Acquire(ctx, "order-7")
	if err != nil {
		t.Fatal(err)
	}
	j2 := r.Journal(l2)
	runSteps(t, j2, 2)
	if err := j2.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Del(ctx, m.Key("order-7")).Err(); err != nil {
		t.Fatal(err)
	}
	l3, err := m.Acquire(ctx, "order-7")
	if err != nil {
		t.Fatal(err)
	}
	if l1.Fence() >= l2.Fence() || l2.Fence() >= l3.Fence() {
		t.Fatalf("fences %d, %d, %d not increasing", l1.Fence(), l2.Fence(), l3.Fence())
	}
	if err := r.CompensatePrevious(ctx, "order-7", l3.Fence()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{2, 1}, rc.steps()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	info, err := r.Inspect(ctx, j1.Ref())
	if err != nil || info.State != compensation.StateCommitted {
		t.Errorf("committed journal: %+v, %v", info, err)
	}
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	reg := compensation.NewRegistry()
	if err := compensation.Register(reg, "a", func(context.Context, int) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := compensation.Register(reg, "a", func(context.Context, int) error { return nil }); !errors.Is(err, compensation.ErrDuplicateHandler) {
		t.Errorf("duplicate: %v", err)
	}
	if err := compensation.Register[int](reg, "", nil); !errors.Is(err, compensation.ErrInvalid) {
		t.Errorf("empty: %v", err)
	}
	if !reg.Has("a") || reg.Has("b") {
		t.Error("Has")
	}
	ref, err := compensation.ParseRef(compensation.Ref{Name: "{x}:a:b", Fence: 42}.String())
	if err != nil || ref != (compensation.Ref{Name: "{x}:a:b", Fence: 42}) {
		t.Errorf("ParseRef round trip: %+v, %v", ref, err)
	}
	for _, bad := range []string{"", "x:y", "0:y", "12:"} {
		if _, err := compensation.ParseRef(bad); err == nil {
			t.Errorf("ParseRef(%q) accepted", bad)
		}
	}
}

// TestShutdownInterruptsAndSweepResumes: Shutdown cancels a compensation in
// flight; another process's sweep resumes it once the first one's
// compensation lease has expired.
func TestShutdownInterruptsAndSweepResumes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	started := make(chan struct{}, 1)
	calls := 0
	reg := compensation.NewRegistry()
	compensation.MustRegister(reg, "block", func(ctx context.Context, _ struct{}) error {
		calls++
		if calls == 1 {
			started <- struct{}{}
			<-ctx.Done() // the first process is shut down meanwhile
			return context.Cause(ctx)
		}
		return nil
	})
	m1 := e.manager(true)
	r1, err := compensation.NewRunner(e.client, m1, reg, compensation.WithPrefix(e.prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	l, err := m1.Acquire(ctx, "order-8")
	if err != nil {
		t.Fatal(err)
	}
	j := r1.Journal(l)
	if err := j.Step(ctx, "s", func(context.Context) error { return nil }, "block", struct{}{}); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- j.Compensate(ctx) }()
	<-started
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r1.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err == nil {
		t.Fatal("interrupted compensation returned nil")
	}
	if err := r1.Compensate(ctx, j.Ref()); !errors.Is(err, compensation.ErrClosed) {
		t.Errorf("Compensate after Shutdown: %v", err)
	}
	if err := m1.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	r2 := e.runner(e.manager(false), reg)
	testkit.Eventually(t, 5*time.Second, "sweep resumes the interrupted compensation", func() bool {
		_, _ = r2.Sweep(ctx)
		info, err := r2.Inspect(ctx, j.Ref())
		return err == nil && info.State == compensation.StateCompensated
	})
	if calls != 2 {
		t.Errorf("%d handler calls, want 2", calls)
	}
}

// TestPeriodicSweep: after Start, the Runner finds and compensates an
// abandoned journal on its own.
func TestPeriodicSweep(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rc := newRecorder()
	reg := rc.registry(t)
	dead := e.manager(true)
	ctx := t.Context()
	l, err := dead.Acquire(ctx, "order-9")
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, e.runner(dead, reg).Journal(l), 2)
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := dead.Shutdown(sctx); err != nil { // dies; its lease expires
		t.Fatal(err)
	}
	r := e.runner(e.manager(false), reg, compensation.WithSweepInterval(100*time.Millisecond))
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "periodic sweep compensates the journal", func() bool {
		info, err := r.Inspect(ctx, compensation.Ref{Name: "order-9", Fence: l.Fence()})
		return err == nil && info.State == compensation.StateCompensated
	})
	if diff := cmp.Diff([]int{2, 1}, rc.steps()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// A Step after the owner released its lease is refused as a released lease,
// not as Redis being unavailable (which callers retry), and runs nothing.
func TestStepAfterReleaseIsNotAnOutage(t *testing.T) {
	c := setupJournal(t, "order-released", newRecorder())
	ctx := t.Context()
	runSteps(t, c.j, 1)
	if err := c.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ran := false
	err := c.j.Step(ctx, "step-2", func(context.Context) error { ran = true; return nil }, "undo", undoArgs{Step: 2})
	if !errors.Is(err, lease.ErrReleased) || errors.Is(err, compensation.ErrUnavailable) || ran {
		t.Fatalf("step after release: err %v, ran %v; want lease.ErrReleased (not ErrUnavailable) and no effect", err, ran)
	}
}

// deadReads is a go-redis hook that counts the dead-letter set's members a
// client reads back, and notes the commands that read the set.
type deadReads struct {
	key      string
	mu       sync.Mutex
	members  int
	commands []string
}

func (h *deadReads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *deadReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *deadReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); len(args) > 1 && args[1] == h.key {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.commands = append(h.commands, cmd.Name())
			switch c := cmd.(type) {
			case *redis.ScanCmd:
				kv, _ := c.Val()
				h.members += len(kv) / 2
			case *redis.StringSliceCmd:
				h.members += len(c.Val())
			case *redis.ZSliceCmd:
				h.members += len(c.Val())
			}
		}
		return err
	}
}

// TestRetryReadsOnlyTheKeysDeadLetters: Retry finds one key's dead-lettered
// journals among thousands of others without reading the others back (the
// dead-letter set is filtered in Redis), and a key holding glob characters
// matches only itself.
func TestRetryReadsOnlyTheKeysDeadLetters(t *testing.T) {
	t.Parallel()
	rc := newRecorder()
	c := deadLettered(t, "{i:7}:a*b", rc)
	ctx := t.Context()
	dead := c.env.prefix + "comp:dead"
	others := make([]redis.Z, 0, 3001)
	for i := range 3000 {
		others = append(others, redis.Z{Score: float64(i), Member: fmt.Sprintf("%d:{i:9}:other-%d", i+1, i)})
	}
	// Matched by the key's text read as a glob pattern ("*" any text).
	others = append(others, redis.Z{Score: 1, Member: "5:{i:7}:aXb"})
	if err := c.env.client.ZAdd(ctx, dead, others...).Err(); err != nil {
		t.Fatal(err)
	}

	h := &deadReads{key: dead}
	hooked := redis.NewClient(c.env.client.(*redis.Client).Options())
	t.Cleanup(func() { _ = hooked.Close() })
	hooked.AddHook(h)
	r := newRunner(t, hooked, c.env.prefix, newManager(t, hooked, c.env.prefix, false), rc.registry(t),
		compensation.WithAttempts(1))
	rc.setFailures(1, 0) // the cause is fixed
	n, err := r.Retry(ctx, "a*b")
	if err != nil || n != 1 {
		t.Fatalf("Retry = %d, %v; want the one journal", n, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.members != 1 {
		t.Errorf("Retry read %d members of the dead-letter set back (%v), want only the key's one", h.members, h.commands)
	}
	if got, err := c.env.client.ZScore(ctx, dead, "5:{i:7}:aXb").Result(); err != nil || got != 1 {
		t.Errorf("the other key's dead letter: %v, %v; want it left", got, err)
	}
}

// TestJournalsListDeadLetteredAfterTheIndex: a dead-lettered journal is kept
// for ever but its name's journal index expires with the open retention;
// the name's journals still list it once the index is gone.
func TestJournalsListDeadLetteredAfterTheIndex(t *testing.T) {
	t.Parallel()
	c := deadLettered(t, "{i:7}:order-9", newRecorder())
	ctx := t.Context()
	// What the open retention does to the index after the name's last write.
	if err := c.env.client.Del(ctx, c.env.prefix+"comp:f:{i:7}:order-9").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := c.r.Journals(ctx, "{i:7}:order-9", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Ref != c.j.Ref() || got[0].State != compensation.StateDeadLettered {
		t.Fatalf("journals of the name: %+v, want the dead-lettered one", got)
	}
}

// deadLettered journals one step of name whose compensation fails on its
// one attempt (rc's step 1 fails until told otherwise), and compensates the
// journal into the dead-letter set.
func deadLettered(t *testing.T, name string, rc *recorder) *journalCase {
	t.Helper()
	rc.setFailures(1, -1)
	c := setupJournal(t, name, rc, compensation.WithAttempts(1))
	runSteps(t, c.j, 1)
	if err := c.j.Compensate(t.Context()); !errors.Is(err, compensation.ErrDeadLettered) {
		t.Fatalf("Compensate: %v, want a dead letter", err)
	}
	return c
}

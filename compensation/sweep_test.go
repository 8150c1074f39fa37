package compensation_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestSweepCommitCheckUnknownOrFailing: a commit check that cannot tell
// (ErrCommitUnknown) leaves its sealed journal sealed and counts it as
// such; one that fails leaves its journal sealed for the next pass and
// reports the failure. Neither is compensated.
func TestSweepCommitCheckUnknownOrFailing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rc := newRecorder()
	reg := rc.registry(t)
	ctx := t.Context()
	dead := e.manager(true) // shut down without releasing: its leases expire
	dr := e.runner(dead, reg)
	var journals []*compensation.Journal
	for _, name := range []string{"unknown", "failing"} {
		l, err := dead.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		j := dr.Journal(l)
		runSteps(t, j, 1)
		if err := j.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		journals = append(journals, j)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := dead.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the dead owner's leases expired", func() bool {
		return e.client.Exists(ctx, dead.Key("unknown"), dead.Key("failing")).Val() == 0
	})

	lookupErr := errors.New("record store unreachable")
	checked := e.runner(e.manager(false), reg, compensation.WithCommitted(func(_ context.Context, ref compensation.Ref) (bool, error) {
		if ref.Name == "unknown" {
			return false, fmt.Errorf("%w: the record may have expired", compensation.ErrCommitUnknown)
		}
		return false, lookupErr
	}))
	rep, err := checked.Sweep(ctx)
	if !errors.Is(err, lookupErr) || errors.Is(err, compensation.ErrCommitUnknown) {
		t.Errorf("sweep error %v: want the failing check's error only", err)
	}
	if rep.Sealed != 1 || rep.Failed != 1 || rep.Compensated != 0 || rep.Committed != 0 {
		t.Errorf("sweep: %+v, want one sealed and one failed", rep)
	}
	for _, j := range journals {
		info, err := checked.Inspect(ctx, j.Ref())
		if err != nil || info.State != compensation.StateSealed {
			t.Errorf("%s: state %q (%v), want sealed", j.Ref(), info.State, err)
		}
	}
	if n := len(rc.steps()); n != 0 {
		t.Errorf("%d compensation calls, want none", n)
	}
}

// TestSweepKeepsJournalCreatedDuringPass: a journal's first Step indexes it,
// then its intent creates it. A sweep that reads the entry in between (no
// journal yet) and reaches it once the intent has landed, here while it
// closes an earlier journal, keeps the entry: when the owner then dies, the
// next sweep compensates the journal.
func TestSweepKeepsJournalCreatedDuringPass(t *testing.T) {
	t.Parallel()
	shared, prefix := testkit.SharedRedis(t)
	c := redis.NewClient(shared.Options())
	t.Cleanup(func() { _ = c.Close() })
	hook := &intentHook{}
	c.AddHook(hook)
	rc := newRecorder()
	reg := rc.registry(t)
	ctx := t.Context()
	m := newManager(t, c, prefix, false)

	// B's first intent is held until the sweep closes A (indexed before B),
	// then lands before the sweep reaches B's row.
	intentHeld, release := make(chan struct{}), make(chan struct{})
	stepErr := make(chan error, 1)
	r := newRunner(t, c, prefix, m, reg, compensation.WithCommitted(func(_ context.Context, ref compensation.Ref) (bool, error) {
		if ref.Name == "a" {
			close(release)
			if err := <-stepErr; err != nil {
				t.Errorf("B's step: %v", err)
			}
		}
		return true, nil
	}))

	// A: sealed, then its owner gave its lease up.
	la, err := m.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	ja := r.Journal(la)
	runSteps(t, ja, 1)
	if err := ja.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}

	lb, err := m.Acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	jb := r.Journal(lb)
	hook.arm(func(ctx context.Context) error {
		close(intentHeld)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	go func() {
		stepErr <- jb.Step(ctx, "step-1", func(context.Context) error { return nil }, "undo", undoArgs{Step: 1})
	}()
	<-intentHeld

	rep, err := r.Sweep(ctx)
	if err != nil || rep.Committed != 1 || rep.Removed != 0 {
		t.Fatalf("sweep with B's intent landing: %+v, %v; want A committed and nothing removed", rep, err)
	}
	if n, err := r.Counts(ctx); err != nil || n.Indexed != 1 {
		t.Fatalf("counts after the sweep: %+v, %v; want B indexed", n, err)
	}

	// B's owner goes away without sealing: the sweep compensates its step.
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := r.Sweep(ctx); err != nil || rep.Compensated != 1 {
		t.Fatalf("sweep after B's owner left: %+v, %v; want B compensated", rep, err)
	}
	info, err := r.Inspect(ctx, jb.Ref())
	if err != nil || info.State != compensation.StateCompensated {
		t.Fatalf("B: %q, %v; want compensated", info.State, err)
	}
	if got := rc.steps(); len(got) != 1 || got[0] != 1 {
		t.Errorf("compensation calls for steps %v, want B's step 1 only", got)
	}
}

// TestSweepKeepsJournalAfterFailedIntent: a Step indexes its journal, then
// its intent fails (Redis unavailable), so the journal does not exist. The
// sweep keeps the entry while the owner holds the lease under the journal's
// fence (its next Step may create the journal), and drops it once the lease
// is gone with no journal created. A later Step that does create the journal
// leaves it indexed, so that the sweep compensates it when its owner leaves.
func TestSweepKeepsJournalAfterFailedIntent(t *testing.T) {
	t.Parallel()
	shared, prefix := testkit.SharedRedis(t)
	c := redis.NewClient(shared.Options())
	t.Cleanup(func() { _ = c.Close() })
	hook := &intentHook{}
	c.AddHook(hook)
	rc := newRecorder()
	reg := rc.registry(t)
	ctx := t.Context()
	m := newManager(t, c, prefix, false)
	r := newRunner(t, c, prefix, m, reg)
	noop := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("connection reset by peer") }

	// Never created: dropped once its owner left.
	lg, err := m.Acquire(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	hook.arm(down)
	if err := r.Journal(lg).Step(ctx, "step-1", noop, "undo", undoArgs{Step: 1}); !errors.Is(err, compensation.ErrUnavailable) {
		t.Fatalf("step with its intent failing: %v, want ErrUnavailable", err)
	}
	if rep, err := r.Sweep(ctx); err != nil || rep.Live != 1 || rep.Removed != 0 {
		t.Fatalf("sweep while the owner holds its lease: %+v, %v; want the entry kept", rep, err)
	}
	if err := lg.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := r.Sweep(ctx); err != nil || rep.Removed != 1 {
		t.Fatalf("sweep after the owner left: %+v, %v; want the entry removed", rep, err)
	}

	// Created by the next Step on the same Journal.
	l, err := m.Acquire(ctx, "retried")
	if err != nil {
		t.Fatal(err)
	}
	j := r.Journal(l)
	hook.arm(down)
	if err := j.Step(ctx, "step-1", noop, "undo", undoArgs{Step: 1}); !errors.Is(err, compensation.ErrUnavailable) {
		t.Fatalf("step with its intent failing: %v, want ErrUnavailable", err)
	}
	if rep, err := r.Sweep(ctx); err != nil || rep.Removed != 0 {
		t.Fatalf("sweep while the owner holds its lease: %+v, %v; want the entry kept", rep, err)
	}
	if err := j.Step(ctx, "step-1", noop, "undo", undoArgs{Step: 1}); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := r.Sweep(ctx); err != nil || rep.Compensated != 1 {
		t.Fatalf("sweep after the owner left: %+v, %v; want the journal compensated", rep, err)
	}
	if n, err := r.Counts(ctx); err != nil || n.Indexed != 0 {
		t.Errorf("counts at the end: %+v, %v; want nothing indexed", n, err)
	}
}

// intentHook runs a function, once armed, in place of the next call of the
// comp_intent script: the journal has been indexed then, and is created
// when the function returns nil (the call goes on) but not when it returns
// an error (the call fails with it).
type intentHook struct {
	armed atomic.Pointer[func(context.Context) error]
}

func (h *intentHook) arm(f func(context.Context) error) { h.armed.Store(&f) }

func (h *intentHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *intentHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *intentHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd, scripts.CompIntent) {
			if f := h.armed.Swap(nil); f != nil {
				if err := (*f)(ctx); err != nil {
					cmd.SetErr(err)
					return err
				}
			}
		}
		return next(ctx, cmd)
	}
}

// isScript reports whether cmd runs s (EVALSHA, or EVAL of its text).
func isScript(cmd redis.Cmder, s *redis.Script) bool {
	a := cmd.Args()
	if len(a) < 2 {
		return false
	}
	body, _ := a[1].(string)
	switch cmd.Name() {
	case "evalsha":
		return body == s.Hash()
	case "eval":
		sum := sha1.Sum([]byte(body))
		return hex.EncodeToString(sum[:]) == s.Hash()
	}
	return false
}

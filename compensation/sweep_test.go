package compensation_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/compensation"
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

package compensation_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestOnCluster runs journals and their compensation on a Redis Cluster: every
// script touches the journal, the fence index and a lease key together, so a
// key outside the lease's slot would fail with CROSSSLOT.
func TestOnCluster(t *testing.T) {
	t.Parallel()
	cl := testkit.StartCluster(t)
	c := cl.Client(t)
	const prefix = "lh:"
	rc := newRecorder()
	reg := rc.registry(t)
	m := newManager(t, c, prefix, false)
	r := newRunner(t, c, prefix, m, reg)
	ctx := t.Context()
	for i, name := range []string{"order-a", "{i:3}:order-b", "{i:4}:order-c"} {
		l, err := m.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		j := r.Journal(l)
		for s := 1; s <= 2; s++ {
			if err := j.Step(ctx, fmt.Sprint(s), func(context.Context) error { return nil }, "undo", undoArgs{Step: s}); err != nil {
				t.Fatalf("%s step %d: %v", name, s, err)
			}
		}
		if i == 2 { // committed: never compensated
			if err := j.Seal(ctx); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := j.Compensate(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		info, err := r.Inspect(ctx, j.Ref())
		if err != nil || info.State != compensation.StateCompensated {
			t.Fatalf("%s: %+v, %v", name, info, err)
		}
	}
	if diff := cmp.Diff([]int{2, 1, 2, 1}, rc.steps()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	// A Step after the lease is gone indexes its journal but cannot create
	// it: the sweep checks the journal and the lease in their slot, then
	// drops the entry.
	l, err := m.Acquire(ctx, "{i:5}:order-d")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Journal(l).Step(ctx, "1", func(context.Context) error { return nil }, "undo", undoArgs{Step: 1}); err == nil {
		t.Fatal("step after release: no error")
	}
	rep, err := r.Sweep(ctx)
	if err != nil || rep.Compensated != 0 || rep.Removed != 1 {
		t.Errorf("sweep: %+v, %v; want the abandoned entry removed, nothing compensated", rep, err)
	}
}

package compensation_test

import (
	"context"
	"errors"
	"testing"

	"github.com/leasehold/leasehold/compensation"
)

// TestRegisterUndo: a typed handle names its handler in its registry only;
// duplicates and a nil registry are refused at registration.
func TestRegisterUndo(t *testing.T) {
	t.Parallel()
	reg, other := compensation.NewRegistry(), compensation.NewRegistry()
	u, err := compensation.RegisterUndo(reg, "pay.refund", func(context.Context, undoArgs) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if u.Name() != "pay.refund" || !u.RegisteredIn(reg) || u.RegisteredIn(other) || u.RegisteredIn(nil) {
		t.Errorf("handle %q: in reg %v, in other %v", u.Name(), u.RegisteredIn(reg), u.RegisteredIn(other))
	}
	if _, err := compensation.RegisterUndo(reg, "pay.refund", func(context.Context, int) error { return nil }); !errors.Is(err, compensation.ErrDuplicateHandler) {
		t.Errorf("duplicate: %v, want ErrDuplicateHandler", err)
	}
	if _, err := compensation.RegisterUndo(nil, "x", func(context.Context, int) error { return nil }); !errors.Is(err, compensation.ErrInvalid) {
		t.Errorf("nil registry: %v, want ErrInvalid", err)
	}
	if (compensation.Undo[int]{}).RegisteredIn(reg) {
		t.Error("the zero Undo is registered")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("MustRegister of a duplicate did not panic")
			}
		}()
		compensation.MustRegister(reg, "pay.refund", func(context.Context, undoArgs) error { return nil })
	}()
}

// TestInvoke: Invoke runs the named handler with the step in its context and
// turns a panic into a HandlerError.
func TestInvoke(t *testing.T) {
	t.Parallel()
	reg := compensation.NewRegistry()
	var got compensation.StepInfo
	compensation.MustRegister(reg, "ok", func(ctx context.Context, a undoArgs) error {
		got, _ = compensation.StepFromContext(ctx)
		got.Step = a.Step
		return nil
	})
	compensation.MustRegister(reg, "panics", func(context.Context, undoArgs) error { panic("boom") })
	info := compensation.StepInfo{Ref: compensation.Ref{Name: "k", Fence: 3}, Step: 9, Handler: "ok", Attempt: 1, Generation: 1}
	if err := reg.Invoke(t.Context(), info, []byte(`{"step":9}`)); err != nil || got != info {
		t.Errorf("Invoke: %v, step info %+v; want nil, %+v", err, got, info)
	}
	info.Handler = "panics"
	var he *compensation.HandlerError
	if err := reg.Invoke(t.Context(), info, []byte(`{}`)); !errors.As(err, &he) {
		t.Errorf("panicking handler: %v, want a HandlerError", err)
	}
	info.Handler = "missing"
	if err := reg.Invoke(t.Context(), info, nil); !errors.Is(err, compensation.ErrUnknownHandler) {
		t.Errorf("unknown handler: %v", err)
	}
}

// TestStepWith: a journal takes a typed step whose handle comes from its
// Runner's registry, compensates it with the typed arguments, and refuses a
// handle of another registry before the effect runs.
func TestStepWith(t *testing.T) {
	t.Parallel()
	rc := newRecorder()
	e := setup(t)
	m := e.manager(false)
	reg := compensation.NewRegistry()
	undo := compensation.MustRegister(reg, "undo", rc.handler)
	foreign := compensation.MustRegister(compensation.NewRegistry(), "undo", rc.handler)
	r := e.runner(m, reg)
	l, err := m.Acquire(t.Context(), "typed-step")
	if err != nil {
		t.Fatal(err)
	}
	j := r.Journal(l)
	ran := false
	err = compensation.StepWith(t.Context(), j, "s0", func(context.Context) error { ran = true; return nil }, foreign, undoArgs{Step: 1})
	if !errors.Is(err, compensation.ErrUnknownHandler) || ran {
		t.Fatalf("foreign handle: %v (ran %v), want ErrUnknownHandler before the effect", err, ran)
	}
	for i := 1; i <= 2; i++ {
		if err := compensation.StepWith(t.Context(), j, "s", func(context.Context) error { return nil }, undo, undoArgs{Step: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Compensate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := rc.steps(); len(got) != 2 || got[0] != 2 || got[1] != 1 {
		t.Fatalf("compensated steps %v, want [2 1] (the handler checks that its args are its step's)", got)
	}
}

package compensation

import (
	"context"
	"fmt"
)

// Undo is a compensation handler registered with [RegisterUndo] or
// [MustRegister]: its name in a [Registry] and the type of its arguments.
// A step given an Undo[T] ([StepWith], leasehold.StepWith) takes a T, so
// arguments that the handler would decode into the wrong type are a compile
// error, and a handler that is not registered cannot be named at all. The
// zero Undo names no handler; steps refuse it.
type Undo[T any] struct {
	reg  *Registry
	name string
}

// Name returns the name the handler is registered under (what a journal
// stores).
func (u Undo[T]) Name() string { return u.name }

// RegisteredIn reports whether u was registered in r: a step journaled
// through a Runner over another registry could not be compensated by u's
// handler.
func (u Undo[T]) RegisteredIn(r *Registry) bool { return r != nil && u.reg == r }

// RegisterUndo adds the compensation handler fn under name, like
// [Register], and returns its typed handle for [StepWith] and
// leasehold.StepWith. A name registered twice is refused
// ([ErrDuplicateHandler]).
func RegisterUndo[T any](r *Registry, name string, fn func(ctx context.Context, args T) error) (Undo[T], error) {
	if r == nil {
		return Undo[T]{}, fmt.Errorf("%w: RegisterUndo needs a registry", ErrInvalid)
	}
	if err := Register(r, name, fn); err != nil {
		return Undo[T]{}, err
	}
	return Undo[T]{reg: r, name: name}, nil
}

// StepWith is [Journal.Step] with a typed undo handle: args must be the
// handler's argument type, and undo must be registered in the Runner's
// registry (else an error matching [ErrUnknownHandler]).
func StepWith[T any](ctx context.Context, j *Journal, name string, do func(context.Context) error, undo Undo[T], args T) error {
	if !undo.RegisteredIn(j.r.reg) {
		return unknownUndo(undo.name)
	}
	return j.Step(ctx, name, do, undo.name, args)
}

// unknownUndo is the error of a step given an undo handle that was not
// registered in the registry its journal is compensated from.
func unknownUndo(name string) error {
	if name == "" {
		return fmt.Errorf("%w: the zero Undo (get one from RegisterUndo or MustRegister)", ErrUnknownHandler)
	}
	return fmt.Errorf("%w: %q was registered in another registry than the one steps are compensated from; "+
		"register it in the Runner's", ErrUnknownHandler, name)
}

// Invoke runs the handler registered under s.Handler once with args (JSON,
// as a journal stores them), as the Runner does: s is in the handler's
// context ([StepFromContext]) and a panic becomes an error. The Runner's
// retries, timeouts and fencing are not applied. It serves tests and tools
// that compensate outside a Runner (package leaseholdtest).
func (r *Registry) Invoke(ctx context.Context, s StepInfo, args []byte) error {
	return r.run(context.WithValue(ctx, stepKey{}, s), s.Handler, args)
}

package compensation

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sync"
)

// MaxHandlerNameLen bounds handler and step names, in bytes.
const MaxHandlerNameLen = 256

// Registry maps handler names to compensation handlers. Every process that
// may compensate a journal (the job's owner, a new owner after takeover, the
// recovery sweep, the CLI's retry) registers the same handlers under the same
// names: the journal stores only the name and the encoded arguments.
type Registry struct {
	mu       sync.RWMutex
	handlers map[string]func(ctx context.Context, args []byte) error
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{handlers: map[string]func(context.Context, []byte) error{}}
}

// Register adds the compensation handler fn under name. Its arguments are
// the value given to [Journal.Step], encoded as JSON and decoded into a T.
// [RegisterUndo] does the same and returns a typed handle, which steps take
// instead of the name so that the arguments' type is checked at compile
// time.
//
// A handler may run for a step whose effect never happened (the process died
// between journaling the intent and marking it done), and may run more than
// once for one step when a process dies mid-compensation: it must treat
// "nothing to undo" as success and be idempotent, for example by passing
// [StepInfo.IdempotencyKey] to the system it calls.
func Register[T any](r *Registry, name string, fn func(ctx context.Context, args T) error) error {
	if name == "" || len(name) > MaxHandlerNameLen || fn == nil {
		return fmt.Errorf("%w: handler name must be 1 to %d bytes and fn non-nil", ErrInvalid, MaxHandlerNameLen)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.handlers[name]; dup {
		return fmt.Errorf("%w: %q", ErrDuplicateHandler, name)
	}
	r.handlers[name] = func(ctx context.Context, raw []byte) error {
		var args T
		if err := json.Unmarshal(raw, &args); err != nil {
			return fmt.Errorf("%w: decode arguments of %q: %w", ErrInvalid, name, err)
		}
		return fn(ctx, args)
	}
	return nil
}

// MustRegister is [RegisterUndo] that panics on error, for package init:
//
//	var refund = compensation.MustRegister(reg, "pay.refund", func(ctx context.Context, a RefundArgs) error { ... })
func MustRegister[T any](r *Registry, name string, fn func(ctx context.Context, args T) error) Undo[T] {
	u, err := RegisterUndo(r, name, fn)
	if err != nil {
		panic(err)
	}
	return u
}

// Has reports whether a handler is registered under name.
func (r *Registry) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.handlers[name]
	return ok
}

// run calls the handler, turning a panic into an error.
func (r *Registry) run(ctx context.Context, name string, args []byte) (err error) {
	r.mu.RLock()
	h, ok := r.handlers[name]
	r.mu.RUnlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownHandler, name)
	}
	defer func() {
		if p := recover(); p != nil {
			err = &HandlerError{Handler: name, Err: fmt.Errorf("panic: %v\n%s", p, debug.Stack())}
		}
	}()
	if err := h(ctx, args); err != nil {
		return &HandlerError{Handler: name, Err: err}
	}
	return nil
}

package leasing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

type state uint8

const (
	stateHeld state = iota
	stateLost
	stateEnded // released, or ended by Shutdown
)

// Lease is one acquisition of a named lease. It is safe for concurrent use.
// Once Done is closed the lease is over for good: a new Acquire makes a new
// Lease with a new token and a greater fence.
type Lease struct {
	m      *Manager
	seq    uint64 // order of acquisition in its Manager, the renew order
	name   string
	token  string
	fence  uint64
	ttl    time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	mu        sync.Mutex
	state     state
	err       error
	releasing bool // a Release is in flight: a renewal's loss answer is not reported
	finishing bool // between BeginFinish and Forget/AbortFinish: see finish.go
	lastSent  time.Time
	deadline  time.Time
	lastErr   error
	onLost    []func(error)
	cancelled bool   // a renewal answered that an operator cancelled the attempt
	onCancel  func() // run once, when cancelled is first set (OnCancel chains them)
	watcher   Watcher
}

// Name returns the lease name.
func (l *Lease) Name() string { return l.name }

// Token returns the owner token of this acquisition. It is a capability (it
// lets its bearer release the lease): keep it out of logs.
func Token(l *Lease) string { return l.token }

// Fence returns the fencing token: strictly greater than the fence of every
// earlier acquisition of the same name (see the package documentation for
// what this assumes). Pass it to downstream writes that must reject a zombie.
func (l *Lease) Fence() uint64 { return l.fence }

// TTL returns the lease's TTL.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Done returns a channel closed when the lease ends: lost, released
// (Release, or Forget), or ended by Shutdown. Err then tells why.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held, and afterwards the cause:
// [ErrStolen], [ErrExpired], [ErrRenewDeadline] (all errors.Is [ErrLost]),
// [ErrReleased] or [ErrClosed].
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Context returns a context derived from the one given to Acquire or Adopt,
// cancelled with the lease's cause (context.Cause) when the lease ends. Run
// the work the lease protects under it.
func (l *Lease) Context() context.Context { return l.ctx }

// Deadline returns the local deadline: the send time of the last successful
// renewal (or of the acquisition) plus TTL minus drift, on the local monotonic
// clock. Past it, the lease is given up even if the backend never answers.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// OnLost registers f to run once, with the cause, when the lease is lost
// (stolen, expired, renewals failed past the deadline, or a fenced write
// refused). It does not run when the lease is released or ended by Shutdown.
// Callbacks run in order in a goroutine of their own; Shutdown waits for
// them. Registered after the loss, f runs at once in the caller's goroutine.
func (l *Lease) OnLost(f func(err error)) {
	l.mu.Lock()
	switch l.state {
	case stateHeld:
		l.onLost = append(l.onLost, f)
		l.mu.Unlock()
	case stateLost:
		err := l.err
		l.mu.Unlock()
		f(err)
	default:
		l.mu.Unlock()
	}
}

// Release gives the lease back, only if this owner still holds it (one
// script). It returns nil if released (or already released), an error
// wrapping [ErrLost] if the lease had been lost (which Release then reports
// like the renewer would), or an error wrapping [ErrUnavailable] if the
// backend could not be reached: the lease is then still held and renewed, and
// Release may be retried.
func (l *Lease) Release(ctx context.Context) (err error) {
	m := l.m
	ctx, span := m.tracer.Start(ctx, "lease.release", trace.WithAttributes(
		attribute.String("lease.name", l.name), attribute.Int64("lease.fence", int64(l.fence)))) //nolint:gosec // a fence is a microsecond timestamp or one above the last: far below 2^63
	defer func() { endSpan(span, err) }()
	l.mu.Lock()
	switch l.state {
	case stateLost:
		err := l.err
		l.mu.Unlock()
		return err
	case stateEnded:
		err := l.err
		l.mu.Unlock()
		if errors.Is(err, ErrReleased) {
			return nil
		}
		return err
	}
	l.releasing = true
	l.mu.Unlock()

	err = m.b.Release(ctx, l.name, l.token, l.fence)
	switch {
	case err == nil:
		l.end(ErrReleased)
		return nil
	case errors.Is(err, ErrLost):
		m.lose(l, err)
		return fmt.Errorf("lease: release %q: %w", l.name, err)
	default:
		l.mu.Lock()
		l.releasing = false
		l.mu.Unlock()
		return fmt.Errorf("lease: release %q: %w", l.name, err)
	}
}

// end finishes the lease without running OnLost callbacks.
func (l *Lease) end(cause error) { l.finish(cause, false) }

// finish moves a held lease to its final state, closes Done and cancels the
// context. It returns the OnLost callbacks to run (for a loss) and whether
// the lease was held.
func (l *Lease) finish(cause error, lost bool) ([]func(error), bool) {
	l.mu.Lock()
	if l.state != stateHeld {
		l.mu.Unlock()
		return nil, false
	}
	l.state, l.err = stateEnded, cause
	if lost {
		l.state = stateLost
	}
	cbs, w := l.onLost, l.watcher
	l.onLost, l.watcher = nil, nil
	l.mu.Unlock()
	l.m.untrack(l)
	// Cancel first: whoever sees Done closed also sees the context ended.
	l.cancel(cause)
	close(l.done)
	if w != nil {
		w.LeaseEnded(cause)
	}
	if !lost {
		cbs = nil
	}
	return cbs, true
}

// renewed applies the outcome of a renewal sent at sent.
func (l *Lease) renewed(sent time.Time, r RenewResult) (transientErr bool) {
	m := l.m
	switch {
	case r.Err == nil:
		valid := r.Valid
		if valid <= 0 {
			valid = l.ttl
		}
		nd := sent.Add(valid - driftFor(m.cfg, l.ttl))
		// No timer to move: the deadline watcher reads deadlines when it
		// wakes, so a renewal costs no timer operation.
		l.mu.Lock()
		if l.state == stateHeld && nd.After(l.deadline) {
			l.lastSent, l.deadline, l.lastErr = sent, nd, nil
		}
		var (
			cb func()
			w  Watcher
		)
		if r.Cancelled && !l.cancelled && l.state == stateHeld {
			l.cancelled, cb, l.onCancel, w = true, l.onCancel, nil, l.watcher
		}
		l.mu.Unlock()
		if cb != nil {
			cb()
		}
		if w != nil {
			w.LeaseCancelled()
		}
		return false
	case errors.Is(r.Err, ErrLost):
		// While the holder's own script may be deleting the key (Release, or
		// a finishing script), a missing or changed key is no news: the
		// outcome of that script decides.
		l.mu.Lock()
		ending := l.releasing || l.finishing
		l.mu.Unlock()
		if !ending {
			m.lose(l, r.Err)
		}
		return false
	default:
		l.mu.Lock()
		l.lastErr = r.Err
		l.mu.Unlock()
		return true
	}
}

package leasing

import "fmt"

// Ending a lease inside the holder's last script: see "Ending a lease in a
// script" in the package documentation.

// EndsInScript reports whether a fenced script ends a lease of m by
// deleting its key (KEYS[1]), so that the holder may end it with
// [BeginFinish] and [Forget] instead of [Lease.Release]. It is
// true for the Redis backend of [NewManager], and for a Backend that
// implements [ScriptEnder] and says so; false otherwise (a Backend wrapping
// the Redis one, the Redlock backend, whose lease lives on several masters).
func EndsInScript(m *Manager) bool {
	switch b := m.b.(type) {
	case *redisBackend:
		return true
	case ScriptEnder:
		return b.EndsInScript()
	}
	return false
}

// ScriptEnder is implemented by a [Backend] whose lease is exactly the key
// Key(name) on the store where Fenced runs scripts, so that a script that
// deletes that key ends the lease ([EndsInScript]). The Redis backend
// implements it; a Backend that wraps it does not unless it implements
// ScriptEnder itself.
type ScriptEnder interface {
	// EndsInScript reports whether deleting Key(name) from a fenced script
	// ends the lease name.
	EndsInScript() bool
}

// BeginFinish marks l as finishing: its holder is about to send a fenced
// script that deletes the lease key in the same step as its write. Until the
// finish is settled with [Forget] or [AbortFinish] (one of them
// must follow), a renewal that finds the lease gone or taken is not reported
// and the local deadline does not end l (see the package documentation). It
// returns l's cause when l has already ended, and an error
// wrapping [ErrInvalid] when l is already finishing.
func BeginFinish(l *Lease) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.state != stateHeld:
		return l.err
	case l.finishing:
		return fmt.Errorf("%w: lease %q is already finishing", ErrInvalid, l.name)
	}
	l.finishing = true
	return nil
}

// Forget ends l locally, without a call to the backend, as a successful
// [Lease.Release] does: the Manager stops renewing it, Done closes, Context is
// cancelled and Err returns [ErrReleased]; OnLost callbacks do not run. Call
// it when the lease key is gone because the holder's own script deleted it
// (after BeginFinish). On a lease that has already ended it does nothing.
func Forget(l *Lease) { l.end(ErrReleased) }

// AbortFinish settles a finish whose script did not end the lease. refused
// says that the script answered that the caller no longer holds the lease
// (scripts.StatusLost): l then ends lost, like a fenced write refused by
// [Fenced] (OnLost callbacks run, Context cancelled). Otherwise (the
// script did not run, or its answer never came) l is held and renewed again:
// the next renewal decides whether it still exists, and when the local
// deadline passed meanwhile, l is lost now ([ErrRenewDeadline]) and released
// by the renewer once the backend answers. On a lease that has already ended,
// or that is not finishing, it does nothing.
func AbortFinish(l *Lease, refused bool) {
	m := l.m
	l.mu.Lock()
	if l.state != stateHeld || !l.finishing {
		l.mu.Unlock()
		return
	}
	l.finishing = false
	deadline, lastErr := l.deadline, l.lastErr
	l.mu.Unlock()
	if refused {
		m.lose(l, errFencedLost)
		return
	}
	now := m.clock.Now()
	if !now.Before(deadline) {
		if m.lose(l, deadlineCause(lastErr)) {
			m.abandon(l)
		}
		return
	}
	// The deadline watcher skipped l while it was finishing: watch it again.
	m.mu.Lock()
	if !m.cbClosed {
		m.armDeadline(deadline, now)
	}
	m.mu.Unlock()
}

package leasing

// OnCancel registers f to run once when a renewal of the lease answers that
// an operator asked to cancel the attempt holding it (the request is stored
// with the lease for its fence; see the Redis backend's lease_cancel.lua).
// The lease stays held and renewed: the holder stops its work, undoes what
// it must and ends the lease itself. f runs in the renewer goroutine and
// must not block; registered after the request was seen, f runs at once in
// the caller's goroutine. It does not run once the lease has ended.
func (l *Lease) OnCancel(f func()) {
	l.mu.Lock()
	if l.state != stateHeld {
		l.mu.Unlock()
		return
	}
	if !l.cancelled {
		// One callback is the usual case (the worker's): no slice for it.
		if prev := l.onCancel; prev != nil {
			l.onCancel = func() { prev(); f() }
		} else {
			l.onCancel = f
		}
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	f()
}

// Cancelled reports whether a renewal answered that an operator asked to
// cancel the attempt holding the lease.
func (l *Lease) Cancelled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cancelled
}

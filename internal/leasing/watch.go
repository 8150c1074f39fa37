package leasing

// Watcher is told what happens to a lease it watches (see [Watch]): the
// worker's running job implements it, so that a job costs no callback
// closures and no context.AfterFunc on the lease's context.
type Watcher interface {
	// LeaseCancelled runs once when a renewal answers that an operator asked
	// to cancel the attempt (see [Lease.OnCancel]), in the renewer's
	// goroutine: it must not block.
	LeaseCancelled()
	// LeaseEnded runs once when the lease ends for any cause (lost,
	// released, the Manager closed), with the cause the lease's context
	// carries, after the context is cancelled and Done closed; in the
	// goroutine that ended it: it must not block.
	LeaseEnded(cause error)
}

// Watch makes w the watcher of l (one a lease; a second replaces the
// first). On a lease already cancelled by an operator, w.LeaseCancelled runs
// at once; on one already ended, w.LeaseEnded runs at once (and the cancel is
// not reported), both in the caller's goroutine. A function of the package,
// not a method: the public lease.Lease does not offer it.
func Watch(l *Lease, w Watcher) {
	l.mu.Lock()
	if l.state != stateHeld {
		err := l.err
		l.mu.Unlock()
		w.LeaseEnded(err)
		return
	}
	l.watcher = w
	cancelled := l.cancelled
	l.mu.Unlock()
	if cancelled {
		w.LeaseCancelled()
	}
}

// Unwatch stops l's watcher from being told anything more.
func Unwatch(l *Lease) {
	l.mu.Lock()
	l.watcher = nil
	l.mu.Unlock()
}

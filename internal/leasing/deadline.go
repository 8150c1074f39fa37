package leasing

import (
	"fmt"
	"time"
)

// The deadline watcher: one timer per Manager, armed for the earliest local
// deadline of the held leases. When it fires (in a goroutine of its own, not
// the renewer's, so that a renewal hung on a dead backend cannot delay it)
// it ends every lease whose deadline has passed and re-arms for the next
// one. Renewals only move deadlines forward, so they never touch the timer;
// a watcher that wakes early finds nothing due and sleeps again. With 10,000
// leases renewed each interval, that is one scan per TTL or so instead of
// 10,000 timer operations.

// armDeadline makes the watcher fire no later than deadline. m.mu is held.
func (m *Manager) armDeadline(deadline, now time.Time) {
	if !m.dlAt.IsZero() && !deadline.Before(m.dlAt) {
		return
	}
	m.dlAt = deadline
	if m.dlTimer == nil {
		m.dlTimer = m.clock.AfterFunc(deadline.Sub(now), m.checkDeadlines)
		return
	}
	m.dlTimer.Reset(deadline.Sub(now))
}

// checkDeadlines ends the leases past their local deadline and re-arms the
// watcher for the earliest remaining one.
func (m *Manager) checkDeadlines() {
	m.mu.Lock()
	if m.cbClosed {
		m.mu.Unlock()
		return
	}
	m.dlAt = time.Time{} // leases tracked during the scan arm it again
	leases := make([]*Lease, 0, len(m.held))
	for l := range m.held {
		leases = append(leases, l)
	}
	m.mu.Unlock()

	now := m.clock.Now()
	var (
		next time.Time
		due  []*Lease
		errs []error
	)
	for _, l := range leases {
		l.mu.Lock()
		// A finishing lease is settled by its holder (AbortFinish checks
		// the deadline and watches the lease again).
		if l.state == stateHeld && !l.finishing {
			if !now.Before(l.deadline) {
				due = append(due, l)
				errs = append(errs, l.lastErr)
			} else if next.IsZero() || l.deadline.Before(next) {
				next = l.deadline
			}
		}
		l.mu.Unlock()
	}
	if !next.IsZero() {
		m.mu.Lock()
		if !m.cbClosed {
			m.armDeadline(next, now)
		}
		m.mu.Unlock()
	}
	for i, l := range due {
		if m.lose(l, deadlineCause(errs[i])) {
			m.abandon(l)
		}
	}
}

// deadlineCause is the cause of a loss on the local deadline, with the last
// renewal error if there was one.
func deadlineCause(lastErr error) error {
	if lastErr == nil {
		return ErrRenewDeadline
	}
	return fmt.Errorf("%w (last renewal error: %w)", ErrRenewDeadline, lastErr)
}

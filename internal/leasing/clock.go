package leasing

import "time"

// Clock is the source of time for local deadlines and renew timers. The
// default is the system clock, whose readings carry the monotonic clock, so
// that a wall clock step does not move a deadline. Tests inject a fake clock
// to drive deadlines without sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer whose C channel receives once after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine after d. The returned timer's C
	// is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer that the Manager uses.
type Timer interface {
	// C returns the channel that receives when the timer fires (nil for
	// AfterFunc timers).
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was active.
	Stop() bool
	// Reset makes the timer fire after d; it reports whether it was active.
	Reset(d time.Duration) bool
}

// SystemClock is the default [Clock]: the time package.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (SystemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

// AfterFunc wraps time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer {
	return sysTimer{time.AfterFunc(d, f)}
}

type sysTimer struct{ t *time.Timer }

func (s sysTimer) C() <-chan time.Time        { return s.t.C }
func (s sysTimer) Stop() bool                 { return s.t.Stop() }
func (s sysTimer) Reset(d time.Duration) bool { return s.t.Reset(d) }

package testkit

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, failing the test with what when it
// still does not hold after within. It polls at once, then after 1ms,
// doubling the wait up to 50ms, so that quick conditions are seen quickly
// and slow ones do not spin.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	wait := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// Progressing waits until cond reports done, for work whose length depends on
// the machine (thousands of jobs under -race beside other work): instead of
// one deadline for the whole, it fails the test only when the work stalls,
// that is when the count cond reports (jobs finished, say) stays the same for
// stall. A slow machine passes; a product that stops making progress fails,
// with how far it got. It polls like [Eventually].
func Progressing(t testing.TB, stall time.Duration, what string, cond func() (count int, done bool)) {
	t.Helper()
	last, done := cond()
	moved := time.Now()
	wait := time.Millisecond
	for !done {
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
		var n int
		n, done = cond()
		switch {
		case n != last:
			last, moved = n, time.Now()
		case !done && time.Since(moved) > stall:
			t.Fatalf("no progress for %v waiting for %s: stuck at %d", stall, what, last)
		}
	}
}

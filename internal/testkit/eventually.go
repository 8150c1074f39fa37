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

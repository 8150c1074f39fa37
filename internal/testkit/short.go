package testkit

import "testing"

// SkipShort skips t under `go test -short` (make test-short), the fast loop
// of unit and fake-store tests with the shared Redis: for a test that needs
// what that loop leaves out, named by needs (a Kafka broker, kfake included;
// Jaeger; a Redis Cluster; a chaos run; a browser; a built binary). Without
// -short (make test, CI) it does nothing, so there a missing server still
// fails the test.
func SkipShort(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: this test needs %s", needs)
	}
}

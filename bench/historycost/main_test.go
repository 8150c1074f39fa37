package main

import "testing"

// The program runs end to end on a private redis-server and prints its
// figures (a few operations: the figures are not judged here).
func TestRun(t *testing.T) {
	if err := run("", 100, 1); err != nil {
		t.Fatal(err)
	}
}

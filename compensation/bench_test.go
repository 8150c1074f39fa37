package compensation_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/compensation"
)

// BenchmarkStep measures one journaled step with a no-op effect: the intent
// (fenced script) and the done mark, two round trips to the shared Redis.
func BenchmarkStep(b *testing.B) {
	c, prefix := sharedForBench(b)
	rc := newRecorder()
	m := newManager(b, c, prefix, false)
	r := newRunner(b, c, prefix, m, rc.registry(b), compensation.WithMaxSteps(1<<30))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "bench-step")
	if err != nil {
		b.Fatal(err)
	}
	j := r.Journal(l)
	noop := func(context.Context) error { return nil }
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := j.Step(ctx, "s", noop, "undo", undoArgs{Step: i + 1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompensate measures compensating a 10-step journal: the
// compensation lease, begin, a claim and a finish per step, settle, release.
func BenchmarkCompensate(b *testing.B) {
	c, prefix := sharedForBench(b)
	rc := newRecorder()
	m := newManager(b, c, prefix, false)
	r := newRunner(b, c, prefix, m, rc.registry(b))
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		l, err := m.Acquire(ctx, fmt.Sprintf("bench-comp-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		j := r.Journal(l)
		runSteps(b, j, 10)
		b.StartTimer()
		if err := j.Compensate(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

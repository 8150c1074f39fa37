package benchkit_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/benchkit"
)

func TestParallelRunsEachIndexOnceWithinWidth(t *testing.T) {
	const n, width = 200, 7
	calls := make([]atomic.Int32, n)
	var running, peak atomic.Int32
	err := benchkit.Parallel(n, width, func(i int) error {
		r := running.Add(1)
		for {
			p := peak.Load()
			if r <= p || peak.CompareAndSwap(p, r) {
				break
			}
		}
		time.Sleep(100 * time.Microsecond)
		calls[i].Add(1)
		running.Add(-1)
		return nil
	})
	if err != nil {
		t.Fatalf("Parallel: %v", err)
	}
	for i := range calls {
		if c := calls[i].Load(); c != 1 {
			t.Errorf("f(%d) called %d times, want 1", i, c)
		}
	}
	if p := peak.Load(); p > width || p < 2 {
		t.Errorf("peak concurrency %d, want 2 to %d", p, width)
	}
}

func TestParallelStopsAtFirstError(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int32
	err := benchkit.Parallel(1000, 4, func(i int) error {
		calls.Add(1)
		if i == 10 {
			return boom
		}
		time.Sleep(200 * time.Microsecond)
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Parallel = %v, want boom", err)
	}
	// The other calls take 200µs each: had Parallel gone on after the error,
	// most of the 1,000 would have run.
	if c := calls.Load(); c >= 100 {
		t.Fatalf("%d calls after an error at index 10, want it to stop", c)
	}
}

func TestParallelZero(t *testing.T) {
	if err := benchkit.Parallel(0, 8, func(int) error { return errors.New("called") }); err != nil {
		t.Fatalf("Parallel(0, ...) = %v", err)
	}
}

func TestEachDrainsAndReportsFirstError(t *testing.T) {
	items := make(chan int) // unbuffered: a blocked sender would hang the test
	go func() {
		defer close(items)
		for i := range 500 {
			items <- i
		}
	}()
	boom := errors.New("boom")
	var mu sync.Mutex
	seen := map[int]bool{}
	err := benchkit.Each(items, 3, func(i int) error {
		mu.Lock()
		seen[i] = true
		mu.Unlock()
		if i == 5 {
			return boom
		}
		time.Sleep(200 * time.Microsecond)
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Each = %v, want boom", err)
	}
	if !seen[5] {
		t.Fatal("item 5 was not passed to f")
	}
	// The other calls take 200µs each: had Each gone on calling f after
	// the error, most of the 500 items would have reached it.
	if len(seen) >= 100 {
		t.Fatalf("%d items passed to f after an error at item 5", len(seen))
	}
}

func TestEachAll(t *testing.T) {
	items := make(chan int, 100)
	for i := range 100 {
		items <- i
	}
	close(items)
	var sum atomic.Int64
	if err := benchkit.Each(items, 4, func(i int) error { sum.Add(int64(i)); return nil }); err != nil {
		t.Fatalf("Each: %v", err)
	}
	if s := sum.Load(); s != 99*100/2 {
		t.Fatalf("sum of items seen %d, want %d", s, 99*100/2)
	}
}

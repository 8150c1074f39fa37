package benchkit

import (
	"sync"
	"sync/atomic"
)

// Parallel calls f(0), ..., f(n-1) on up to width goroutines and returns the
// first error. After an error no further call starts; calls already running
// finish before Parallel returns.
func Parallel(n, width int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		first atomic.Pointer[error]
	)
	for range min(width, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// Each calls f for every item received from items, on width goroutines, until
// items is closed, and returns the first error. After an error the items
// still to come are received and dropped rather than passed to f, so that
// the goroutine sending them never blocks.
func Each[T any](items <-chan T, width int, f func(T) error) error {
	var (
		wg    sync.WaitGroup
		first atomic.Pointer[error]
	)
	for range max(width, 1) {
		wg.Go(func() {
			for it := range items {
				if first.Load() != nil {
					continue
				}
				if err := f(it); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

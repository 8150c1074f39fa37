package lease_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/lease"
)

// Two Managers, 50 goroutines each, contend for 100 names. An observer
// outside the leases (a per-name counter raised on entry and lowered on exit
// of the critical section) must never see two holders, and fences must rise
// in the order the critical sections run.
func TestMutualExclusion(t *testing.T) {
	t.Parallel()
	const (
		managers   = 2
		goroutines = 50
		names      = 100
		run        = 3 * time.Second
	)
	m1, c, prefix := setup(t, lease.WithTTL(2*time.Second))
	ms := []*lease.Manager{m1}
	for range managers - 1 {
		ms = append(ms, start(t, c, lease.WithPrefix(prefix), lease.WithTTL(2*time.Second)))
	}

	var (
		inside   [names]atomic.Int32
		lastFen  [names]uint64 // written only inside the critical section
		acquired atomic.Int64
		held     atomic.Int64
		failures = make(chan string, 10)
		wg       sync.WaitGroup
	)
	fail := func(msg string) {
		select {
		case failures <- msg:
		default:
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	for _, m := range ms {
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					n := rand.IntN(names)
					l, err := m.Acquire(context.WithoutCancel(ctx), "x"+strconv.Itoa(n))
					if errors.Is(err, lease.ErrHeld) {
						held.Add(1)
						continue
					}
					if err != nil {
						fail("acquire: " + err.Error())
						return
					}
					acquired.Add(1)
					if v := inside[n].Add(1); v != 1 {
						fail("two holders of x" + strconv.Itoa(n))
					}
					if l.Fence() <= lastFen[n] {
						fail("fence went down on x" + strconv.Itoa(n))
					}
					lastFen[n] = l.Fence()
					time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
					inside[n].Add(-1)
					if err := l.Release(context.WithoutCancel(ctx)); err != nil {
						fail("release: " + err.Error())
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	if acquired.Load() < names || held.Load() == 0 {
		t.Fatalf("too little contention to mean anything: %d acquired, %d refused", acquired.Load(), held.Load())
	}
	t.Logf("%d acquisitions, %d refused as held", acquired.Load(), held.Load())
}

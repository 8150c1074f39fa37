package redlock_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/lease/redlock"
)

// TestNewValidates refuses configurations that cannot form a quorum safely.
func TestNewValidates(t *testing.T) {
	for _, n := range []int{0, 2, 4} {
		if _, err := redlock.NewFromAddrs(make([]string, n)); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("%d masters: err = %v, want ErrInvalid", n, err)
		}
	}
	if _, err := redlock.NewFromAddrs([]string{"127.0.0.1:1"}, redlock.WithTimeoutFactor(2)); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("timeout factor 2: err = %v, want ErrInvalid", err)
	}
}

// TestAcquireHeldRelease covers one lease's life: held error with the
// holder, release, a greater fence for the next owner, no fenced scripts.
func TestAcquireHeldRelease(t *testing.T) {
	ms := startMasters(t, 3)
	b := ms.backend(t)
	m1, m2 := manager(t, b), manager(t, b)
	ctx := ctxT(t, 20*time.Second)

	l, err := m1.Acquire(ctx, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if time.Until(l.Deadline()) <= 0 || time.Until(l.Deadline()) > testTTL {
		t.Fatalf("deadline in %s, want within (0, %s]", time.Until(l.Deadline()), testTTL)
	}
	_, err = m2.Acquire(ctx, "job-1")
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("second acquire: err = %v, want *lease.HeldError", err)
	}
	if he.Token != leasing.Token(l) || he.Remaining <= 0 || he.Remaining > testTTL {
		t.Fatalf("held error = token match %v, remaining %s", he.Token == leasing.Token(l), he.Remaining)
	}
	// Acquire is fail-fast: it returns once a quorum locked and cancels the
	// answers still in flight, so a master past the quorum may never see the
	// token. The promise is a quorum holding it and no master holding
	// another.
	holding := 0
	for i, s := range ms.servers {
		v, err := s.Client(t).Get(ctx, b.Key("job-1")).Result()
		switch {
		case err == nil && v == leasing.Token(l):
			holding++
		case err == nil:
			t.Fatalf("master %d holds %q, not the holder's token", i, v)
		case !errors.Is(err, redis.Nil):
			t.Fatalf("master %d: %v", i, err)
		}
	}
	if holding < b.Quorum() {
		t.Fatalf("%d masters hold the token; want a quorum of %d", holding, b.Quorum())
	}
	if _, err := leasing.Fenced(ctx, m1, l, nil, nil); !errors.Is(err, redlock.ErrFencedUnsupported) {
		t.Fatalf("fenced: err = %v, want ErrFencedUnsupported", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l.Err(), lease.ErrReleased) {
		t.Fatalf("after release Err = %v", l.Err())
	}
	l2, err := m2.Acquire(ctx, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if l2.Fence() <= l.Fence() {
		t.Fatalf("fence %d after %d: not increasing", l2.Fence(), l.Fence())
	}
	// A release by a token that no longer holds it changes nothing.
	if err := b.Release(ctx, "job-1", leasing.Token(l), l.Fence()); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("stale release: err = %v, want ErrLost", err)
	}
	if l2.Err() != nil {
		t.Fatalf("holder lost after a stale release: %v", l2.Err())
	}
}

// TestMutualExclusion: three Managers (as three processes, each with its own
// clients) contend for a few names. An observer checks, as each holder
// enters, that the previous holder of the name is no longer live (it left
// the critical section, or its local deadline passed: on a loaded machine a holder may
// stall past its TTL, and then losing the lease is the correct outcome), and
// that fences grow with each holder.
func TestMutualExclusion(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d_masters", n), func(t *testing.T) {
			ms := startMasters(t, n)
			var mgrs []*lease.Manager
			for range 3 {
				mgrs = append(mgrs, manager(t, ms.backend(t)))
			}
			const names, workers, want = 4, 8, 50
			var (
				mu        sync.Mutex
				holder    [names]*lease.Lease
				lastFence [names]uint64
				acquired  atomic.Int64
				relErrs   atomic.Int64
				wg        sync.WaitGroup
			)
			ctx := ctxT(t, 60*time.Second)
			minEnd, maxEnd := time.Now().Add(3*time.Second), time.Now().Add(20*time.Second)
			for w := range workers * len(mgrs) {
				m := mgrs[w%len(mgrs)]
				wg.Go(func() {
					for now := time.Now(); now.Before(maxEnd) && (now.Before(minEnd) || acquired.Load() < want); now = time.Now() {
						i := rand.IntN(names)
						l, err := m.Acquire(ctx, fmt.Sprintf("name-%d", i))
						if err != nil {
							if !errors.Is(err, lease.ErrHeld) && !errors.Is(err, lease.ErrUnavailable) {
								t.Errorf("acquire: %v", err)
								return
							}
							time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
							continue
						}
						mu.Lock()
						if p := holder[i]; p != nil && p.Err() == nil && time.Now().Before(p.Deadline()) {
							t.Errorf("name-%d: two live holders (fences %d and %d)", i, p.Fence(), l.Fence())
						}
						holder[i] = l
						if l.Fence() <= lastFence[i] {
							t.Errorf("name-%d: fence %d after %d", i, l.Fence(), lastFence[i])
						}
						lastFence[i] = l.Fence()
						mu.Unlock()
						acquired.Add(1)
						time.Sleep(time.Duration(1+rand.IntN(3)) * time.Millisecond)
						mu.Lock()
						if holder[i] == l {
							holder[i] = nil // leaving the critical section
						}
						mu.Unlock()
						if err := l.Release(ctx); err != nil {
							// A holder that stalled past its deadline, or a
							// master timing out, leaves the key to expire.
							if !errors.Is(err, lease.ErrLost) && !errors.Is(err, lease.ErrUnavailable) {
								t.Errorf("release: %v", err)
							}
							relErrs.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if acquired.Load() < want {
				t.Fatalf("only %d acquisitions: contention not exercised", acquired.Load())
			}
			t.Logf("%d acquisitions, %d releases left to expiry", acquired.Load(), relErrs.Load())
		})
	}
}

// TestMinorityDown: with a minority of masters dead or hung (SIGSTOP),
// leases are acquired promptly (fail-fast: nobody waits for the hung
// master), renewed past several TTLs, and released.
func TestMinorityDown(t *testing.T) {
	for _, n := range []int{3, 5} {
		for _, mode := range []string{"killed", "paused"} {
			t.Run(fmt.Sprintf("%d_masters_%s", n, mode), func(t *testing.T) {
				ms := startMasters(t, n)
				b := ms.backend(t)
				m := manager(t, b)
				for _, s := range ms.servers[:n/2] {
					if mode == "killed" {
						s.Kill()
					} else {
						s.Pause()
					}
				}
				ctx := ctxT(t, 20*time.Second)
				start := time.Now()
				l, err := m.Acquire(ctx, "minority")
				if err != nil {
					t.Fatalf("acquire with %d of %d masters %s: %v", n/2, n, mode, err)
				}
				if took := time.Since(start); took > testTTL/2 {
					t.Fatalf("acquire took %s with %d masters %s, want under %s", took, n/2, mode, testTTL/2)
				}
				time.Sleep(2 * testTTL)
				if l.Err() != nil {
					t.Fatalf("lost after 2 TTLs with a quorum up: %v", l.Err())
				}
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestQuorumLost: when a majority of masters dies, a held lease is lost at
// its local deadline (not before, and no later than one TTL after the last
// renewal), and new acquisitions fail with an error that names the quorum.
func TestQuorumLost(t *testing.T) {
	ms := startMasters(t, 3)
	b := ms.backend(t)
	m := manager(t, b)
	ctx := ctxT(t, 20*time.Second)
	l, err := m.Acquire(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	ms.servers[0].Kill()
	ms.servers[1].Kill()
	killed := time.Now()
	deadline := l.Deadline() // the last successful renewal's, at most
	select {
	case <-l.Done():
	case <-time.After(2 * testTTL):
		t.Fatal("lease not lost two TTLs after losing the quorum")
	}
	lostAt := time.Now()
	if !errors.Is(l.Err(), lease.ErrRenewDeadline) {
		t.Fatalf("cause = %v, want ErrRenewDeadline", l.Err())
	}
	if lostAt.Sub(killed) > testTTL+200*time.Millisecond {
		t.Fatalf("lost %s after the quorum went, want within a TTL (%s)", lostAt.Sub(killed), testTTL)
	}
	if lostAt.Before(deadline) {
		t.Fatalf("lost at %s, before the deadline %s it had when the quorum went", lostAt, deadline)
	}

	_, err = m.Acquire(ctx, "other")
	if !errors.Is(err, redlock.ErrNoQuorum) || !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("acquire without quorum: err = %v, want ErrNoQuorum and lease.ErrUnavailable", err)
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("err %T is not a *QuorumError", err)
	}
	if diff := cmp.Diff(redlock.QuorumError{Op: "acquire", OK: 1, Need: 2, Of: 3}, *qe,
		cmpIgnoreErr); diff != "" {
		t.Fatalf("quorum error (-want +got):\n%s", diff)
	}
	for _, s := range ms.servers[:2] {
		if !strings.Contains(err.Error(), s.Addr()) {
			t.Errorf("error %q does not name the dead master %s", err, s.Addr())
		}
	}
}

var cmpIgnoreErr = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Err" }, cmp.Ignore())

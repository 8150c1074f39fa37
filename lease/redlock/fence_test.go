package redlock_test

import (
	"strconv"
	"testing"
	"time"
)

// TestFenceFollowsQuorumMaximum: master 0's counter runs an hour ahead (as
// after a clock that ran fast). While master 2 hangs, a lease is acquired
// through masters {0, 1}: its fence continues from master 0's counter and is
// written back to master 1. After master 0 is lost, the quorum {1, 2} still
// hands out a greater fence, which only the write-back makes possible:
// master 1's and 2's own clocks are an hour behind.
func TestFenceFollowsQuorumMaximum(t *testing.T) {
	ms := startMasters(t, 3)
	b := ms.backend(t)
	m := manager(t, b)
	ctx := ctxT(t, 30*time.Second)
	fenceKey := b.Key("acct") + ":fence" // the counter's layout, see Backend.Key
	ahead := uint64(time.Now().Add(time.Hour).UnixMicro())
	if err := ms.servers[0].Client(t).Set(ctx, fenceKey, strconv.FormatUint(ahead, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	ms.servers[2].Pause()
	l1, err := m.Acquire(ctx, "acct")
	ms.servers[2].Resume()
	if err != nil {
		t.Fatal(err)
	}
	if l1.Fence() != ahead+1 {
		t.Fatalf("fence = %d, want master 0's counter + 1 = %d", l1.Fence(), ahead+1)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ms.servers[0].Kill()
	l2, err := m.Acquire(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	if l2.Fence() <= l1.Fence() {
		t.Fatalf("fence %d after %d with master 0 gone: the fence was not written back", l2.Fence(), l1.Fence())
	}
}

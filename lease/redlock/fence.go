package redlock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/scripts"
)

// nextFence gives name a fence while its lock is held, in two phases over
// the masters:
//
//  1. every master proposes max(its counter + 1, its TIME in µs) and stores
//     the proposal (redlock_fence_next.lua); the fence is the maximum of a
//     quorum's proposals;
//  2. the fence is written back to the masters (redlock_fence_raise.lua),
//     and must be stored on a quorum before it is handed out.
//
// Any two quorums share a master, so the next fence for name, proposed by a
// quorum after this one was written back, exceeds it: as long as no master
// of the shared ones lost its data. For those, TIME in µs carries the
// fence forward (see the package doc).
func (b *Backend) nextFence(ctx context.Context, name string, ttl time.Duration) (uint64, error) {
	key := []string{b.fenceKey(name)}
	retain := max(1, b.cfg.fenceRetain.Milliseconds())
	props, err := b.eachMaster(ctx, "fence", b.masterTimeout(ttl), false, func(ctx context.Context, m *master) (int64, error) {
		return scripts.RedlockFenceNext.Run(ctx, m.c, key, retain).Int64()
	})
	if err != nil {
		return 0, err
	}
	var fence int64
	for _, p := range props {
		fence = max(fence, p)
	}
	if fence <= 0 {
		return 0, fmt.Errorf("redlock: fence: no master proposed a fence (%v)", props)
	}
	arg := strconv.FormatInt(fence, 10)
	if _, err := b.eachMaster(ctx, "fence", b.masterTimeout(ttl), false, func(ctx context.Context, m *master) (int64, error) {
		return scripts.RedlockFenceRaise.Run(ctx, m.c, key, arg, retain).Int64()
	}); err != nil {
		return 0, err
	}
	return uint64(fence), nil //nolint:gosec // fence > 0, checked above
}

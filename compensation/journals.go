package compensation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Counts is how many journals the recovery index and the dead-letter set
// hold (see [Runner.Counts]).
type Counts struct {
	// Indexed counts journals that are not closed yet: open (their job
	// runs or its owner died), sealed (committing) or being compensated.
	Indexed int64
	// DeadLettered counts journals whose compensation failed on every
	// attempt; [Runner.List] shows them and [Runner.Retry] runs them again.
	DeadLettered int64
}

// Counts reads the sizes of the journal index and of the dead-letter set:
// two ZCARD calls in one round trip, whatever their sizes.
func (r *Runner) Counts(ctx context.Context) (Counts, error) {
	p := r.client.Pipeline()
	idx := p.ZCard(ctx, r.indexKey())
	dead := p.ZCard(ctx, r.deadKey())
	if _, err := p.Exec(ctx); err != nil {
		return Counts{}, fmt.Errorf("%w: count journals: %w", ErrUnavailable, err)
	}
	return Counts{Indexed: idx.Val(), DeadLettered: dead.Val()}, nil
}

// Journals returns journals of lease name (the job's lease name, as
// [Journal.Key] and [Ref.Name]), newest fence first, at most limit (default
// 10): those not settled yet (open, sealed, being compensated or
// dead-lettered: the name's journal index, and the dead-letter set, which
// keeps a dead-lettered journal after the index's open retention) and those
// of the fences given in also (for example the fences of the key's record
// and lease), as long as they are kept (a compensated or committed journal
// expires after the closed retention). Journals that are gone are left out.
func (r *Runner) Journals(ctx context.Context, name string, limit int, also ...uint64) ([]JournalInfo, error) {
	if limit <= 0 {
		limit = 10
	}
	fences, err := r.client.ZRevRange(ctx, r.fencesKey(name), 0, int64(limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: list journals of %q: %w", ErrUnavailable, name, err)
	}
	// A dead-lettered journal is kept for ever, its index entry only for the
	// open retention after the name's last write.
	dead, err := r.deadOf(ctx, name)
	if err != nil {
		return nil, err
	}
	all := slices.Clone(also)
	for _, ref := range dead {
		if ref.Name == name {
			all = append(all, ref.Fence)
		}
	}
	for _, f := range fences {
		if n, err := strconv.ParseUint(f, 10, 64); err == nil {
			all = append(all, n)
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	slices.Reverse(all)
	out := make([]JournalInfo, 0, min(len(all), limit))
	for _, n := range all {
		if n == 0 || len(out) >= limit {
			continue
		}
		info, err := r.Inspect(ctx, Ref{Name: name, Fence: n})
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, info)
	}
	return out, nil
}

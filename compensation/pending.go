package compensation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// IndexedJournal is a journal of the recovery index: not closed yet.
type IndexedJournal struct {
	JournalInfo
	Since time.Time // when it was indexed (its first step's intent)
}

// Indexed returns up to limit journals of the recovery index (default 100),
// oldest first: open (their job runs, or its owner died), sealed
// (committing) or being compensated (running or between retries). Whether
// a journal is pending compensation depends on its lease, which the caller
// reads (inspect.Inspector.Compensations does).
func (r *Runner) Indexed(ctx context.Context, limit int) ([]IndexedJournal, error) {
	if limit <= 0 {
		limit = 100
	}
	zs, err := r.client.ZRangeWithScores(ctx, r.indexKey(), 0, int64(limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: list indexed journals: %w", ErrUnavailable, err)
	}
	out := make([]IndexedJournal, 0, len(zs))
	for _, z := range zs {
		member, _ := z.Member.(string)
		ref, err := ParseRef(member)
		if err != nil {
			continue
		}
		info, err := r.Inspect(ctx, ref)
		if errors.Is(err, redis.Nil) {
			continue // expired: the sweep unindexes it
		}
		if err != nil {
			return out, err
		}
		out = append(out, IndexedJournal{JournalInfo: info, Since: time.UnixMilli(int64(z.Score)).UTC()})
	}
	return out, nil
}

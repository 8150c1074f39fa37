package compensation

import (
	"context"
	"time"
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
	out := []IndexedJournal{}
	err := r.inspectSet(ctx, r.indexKey(), "list indexed journals", limit, false, func(info JournalInfo, since time.Time) {
		out = append(out, IndexedJournal{JournalInfo: info, Since: since})
	})
	return out, err
}

package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
)

// AttemptFigures is what the jobs' attempt histories (idempotency's
// History, as `worker history` and the Inspector show them) say after the
// drain, checked against each key's record.
type AttemptFigures struct {
	Keys     int // keys with a record, checked
	Attempts int // attempts their histories keep
	// Mismatched counts the keys whose history disagrees with the record
	// (attemptMismatch): must be 0.
	Mismatched int
}

// checkAttempts reads the history and the record of every job's key, as an
// operator's Inspector does, and counts the keys whose history disagrees
// with the record; the first few are logged with the reason.
func (r *run) checkAttempts(ctx context.Context, rdb *redis.Client, jobs []Job) (*AttemptFigures, error) {
	in := inspect.New(rdb, inspect.WithPrefix("lh:"))
	defer func() { _ = in.Close(context.WithoutCancel(ctx)) }() // its lease Manager's renewer
	var (
		mu sync.Mutex
		f  AttemptFigures
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, j := range jobs {
		g.Go(func() error {
			ki, err := in.Key(gctx, j.Key)
			if err == nil {
				err = ki.HistoryErr
			}
			if err != nil {
				return fmt.Errorf("chaos: history of %s: %w", j.Key, err)
			}
			if ki.State == idempotency.Absent {
				return nil
			}
			why := attemptMismatch(ki, idempotency.DefaultHistory)
			mu.Lock()
			defer mu.Unlock()
			f.Keys++
			f.Attempts += len(ki.History)
			if why != "" {
				f.Mismatched++
				if f.Mismatched <= 10 {
					r.log.Error("attempt history disagrees with the record", slog.String("key", j.Key),
						slog.String("why", why))
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	r.log.Info("attempt histories checked", slog.Int("keys", f.Keys), slog.Int("attempts", f.Attempts),
		slog.Int("mismatched", f.Mismatched))
	return &f, nil
}

// attemptMismatch says how the history of a key with a record (ki, read in
// one Inspector call) disagrees with the record, "" when it does not. Every
// claim that runs a key counts an attempt in the record and writes the
// attempt's entry in the same script, so the history keeps the last
// min(attempt, kept) attempts, numbered up to the record's, fences rising,
// the last one the record's; a finished record's last attempt has an end.
func attemptMismatch(ki inspect.KeyInfo, kept int) string {
	h := ki.History
	if want := min(ki.Attempt, kept); len(h) != want {
		return fmt.Sprintf("the history keeps %d attempts; the record is at attempt %d", len(h), ki.Attempt)
	}
	for i, a := range h {
		if want := ki.Attempt - len(h) + 1 + i; a.Attempt != want {
			return fmt.Sprintf("entry %d is attempt %d, want %d", i, a.Attempt, want)
		}
		if i > 0 && a.Fence <= h[i-1].Fence {
			return fmt.Sprintf("entry %d's fence %d is not above the previous %d", i, a.Fence, h[i-1].Fence)
		}
		if a.Started.IsZero() || a.Worker == "" {
			return fmt.Sprintf("entry %d (fence %d) has no start or no worker", i, a.Fence)
		}
	}
	last := h[len(h)-1]
	if last.Fence != ki.Fence {
		return fmt.Sprintf("the last attempt's fence is %d; the record's %d", last.Fence, ki.Fence)
	}
	if (ki.State == idempotency.Completed || ki.State == idempotency.Failed) && last.End == "" {
		return fmt.Sprintf("the record is %s and its last attempt has no end", ki.State)
	}
	return ""
}

package leasehold

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// The memory budget. Every record the worker has polled and not finished
// (running, parked because its key is held elsewhere or for a retry's
// backoff, waiting on its key's probe, queued behind its ordering key) is
// tracked in its partition's offsets until it is finished, so the trackers
// know what the worker holds. Before each poll the dispatcher compares that
// with the budget: at the budget it stops polling and pauses fetching (only
// parked records that come due are claimed), and it resumes when what is held
// falls to three quarters of the budget.

// Defaults of [WithMemoryBudget].
const (
	DefaultMemoryBudget   = 64 << 20
	DefaultMaxHeldRecords = 10_000
)

// WithMemoryBudget bounds what the worker holds: the records it has polled
// and not finished, whether running, parked (their key held by another
// worker, a retry's backoff, Redis unreachable), waiting on their key's
// probe, or queued behind their ordering key ([WithOrderedKeys]). Records
// are counted by their bytes (key, value and headers) and by number. When
// either bound is reached the worker stops polling and pauses fetching; it
// resumes when what it holds falls to three quarters of both. A poll takes
// at most [WithConcurrency] records, so the bytes held may pass the budget by
// one poll; a record larger than the budget is taken when the worker holds
// less than the budget, so it always runs. The budget does not count
// franz-go's fetch buffers (kgo.FetchMaxBytes, given with [WithKafka]) nor a
// handler's own allocations. Zero keeps a bound's default; [New] refuses a
// negative one. Default 64 MiB and 10,000 records.
func WithMemoryBudget(bytes int64, records int) Opt {
	return optFunc(func(c *config) { c.budgetBytes, c.budgetRecords = bytes, records })
}

// budgetDefaults fills in and checks the memory budget of c.
func (c *config) budgetDefaults() error {
	if c.budgetBytes < 0 || c.budgetRecords < 0 {
		return fmt.Errorf("leasehold: memory budget of %d bytes and %d records: want 0 (the default) or more for each",
			c.budgetBytes, c.budgetRecords)
	}
	if c.budgetBytes == 0 {
		c.budgetBytes = DefaultMemoryBudget
	}
	if c.budgetRecords == 0 {
		c.budgetRecords = DefaultMaxHeldRecords
	}
	return nil
}

// budgetState is the dispatcher's view of the budget: full is read by
// finish (to wake the dispatcher) and by Stats.
type budgetState struct {
	full   atomic.Bool
	since  time.Time    // when fetching paused for the budget (dispatcher only)
	pauses atomic.Int64 // times fetching paused for the budget
}

// budgetRoom tells the dispatcher whether it may poll (full is false) and
// how many records it may take (room). It pauses fetching when the budget is
// reached and resumes it when what is held falls to three quarters of it.
func (w *Worker) budgetRoom() (room int, full bool) {
	h, _ := w.offs.weight()
	b := &w.budget
	switch {
	case !b.full.Load() && (h.bytes >= w.cfg.budgetBytes || h.records >= w.cfg.budgetRecords):
		b.full.Store(true)
		b.since = time.Now()
		b.pauses.Add(1)
		w.fetch.set(pauseBudget, true)
		w.log.Info("memory budget reached: fetching paused", slog.Int64("held_bytes", h.bytes),
			slog.Int("held_records", h.records), slog.Int64("budget_bytes", w.cfg.budgetBytes),
			slog.Int("budget_records", w.cfg.budgetRecords))
	case b.full.Load() && h.bytes <= w.cfg.budgetBytes/4*3 && h.records <= w.cfg.budgetRecords/4*3:
		b.full.Store(false)
		w.fetch.set(pauseBudget, false)
		w.log.Info("below the memory budget: fetching resumed", slog.Int64("held_bytes", h.bytes),
			slog.Int("held_records", h.records), slog.Duration("paused", time.Since(b.since)))
	}
	return max(w.cfg.budgetRecords-h.records, 1), b.full.Load()
}

// Reasons for pausing fetching; fetching resumes when none is left, so that
// one reason ending does not resume what another paused.
const (
	pauseRedis    uint8 = 1 << iota // Redis cannot be reached (failClosed)
	pauseBudget                     // the memory budget is reached
	pauseShutdown                   // the worker is shutting down
)

// fetchGate pauses and resumes fetching the consumed topics for a set of
// reasons.
type fetchGate struct {
	mu      sync.Mutex
	reasons uint8
	pause   func() // kgo.Client.PauseFetchTopics of the consumed topics
	resume  func() // kgo.Client.ResumeFetchTopics of the consumed topics
}

// set turns reason on or off, pausing fetching with the first reason and
// resuming it when the last one ends.
func (g *fetchGate) set(reason uint8, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	was := g.reasons != 0
	if on {
		g.reasons |= reason
	} else {
		g.reasons &^= reason
	}
	switch now := g.reasons != 0; {
	case now && !was:
		g.pause()
	case !now && was:
		g.resume()
	}
}

package leasehold

import (
	"context"
	"sync/atomic"
	"time"
)

// Stats counts what the worker did since it started.
type Stats struct {
	Claimed      map[Outcome]int64
	Started      int64
	Succeeded    int64
	Retried      int64 // retryable failures parked for another attempt
	Failed       int64 // terminal failures (permanent or attempts exhausted)
	DeadLettered int64 // dead-letter copies this worker wrote and the broker acknowledged
	// DeadLettersTruncated counts, of DeadLettered, the stand-in copies
	// (HeaderDLQTruncated) written because the dead-letter topic refused
	// the whole copy as too large.
	DeadLettersTruncated int64
	Replayed             int64
	LeasesLost           int64
	Cancelled            int64 // running jobs an operator cancelled, recorded as cancelled
	Pauses               int64
	// Parked counts records waiting to be claimed again: parked, queued
	// behind their ordering key, or waiting on their key's probe.
	Parked   int
	InFlight int // polled records not yet committed (share mode: not yet acknowledged)
	// HeldBytes is what the records the worker holds (InFlight) weigh:
	// their keys, values and headers, the measure of [WithMemoryBudget].
	// HeldBytesPeak is its highest value since the worker started.
	HeldBytes     int64
	HeldBytesPeak int64
	// BudgetPauses counts the times fetching paused because the worker
	// held what its memory budget allows; BudgetPaused tells whether it is
	// paused for the budget now.
	BudgetPauses int64
	BudgetPaused bool
}

type counters struct {
	claimed                                    [OutcomeUndecodable + 1]atomic.Int64
	started, succeeded, retried, failed        atomic.Int64
	deadLettered, replayed, leasesLost, pauses atomic.Int64
	cancelled                                  atomic.Int64
	deadLettersTruncated                       atomic.Int64
}

// Stats returns the worker's counters. Safe to call at any time, from any
// goroutine; before the worker has started, Parked and InFlight are zero.
func (w *Worker) Stats() Stats {
	w.mu.Lock()
	live := w.live
	w.mu.Unlock()
	s := Stats{Claimed: make(map[Outcome]int64)}
	for o := OutcomeAcquired; o <= OutcomeUndecodable; o++ {
		s.Claimed[o] = w.stats.claimed[o].Load()
	}
	s.Started = w.stats.started.Load()
	s.Succeeded = w.stats.succeeded.Load()
	s.Retried = w.stats.retried.Load()
	s.Failed = w.stats.failed.Load()
	s.DeadLettered = w.stats.deadLettered.Load()
	s.DeadLettersTruncated = w.stats.deadLettersTruncated.Load()
	s.Replayed = w.stats.replayed.Load()
	s.LeasesLost = w.stats.leasesLost.Load()
	s.Cancelled = w.stats.cancelled.Load()
	s.Pauses = w.stats.pauses.Load()
	if live { // sched and offs are set and no longer written
		s.Parked = w.sched.len()
		s.InFlight = w.offs.inFlight()
		if w.share != nil { // share mode tracks no offsets: the round is what it holds
			s.InFlight = w.share.pending()
		}
		h, peak := w.offs.weight()
		s.HeldBytes, s.HeldBytesPeak = h.bytes, peak
	}
	s.BudgetPauses = w.budget.pauses.Load()
	s.BudgetPaused = w.budget.full.Load()
	return s
}

// statsObserver counts the worker's events for [Worker.Stats].
type statsObserver struct{ c *counters }

var (
	_ claimObserver        = statsObserver{}
	_ startObserver        = statsObserver{}
	_ leaseLostObserver    = statsObserver{}
	_ endObserver          = statsObserver{}
	_ deadLetteredObserver = statsObserver{}
	_ pauseObserver        = statsObserver{}
)

// observeClaim counts decided claims by outcome (and undecodable payloads).
func (s statsObserver) observeClaim(_ context.Context, _ *delivery, c *claim, _ time.Time) {
	if (c.Err == nil || c.Outcome == OutcomeUndecodable) && c.Outcome >= OutcomeAcquired && c.Outcome <= OutcomeUndecodable {
		s.c.claimed[c.Outcome].Add(1)
	}
}

func (s statsObserver) observeStart(context.Context, *Job) { s.c.started.Add(1) }

func (s statsObserver) observeLeaseLost(context.Context, *delivery, *Job, error) {
	s.c.leasesLost.Add(1)
}

func (s statsObserver) observeEnd(_ context.Context, _ *delivery, e attemptEnd) {
	switch e.kind {
	case endCompleted:
		s.c.succeeded.Add(1)
	case endDuplicate:
		s.c.replayed.Add(1)
	case endRetry:
		s.c.retried.Add(1)
	case endFailed:
		s.c.failed.Add(1)
	case endCancelled:
		s.c.cancelled.Add(1)
	}
}

func (s statsObserver) observeDeadLettered(_ context.Context, _ *delivery, dl deadLettered) {
	s.c.deadLettered.Add(1)
	if dl.truncated {
		s.c.deadLettersTruncated.Add(1)
	}
}

func (s statsObserver) observePause(error) { s.c.pauses.Add(1) }

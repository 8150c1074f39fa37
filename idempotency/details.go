package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/lease"
)

// Heartbeat details ride the lease renewer. An attempt's first SaveDetails is
// written at once (so that a crash right after the first checkpoint still
// resumes from it); later ones are coalesced per attempt, the latest winning,
// and written by the Manager's renewer goroutine after each renew round
// (leasing.OnRenewRound), all of a round in one pipeline of batched
// scripts: 10,000 jobs heartbeating every 5 s cost a few calls per round, not
// 2,000 calls a second. Fail flushes an attempt's pending details before it
// releases the key, so that the next attempt resumes from the latest ones;
// Complete and a terminal Fail drop them (the key is done).

// saveDetailsNow writes details for c at once, fenced.
func (s *Store) saveDetailsNow(ctx context.Context, c *Claim, details []byte) error {
	_, err := leasing.Fenced(ctx, s.m, c.Lease, scripts.IdemDetails, []string{c.keys.details},
		details, s.cfg.retention.Milliseconds())
	return mapFenced(err)
}

// queueDetails keeps details as c's pending details, replacing older ones.
func (s *Store) queueDetails(c *Claim, details []byte) {
	s.detailsMu.Lock()
	defer s.detailsMu.Unlock()
	if s.pending == nil {
		s.pending = make(map[*Claim][]byte)
	}
	s.pending[c] = details
}

// takeDetails removes and returns c's pending details, if any.
func (s *Store) takeDetails(c *Claim) ([]byte, bool) {
	s.detailsMu.Lock()
	defer s.detailsMu.Unlock()
	d, ok := s.pending[c]
	if ok {
		delete(s.pending, c)
	}
	return d, ok
}

// flushPending writes c's pending details, if any, before its attempt ends
// without an outcome. It waits for a round's flush in flight, which may carry
// older details of c. Errors are left to the release that follows: it finds
// a lost lease too.
func (s *Store) flushPending(ctx context.Context, c *Claim) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if d, ok := s.takeDetails(c); ok {
		_ = s.saveDetailsNow(ctx, c, d)
	}
}

// flushDetails writes every pending details (the renewer's round hook).
// Details refused because the lease is lost are dropped, and the attempt's
// next SaveDetails answers ErrLeaseLost; details that Redis did not take
// (unreachable) stay pending for the next round unless newer ones arrived.
func (s *Store) flushDetails(ctx context.Context) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.detailsMu.Lock()
	pend := s.pending
	s.pending = nil
	s.detailsMu.Unlock()
	cs := make([]*Claim, 0, len(pend))
	for c := range pend {
		c.mu.Lock()
		done := c.finished
		c.mu.Unlock()
		if !done && c.Lease.Err() == nil {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return
	}
	errs := s.writeDetails(ctx, cs, pend)
	for i, err := range errs {
		c := cs[i]
		switch {
		case err == nil:
		case errors.Is(err, ErrLeaseLost):
			c.mu.Lock()
			c.detailsErr = err
			c.mu.Unlock()
		default:
			s.detailsMu.Lock()
			if _, newer := s.pending[c]; !newer {
				if s.pending == nil {
					s.pending = make(map[*Claim][]byte)
				}
				s.pending[c] = pend[c]
			}
			s.detailsMu.Unlock()
		}
	}
}

// writeDetails writes details[c] for each of cs with as few script calls as
// the client allows (one per slot group of up to maxPerCall entries), in one
// pipeline. It returns one error per claim.
func (s *Store) writeDetails(ctx context.Context, cs []*Claim, details map[*Claim][]byte) []error {
	out := make([]error, len(cs))
	calls := s.group(seq(len(cs)), func(i int) string { return cs[i].tag })
	keep := s.cfg.retention.Milliseconds()
	cmds, perr := s.pipeline(ctx, len(calls), func(p redis.Pipeliner, g int) *redis.Cmd {
		call := calls[g]
		keys := make([]string, 0, 2*len(call))
		args := make([]any, 0, 1+3*len(call))
		args = append(args, keep)
		for _, i := range call {
			c := cs[i]
			keys = append(keys, c.keys.lease, c.keys.details)
			args = append(args, leasing.Token(c.Lease), strconv.FormatUint(c.Lease.Fence(), 10), details[c])
		}
		return scripts.IdemDetailsBatch.EvalSha(ctx, p, keys, args...)
	})
	for g, call := range calls {
		var codes []int64
		err := perr
		if cmds[g] != nil {
			codes, err = cmds[g].Int64Slice()
		}
		for e, i := range call {
			switch {
			case err != nil:
				out[i] = classify(err)
			case e >= len(codes):
				out[i] = fmt.Errorf("%w: details reply without entry %d", ErrCorrupt, e)
			case codes[e] == scripts.StatusLost:
				out[i] = fmt.Errorf("%w: %w", ErrLeaseLost, lease.ErrLost)
			}
		}
	}
	return out
}

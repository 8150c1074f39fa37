package idempotency

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/lua"
)

// Policy says what Fail does with the key.
type Policy uint8

// Failure policies.
const (
	// Retryable releases the key at once: the next claim runs it again (as
	// Acquired, with the attempt count kept and the heartbeat details
	// readable).
	Retryable Policy = iota + 1
	// Terminal records the failure (FAILED); later claims replay it as a
	// Duplicate whose Record.Err is a *FailedError.
	Terminal
	// Keep releases the lease but holds the key for the keep hold
	// (WithKeepHold, default the key's lease TTL): claims answer Held until
	// then, then Acquired.
	Keep
)

func (p Policy) String() string {
	switch p {
	case Retryable:
		return "retryable"
	case Terminal:
		return "terminal"
	case Keep:
		return "keep"
	}
	return "Policy(" + strconv.Itoa(int(p)) + ")"
}

// Completion is one result to record, for CompleteBatch.
type Completion struct {
	Claim  *Claim
	Result []byte
}

// Complete records result as the outcome of c's key and releases its lease,
// in one fenced script: when c no longer holds the lease (it expired, or was
// taken over), nothing is written and the error wraps ErrLeaseLost. A result
// over the limit (WithMaxResult) is refused with a *TooLargeError and nothing
// is written: the caller still holds the lease and may Fail.
func (s *Store) Complete(ctx context.Context, c *Claim, result []byte) error {
	return s.CompleteBatch(ctx, []Completion{{Claim: c, Result: result}})[0]
}

// CompleteBatch records many results in one pipeline (one round trip per
// Redis node). It returns one error per completion, in order (nil when
// recorded).
func (s *Store) CompleteBatch(ctx context.Context, cs []Completion) []error {
	out := make([]error, len(cs))
	ops := make([]finishOp, 0, len(cs))
	for i, x := range cs {
		if len(x.Result) > s.cfg.maxResult {
			out[i] = &TooLargeError{What: "result", Size: len(x.Result), Limit: s.cfg.maxResult}
			continue
		}
		ops = append(ops, finishOp{i: i, c: x.Claim, state: Completed, result: x.Result})
	}
	s.finish(ctx, ops, out)
	return out
}

// Fail ends c's attempt with err under policy (see Policy), in one fenced
// script. Terminal stores err's text (cut to the result limit, marked as cut)
// as the key's cached outcome. ErrLeaseLost: nothing was written.
func (s *Store) Fail(ctx context.Context, c *Claim, policy Policy, err error) error {
	switch policy {
	case Terminal:
		msg := "unknown error"
		if err != nil {
			msg = err.Error()
		}
		if len(msg) > s.cfg.maxResult {
			const mark = "...(cut)"
			msg = msg[:max(0, s.cfg.maxResult-len(mark))] + mark
			msg = msg[:min(len(msg), s.cfg.maxResult)]
		}
		out := make([]error, 1)
		s.finish(ctx, []finishOp{{c: c, state: Failed, result: []byte(msg)}}, out)
		return out[0]
	case Retryable, Keep:
	default:
		return fmt.Errorf("idempotency: unknown failure policy %d", policy)
	}
	if err := s.begin(c); err != nil {
		return err
	}
	if err := s.beginFinish(c.Lease); err != nil {
		return s.end(c, err)
	}
	s.announceOld(ctx)
	hold := int64(0)
	if policy == Keep {
		hold = max(cmp.Or(s.cfg.hold, c.Lease.TTL()).Milliseconds(), 1)
	}
	_, ferr := s.m.Fenced(ctx, c.Lease, lua.IdemRelease, []string{s.bucketKey(c.tag, c.window)},
		c.h.field(), c.fp[:], c.Attempt, hold, s.deleteFlag())
	if ferr != nil {
		s.abortFinish(c.Lease, errors.Is(ferr, lease.ErrLost))
	}
	if ferr = s.end(c, ferr); ferr == nil {
		s.endLeases(ctx, []*lease.Lease{c.Lease})
	}
	return ferr
}

// SaveDetails stores heartbeat details (a progress checkpoint) for c's key,
// fenced: the next attempt of the key gets them in Claim.Details. They live
// until the key completes or fails terminally (or for the retention).
func (s *Store) SaveDetails(ctx context.Context, c *Claim, details []byte) error {
	if len(details) > s.cfg.maxDetails {
		return &TooLargeError{What: "details", Size: len(details), Limit: s.cfg.maxDetails}
	}
	c.mu.Lock()
	if c.Lease == nil || c.finished {
		c.mu.Unlock()
		return ErrNotClaimed
	}
	c.details = true
	c.mu.Unlock()
	_, err := s.m.Fenced(ctx, c.Lease, lua.IdemDetails, []string{s.detailsKey(c.tag, c.Key)},
		details, s.cfg.retention.Milliseconds())
	return mapFenced(err)
}

type finishOp struct {
	i      int
	c      *Claim
	state  State
	result []byte
}

// begin marks c as finishing; a claim is finished once.
func (s *Store) begin(c *Claim) error {
	if c == nil {
		return ErrNotClaimed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Lease == nil || c.finished {
		return ErrNotClaimed
	}
	c.finished = true
	return nil
}

// end settles a claim after its fenced script: when the attempt may be
// retried (Redis unreachable), the claim can be finished again. On success
// the caller ends the lease (endLeases).
func (s *Store) end(c *Claim, err error) error {
	err = mapFenced(err)
	switch {
	case err == nil, errors.Is(err, ErrLeaseLost):
	default:
		c.mu.Lock()
		c.finished = false
		c.mu.Unlock()
	}
	return err
}

func mapFenced(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lease.ErrLost):
		return fmt.Errorf("%w: %w", ErrLeaseLost, err)
	}
	return classify(err)
}

// finish runs the complete script for ops in one pipeline and stores each
// outcome in out[op.i].
func (s *Store) finish(ctx context.Context, ops []finishOp, out []error) {
	todo := ops[:0:0]
	for _, op := range ops {
		if err := s.begin(op.c); err != nil {
			out[op.i] = err
			continue
		}
		if err := s.beginFinish(op.c.Lease); err != nil {
			out[op.i] = s.end(op.c, err)
			continue
		}
		todo = append(todo, op)
	}
	var ended []*lease.Lease
	defer func() { s.endLeases(ctx, ended) }()
	if len(todo) > 0 {
		s.announceOld(ctx)
	}
	wide := false
	for try := 0; len(todo) > 0; try++ {
		base, n := s.windowRange(0, wide)
		// codes[j] is the script's answer for todo[j], errs[j] a failure to get it.
		codes := make([]int64, len(todo))
		errs := make([]error, len(todo))
		if len(todo) == 1 {
			// One completion goes through the Manager, which ends the lease
			// at once when the script answers lost (and traces the call).
			keys, args := s.completeArgs(todo[0], base, n)
			res, err := s.m.Fenced(ctx, todo[0].c.Lease, lua.IdemComplete, keys[1:], args[2:]...)
			codes[0], _ = res.(int64)
			errs[0] = err
		} else {
			calls := s.group(seq(len(todo)), func(j int) string { return todo[j].c.tag })
			cmds, perr := s.pipeline(ctx, len(calls), func(p redis.Pipeliner, g int) *redis.Cmd {
				call := calls[g]
				keys := make([]string, 0, len(call)*(4+n))
				args := make([]any, 0, 4+10*len(call))
				args = append(args, base, s.window.Milliseconds(), s.cfg.retention.Milliseconds(), n)
				for _, j := range call {
					k, a := s.completeArgs(todo[j], base, n)
					keys = append(keys, k...)
					// Per entry: token, fence, field, fingerprint, attempt,
					// state, external, details, result, delete-lease.
					args = append(args, a[0], a[1], a[2], a[3], a[4], a[8], a[9], a[10], a[11], a[12])
				}
				return lua.IdemCompleteBatch.EvalSha(ctx, p, keys, args...)
			})
			for g, call := range calls {
				var replies []any
				err := perr
				if cmds[g] != nil {
					replies, err = cmds[g].Slice()
				}
				for e, j := range call {
					switch {
					case err != nil:
						errs[j] = err
					case e >= len(replies):
						errs[j] = fmt.Errorf("%w: complete reply without entry %d", ErrCorrupt, e)
					default:
						codes[j], _ = replies[e].(int64)
					}
				}
			}
		}
		var again []finishOp
		for j, op := range todo {
			code, err := codes[j], errs[j]
			switch {
			case err != nil:
				s.abortFinish(op.c.Lease, errors.Is(err, lease.ErrLost))
				out[op.i] = s.end(op.c, err)
			case code == lua.StatusLost:
				s.abortFinish(op.c.Lease, true)
				out[op.i] = s.end(op.c, s.lost(op.c))
			case code == lua.IdemWindowSkew:
				again = append(again, op) // nothing written: still finishing
			case code == lua.IdemOK:
				out[op.i] = s.end(op.c, nil)
				ended = append(ended, op.c.Lease)
			default:
				s.abortFinish(op.c.Lease, false)
				out[op.i] = s.end(op.c, fmt.Errorf("%w: complete status %d", ErrCorrupt, code))
			}
		}
		if len(again) == 0 {
			break
		}
		err := s.calibrate(ctx)
		if err == nil && try == 2 {
			err = errors.New("idempotency: complete: the Redis clock keeps moving away from the windows computed for it")
		}
		if err != nil {
			for _, op := range again {
				s.abortFinish(op.c.Lease, false)
				out[op.i] = s.end(op.c, err)
			}
			break
		}
		todo, wide = again, true
	}
}

// seq returns 0..n-1.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// completeArgs returns the KEYS and ARGV of the complete script for op, with
// the windows base..base+n-1.
func (s *Store) completeArgs(op finishOp, base int64, n int) ([]string, []any) {
	c := op.c
	keys := make([]string, 0, 4+n)
	keys = append(keys, s.m.Key(c.Lease.Name()), s.detailsKey(c.tag, c.Key), s.resultKey(c.tag, c.Key),
		s.bucketKey(c.tag, c.window))
	for w := base; w < base+int64(n); w++ {
		keys = append(keys, s.bucketKey(c.tag, w))
	}
	external := "0"
	if outcomeLen+len(op.result) > s.inline {
		external = "1"
	}
	c.mu.Lock()
	details := "0"
	if c.details {
		details = "1"
	}
	c.mu.Unlock()
	return keys, []any{c.Lease.Token(), strconv.FormatUint(c.Lease.Fence(), 10),
		c.h.field(), c.fp[:], c.Attempt, base, s.window.Milliseconds(), s.cfg.retention.Milliseconds(),
		int(op.state), external, details, op.result, s.deleteFlag()}
}

// lost returns the error of a complete script's lost answer for c (the
// lease has been ended as lost by abortFinish when the Store ends leases in
// the script; otherwise the renewer finds the loss at its next round).
func (s *Store) lost(c *Claim) error {
	err := c.Lease.Err()
	if err == nil {
		err = lease.ErrLost
	}
	return fmt.Errorf("idempotency: complete %s: %w", quoteKey(c.Key), err)
}

// beginFinish returns l's cause if l has ended; when the finishing script
// is to delete the lease key, it marks l as finishing first (lease.Lease.
// BeginFinish), so that a renewal that finds the key already gone, or the
// local deadline passing before the answer, is not reported as a loss of a
// key that in fact committed. Every successful beginFinish is followed by
// endLeases (the script wrote) or abortFinish (it did not).
func (s *Store) beginFinish(l *lease.Lease) error {
	if !s.inScript {
		return l.Err()
	}
	return l.BeginFinish()
}

// abortFinish settles a finishing mark after a script that wrote nothing:
// refused (the script answered lost) ends l as lost, otherwise l is held and
// renewed again (lease.Lease.AbortFinish).
func (s *Store) abortFinish(l *lease.Lease, refused bool) {
	if s.inScript {
		l.AbortFinish(refused)
	}
}

// deleteFlag tells a finishing script whether to delete the lease key itself
// (in the same atomic step as the record write): only when that ends the
// lease (lease.Manager.EndsInScript), which the Store then forgets locally.
// Otherwise the key stays until endLeases releases it through the Manager;
// the record is written either way.
func (s *Store) deleteFlag() string {
	if s.inScript {
		return "1"
	}
	return "0"
}

// endLeases ends the leases of finished claims: locally when the script
// deleted their keys, else by releasing them through the Manager (a few at a
// time, each retried briefly; a lease that cannot be released stays renewed
// and is logged).
func (s *Store) endLeases(ctx context.Context, ls []*lease.Lease) {
	if len(ls) == 0 {
		return
	}
	if s.inScript {
		for _, l := range ls {
			l.Forget()
		}
		return
	}
	ctx = context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 128)
	for _, l := range ls {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var err error
			for try := range 3 {
				rctx, cancel := context.WithTimeout(ctx, l.TTL()/3)
				err = l.Release(rctx)
				cancel()
				if err == nil || !errors.Is(err, lease.ErrUnavailable) {
					break
				}
				time.Sleep(time.Duration(try+1) * 50 * time.Millisecond)
			}
			if err != nil && !errors.Is(err, lease.ErrLost) {
				s.log.Warn("idempotency: lease of a finished key not released", slog.String("lease", l.Name()),
					slog.String("error", err.Error()))
			}
		})
	}
	wg.Wait()
}

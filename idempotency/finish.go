package idempotency

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/lease"
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
// in one fenced script. Its answers:
//   - nil: the record holds result under c's fence, written by this call or
//     by an earlier send of it whose answer was lost;
//   - a *CommittedError (ErrAlreadyCommitted): an earlier send stored another
//     outcome under c's fence; it stands, nothing was written;
//   - ErrRefused (matches ErrLeaseLost): Redis refused, c no longer holds the
//     lease and no outcome of c's fence is stored; nothing was written;
//   - ErrGivenUp (matches ErrLeaseLost): the lease had ended locally, nothing
//     was sent, and Redis holds no outcome of c's fence;
//   - ErrOutcomeUnknown (matches ErrUnavailable): the answer was lost; send
//     the same Complete again once Redis answers;
//   - ErrUnavailable otherwise: Redis answered an error, nothing was written.
//
// A result over the limit (WithMaxResult) is refused with a *TooLargeError
// and nothing is written: the caller still holds the lease and may Fail.
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
// as the key's cached outcome, with Complete's answers. Retryable and Keep:
// ErrLeaseLost means nothing was written.
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
	if c != nil && c.Lease != nil {
		s.flushPending(ctx, c)
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
	ferr := s.release(ctx, c, hold, s.deleteFlag(), func(keys []string, args []any) (int64, error) {
		res, err := leasing.Fenced(ctx, s.m, c.Lease, scripts.IdemRelease, keys, args...)
		code, _ := res.(int64)
		return code, err
	})
	if ferr != nil {
		s.abortFinish(c.Lease, errors.Is(ferr, lease.ErrLost))
	}
	if ferr = s.end(c, ferr); ferr == nil {
		s.endLeases(ctx, []*lease.Lease{c.Lease})
	}
	return ferr
}

// release ends c's attempt without an outcome through idem_release.lua:
// send runs the script with its keys and arguments after the lease key,
// owner token and fence (which send adds) and returns its answer. The
// RELEASED record goes into the current window's bucket; a skew answer is
// sent again with the windows read again, as a completion's is.
func (s *Store) release(ctx context.Context, c *Claim, hold int64, del any,
	send func(keys []string, args []any) (int64, error)) error {
	wide := false
	for try := 0; ; try++ {
		base, n := s.windowRange(0, wide)
		keys := make([]string, 0, 1+n)
		keys = append(keys, c.keys.bucket)
		for w := base; w < base+int64(n); w++ {
			keys = append(keys, s.bucketKeyOf(c, w))
		}
		code, err := send(keys, []any{c.keys.field, c.fp[:], c.Attempt, hold, del,
			base, s.window.Milliseconds(), s.cfg.retention.Milliseconds()})
		switch {
		case err != nil:
			return err
		case code == scripts.IdemOK:
			return nil
		case code != scripts.IdemWindowSkew:
			return fmt.Errorf("%w: release status %d", ErrCorrupt, code)
		}
		if err := s.recalibrate(ctx, try, "release"); err != nil {
			return err
		}
		wide = true
	}
}

// SaveDetails stores heartbeat details (a progress checkpoint) for c's key,
// fenced: the next attempt of the key gets them in Claim.Details. They live
// until the key completes or fails terminally (or for the retention).
//
// An attempt's first details are written before SaveDetails returns (all of
// them with WithDetailsAtOnce); later ones are coalesced (the latest wins) and written with the lease renewals,
// within one renew interval, in batches (see details.go), and Fail writes
// pending ones before it releases the key. So a crash loses at most the
// details of the last renew interval. SaveDetails returns ErrLeaseLost once
// the lease is known lost (locally, or because Redis refused earlier
// details).
func (s *Store) SaveDetails(ctx context.Context, c *Claim, details []byte) error {
	if len(details) > s.cfg.maxDetails {
		return &TooLargeError{What: "details", Size: len(details), Limit: s.cfg.maxDetails}
	}
	if c == nil {
		return ErrNotClaimed
	}
	c.mu.Lock()
	if c.Lease == nil || c.finished {
		c.mu.Unlock()
		return ErrNotClaimed
	}
	c.details = true
	first, refused := !c.saved, c.detailsErr
	c.mu.Unlock()
	switch {
	case refused != nil:
		return refused
	case first || s.cfg.detailsAtOnce:
		err := s.saveDetailsNow(ctx, c, details)
		if err == nil {
			c.mu.Lock()
			c.saved = true
			c.mu.Unlock()
		}
		return err
	}
	if err := c.Lease.Err(); err != nil {
		return mapFenced(err)
	}
	s.queueDetails(c, append([]byte(nil), details...))
	return nil
}

type finishOp struct {
	i      int
	c      *Claim
	state  State
	result []byte
	full   bool // a short call answered IdemCompleteFull: send it in a full one
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
	case err == nil, errors.Is(err, ErrLeaseLost), errors.Is(err, ErrAlreadyCommitted), errors.Is(err, ErrGivenUp):
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
	case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrUnavailable), errors.Is(err, ErrAlreadyCommitted):
		return err
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
		s.takeDetails(op.c) // the key is done: pending details are moot
		if err := s.beginFinish(op.c.Lease); err != nil {
			if errors.Is(err, lease.ErrInvalid) { // another finish of c is under way
				out[op.i] = s.end(op.c, err)
				continue
			}
			out[op.i] = s.settle(ctx, op, err)
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
	for try := 0; len(todo) > 0; {
		base, n := s.windowRange(0, wide)
		// codes[j] is the script's answer for todo[j], errs[j] a failure to get it.
		codes := make([]int64, len(todo))
		errs := make([]error, len(todo))
		if len(todo) == 1 && s.cfg.history <= 0 {
			// One completion goes through the Manager, which ends the lease
			// at once when the script answers lost (and traces the call).
			// With a history, the batch script writes the attempt's end
			// in the same step (a lost answer loses the lease below).
			sc := newScriptCall(scripts.IdemComplete, 4+n, 13)
			s.appendComplete(&sc, todo[0], base, n)
			res, err := leasing.Fenced(ctx, s.m, todo[0].c.Lease, scripts.IdemComplete, sc.keyStrings()[1:], sc.argv()[2:]...)
			codes[0], _ = res.(int64)
			errs[0] = err
		} else {
			s.completePass(ctx, todo, base, n, codes, errs)
		}
		var again, redo []finishOp
		for j, op := range todo {
			code, err := codes[j], errs[j]
			switch {
			case err == nil && code == scripts.IdemCompleteFull && !op.full:
				op.full = true // nothing written: still finishing
				redo = append(redo, op)
			case err != nil && errors.Is(err, lease.ErrLost):
				s.abortFinish(op.c.Lease, true)
				out[op.i] = s.end(op.c, s.refused(op.c, err))
			case err != nil:
				s.abortFinish(op.c.Lease, false)
				out[op.i] = s.end(op.c, s.unanswered(op.c, err))
			case code == scripts.StatusLost:
				s.abortFinish(op.c.Lease, true)
				out[op.i] = s.end(op.c, s.refused(op.c, nil))
			case code == scripts.IdemWindowSkew:
				again = append(again, op) // nothing written: still finishing
			case code == scripts.IdemOK:
				out[op.i] = s.end(op.c, nil)
				ended = append(ended, op.c.Lease)
			case code == scripts.IdemOtherOutcome:
				// An earlier send wrote another outcome and ended the lease.
				ended = append(ended, op.c.Lease)
				out[op.i] = s.end(op.c, s.committed(ctx, op.c, nil))
			default:
				s.abortFinish(op.c.Lease, false)
				out[op.i] = s.end(op.c, fmt.Errorf("%w: complete status %d", ErrCorrupt, code))
			}
		}
		if len(again) > 0 {
			if err := s.recalibrate(ctx, try, "complete"); err != nil {
				for _, op := range again {
					s.abortFinish(op.c.Lease, false)
					out[op.i] = s.end(op.c, err)
				}
				again = nil
			}
			try++
			wide = true
		}
		todo = append(again, redo...)
	}
}

// completePass sends the completions todo in one pipeline of
// idem_complete_batch.lua calls, with the windows base..base+n-1, and
// stores each entry's answer in codes or the failure to get it in errs.
// The entries that need no key but their lease and their claim's bucket
// (shortCompletion) go in short calls, the others in full ones.
func (s *Store) completePass(ctx context.Context, todo []finishOp, base int64, n int, codes []int64, errs []error) {
	idx, ns := make([]int, len(todo)), 0 // the short entries, then the full ones (from the end)
	for j, op := range todo {
		if s.shortCompletion(op, base, n) {
			idx[ns], ns = j, ns+1
		} else {
			idx[len(todo)-1-(j-ns)] = j
		}
	}
	tag := func(j int) string { return todo[j].c.tag }
	calls := s.group(idx[:ns], tag)
	nshort := len(calls)
	calls = append(calls, s.group(idx[ns:], tag)...)
	cmds, perr := s.pipeline(ctx, len(calls), func(p redis.Pipeliner, g int) *redis.Cmd {
		sc := s.completeCall(calls[g], todo, base, n, g < nshort)
		return sc.process(ctx, p)
	})
	for g, call := range calls {
		replies, err := callReplies(cmds, perr, g)
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

// external reports whether result goes to the record's own result key: a
// completed record holding it would be longer than the server's
// hash-max-listpack-value, which would turn its bucket into a hash table.
func (s *Store) external(result []byte) bool { return outcomeLen+len(result) > s.inline }

// shortCompletion reports whether op may go in a short call: its claim's
// window is the one of Redis time (base, alone), and it has no external
// result to write, no details to delete and no history list to end (its
// record carries its entry, or there is no history). The script checks the
// same and answers IdemCompleteFull otherwise.
func (s *Store) shortCompletion(op finishOp, base int64, n int) bool {
	c := op.c
	if op.full || n != 1 || c.window != base || s.external(op.result) ||
		s.historyMax() > 0 && !c.carries {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.details
}

// completeCall builds one idem_complete_batch.lua call for the entries
// call (indexes into todo), with the windows base..base+n-1; a short call
// passes an entry's lease key and its claim's bucket alone. An entry's
// arguments go as two: its fixed fields packed into one string
// (completeEntry) and its result.
func (s *Store) completeCall(call []int, todo []finishOp, base int64, n int, short bool) scriptCall {
	per := 5 + n
	if short {
		per = 2
	}
	sc := newScriptCall(scripts.IdemCompleteBatch, len(call)*per, 7+2*len(call))
	sc.addArgs(base, s.window.Milliseconds(), s.cfg.retention.Milliseconds(), n,
		s.historyMax(), s.historyTTL().Milliseconds(), flagArg(short))
	for e, j := range call {
		c := todo[j].c
		if short {
			if e == 0 {
				sc.addKey(c.keys.lease)
			} else {
				sc.addKey(arg(&c.keys.lease))
			}
			sc.addKey(arg(&c.keys.bucket))
		} else {
			s.completeKeys(&sc, e == 0, c, base, n)
			sc.addKey(arg(&c.keys.history))
		}
		sc.addArgs(s.completeEntry(todo[j]), bytesArg{&todo[j].result})
	}
	return sc
}

// completeEntry packs op's fixed arguments of idem_complete_batch.lua into
// one string, in the layout the script cuts (its header): state, external,
// details and delete-lease flags, how the history entry ends (1 completed, 2
// failed), a zero byte; the head of the record to write (its state byte,
// fence, payload fingerprint, attempt, and the length of its tail when it
// carries the history entry) and the entry it carries; then the record
// field and the lease value's prefix the fence check compares ("<token>
// <fence> "). The script writes the head as it is, so that it packs nothing.
// Redis pays for each argument a call passes (it parses it, then copies it
// into the script's ARGV table: about 0.05 us), and go-redis writes each
// with its own header: one string an entry instead of eleven. It is kept in
// the claim until the call has run, and goes by reference (strArg).
func (s *Store) completeEntry(op finishOp) strArg {
	c := op.c
	c.mu.Lock()
	details := c.details
	c.mu.Unlock()
	ext := s.external(op.result)
	end, x := byte(1), "completed"
	if op.state == Failed {
		end, x = 2, "failed"
	}
	// The record carries the entry when the PROCESSING record did and the
	// store keeps a history (idem_complete_batch.lua: what follows the
	// head is the entry, its end time (6 bytes), its end and the
	// completion time (4 bytes)).
	carried, tail, st := "", 0, byte(op.state)
	if c.carries && s.historyMax() > 0 {
		carried, tail, st = c.args.entry, len(c.args.entry)+6+len(x), st+32
	}
	if ext {
		st += 16
	}
	var num [24]byte
	fence := strconv.AppendUint(num[:0], c.Fence, 10)
	var head [26]byte
	head[0], head[1], head[2], head[3], head[4] = byte(op.state), flagByte(ext), flagByte(details), flagByte(s.inScript), end
	head[6] = st
	var f [8]byte
	binary.BigEndian.PutUint64(f[:], c.Fence)
	copy(head[7:14], f[1:]) // 7 bytes: fences are below 2^53
	copy(head[14:22], c.keys.fp)
	binary.BigEndian.PutUint16(head[22:], uint16(c.Attempt)) //nolint:gosec // attempts stop at 65,535 (idem_claim.lua)
	binary.BigEndian.PutUint16(head[24:], uint16(tail))      //nolint:gosec // an entry's fields are bounded: history.go
	var b strings.Builder
	b.Grow(len(head) + len(carried) + len(c.keys.field) + len(c.args.token) + len(fence) + 2)
	b.Write(head[:])
	b.WriteString(carried)
	b.WriteString(c.keys.field)
	b.WriteString(c.args.token)
	b.WriteByte(' ')
	b.Write(fence)
	b.WriteByte(' ')
	c.args.completion = b.String()
	return arg(&c.args.completion)
}

// flagByte is a packed flag: 1 or 0.
func flagByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// flagArg is a script's flag argument, "1" or "0", in an interface made once.
func flagArg(b bool) any {
	if b {
		return flagOne
	}
	return flagZero
}

var flagOne, flagZero any = "1", "0"

// seq returns 0..n-1.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// completeKeys adds the keys of c that both complete scripts take first to
// sc: lease, details, result, the claim's bucket and the buckets of the
// windows base..base+n-1. first is set for the call's first entry, whose
// lease key goes as a string (scriptCall).
func (s *Store) completeKeys(sc *scriptCall, first bool, c *Claim, base int64, n int) {
	if first {
		sc.addKey(c.keys.lease)
	} else {
		sc.addKey(arg(&c.keys.lease))
	}
	sc.addKey(arg(&c.keys.details))
	sc.addKey(arg(&c.keys.result))
	sc.addKey(arg(&c.keys.bucket))
	for w := base; w < base+int64(n); w++ {
		sc.addKey(s.bucketKeyArg(c, w))
	}
}

// appendComplete adds op's KEYS and ARGV for idem_complete.lua to sc, with
// the windows base..base+n-1 and the window base, window length and
// retention after the fifth argument.
func (s *Store) appendComplete(sc *scriptCall, op finishOp, base int64, n int) {
	c := op.c
	s.completeKeys(sc, true, c, base, n)
	external := s.external(op.result)
	c.mu.Lock()
	details := c.details
	c.mu.Unlock()
	// The fence goes out in decimal, as go-redis writes a uint64.
	sc.addArgs(arg(&c.args.token), c.Fence, arg(&c.keys.field), arg(&c.keys.fp), c.Attempt,
		base, s.window.Milliseconds(), s.cfg.retention.Milliseconds())
	sc.addArgs(int(op.state), flagArg(external), flagArg(details), op.result, s.deleteFlag())
}

// refused returns the error of a complete script that Redis refused: the
// lease is not c's and no outcome of c's fence is stored (ErrRefused).
func (s *Store) refused(c *Claim, err error) error {
	if err == nil {
		if err = c.Lease.Err(); err == nil {
			err = lease.ErrLost
		}
	}
	return fmt.Errorf("%w: complete %s (fence %d): %w", ErrRefused, quoteKey(c.Key), c.Fence, err)
}

// unanswered returns the error of a complete script whose answer did not
// come. A Redis error reply means the script did not run (ErrUnavailable or
// the reply); anything else (a cut connection, a timeout) may have followed
// the write: the outcome is unknown, and c remembers that a send may have
// landed, so that a later settle from the record does not call it given up.
func (s *Store) unanswered(c *Claim, err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		return err
	}
	c.mu.Lock()
	c.sent = true
	c.mu.Unlock()
	return fmt.Errorf("%w: complete %s (fence %d): %w", ErrOutcomeUnknown, quoteKey(c.Key), c.Fence, err)
}

// committed returns the *CommittedError for c's key, with the stored
// record when it can be read.
func (s *Store) committed(ctx context.Context, c *Claim, info *Info) error {
	if info == nil {
		in, err := s.LookupResult(ctx, c.Key)
		if err != nil || in.Fence != c.Fence {
			return fmt.Errorf("%w: key %s (fence %d); the stored outcome could not be read back: %w",
				ErrAlreadyCommitted, quoteKey(c.Key), c.Fence, err)
		}
		info = &in
	}
	return &CommittedError{Key: c.Key, Record: Record{State: info.State, Fence: info.Fence,
		Fingerprint: info.Fingerprint, Attempt: info.Attempt, At: info.At, Result: info.Result}}
}

// settle answers a finish whose lease had already ended locally (cause):
// nothing is sent; the record tells whether an earlier send of c's finish
// landed. nil: it holds exactly op's outcome under c's fence; a
// *CommittedError: another outcome of c's fence; ErrGivenUp (and
// ErrLeaseLost): no outcome of c's fence; ErrOutcomeUnknown: the record
// cannot be read and an earlier send's answer was lost.
func (s *Store) settle(ctx context.Context, op finishOp, cause error) error {
	c := op.c
	info, err := s.LookupResult(ctx, c.Key)
	c.mu.Lock()
	sent := c.sent
	c.mu.Unlock()
	switch {
	case err != nil && sent:
		return s.end(c, fmt.Errorf("%w: complete %s (fence %d): the lease ended locally (%w) and the record "+
			"cannot be read: %w", ErrOutcomeUnknown, quoteKey(c.Key), c.Fence, cause, err))
	case err == nil && info.Fence == c.Fence && (info.State == Completed || info.State == Failed):
		if info.State == op.state && bytes.Equal(info.Result, op.result) {
			return nil
		}
		return s.committed(ctx, c, &info)
	}
	return fmt.Errorf("%w: complete %s (fence %d): the lease ended locally before the write (%w); nothing was "+
		"sent and no outcome of this fence is stored: %w", ErrGivenUp, quoteKey(c.Key), c.Fence, cause, ErrLeaseLost)
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
	return leasing.BeginFinish(l)
}

// abortFinish settles a finishing mark after a script that wrote nothing:
// refused (the script answered lost) ends l as lost, otherwise l is held and
// renewed again (leasing.AbortFinish).
func (s *Store) abortFinish(l *lease.Lease, refused bool) {
	if s.inScript {
		leasing.AbortFinish(l, refused)
	}
}

// deleteFlag tells a finishing script whether to delete the lease key itself
// (in the same atomic step as the record write): only when that ends the
// lease (leasing.EndsInScript), which the Store then forgets locally.
// Otherwise the key stays until endLeases releases it through the Manager;
// the record is written either way.
func (s *Store) deleteFlag() any { return flagArg(s.inScript) }

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
			leasing.Forget(l)
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

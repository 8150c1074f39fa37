package compensation

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/lease"
)

// Journal records the saga steps of one job attempt: the job's lease (name,
// fence, token). It is safe for concurrent use, but steps are ordered by the
// order their intents reach Redis.
type Journal struct {
	r   *Runner
	l   *lease.Lease
	ref Ref

	mu      sync.Mutex
	indexed bool
}

// Journal returns the journal of the attempt holding l. l must come from the
// Runner's lease.Manager.
func (r *Runner) Journal(l *lease.Lease) *Journal {
	return &Journal{r: r, l: l, ref: Ref{Name: l.Name(), Fence: l.Fence()}}
}

// Ref returns the journal's reference.
func (j *Journal) Ref() Ref { return j.ref }

// Key returns the lease name the journal belongs to.
func (j *Journal) Key() string { return j.ref.Name }

// Fence returns the fence of the attempt.
func (j *Journal) Fence() uint64 { return j.ref.Fence }

// Step runs one saga step: it journals the intent (handler name and args,
// encoded as JSON) while the lease is still held, runs do, then marks the
// step done. If the intent cannot be journaled (the lease is lost: an error
// wrapping lease.ErrLost; the journal is being compensated: [ErrNotOpen]),
// do does not run. If do fails, or the process dies before the step is
// marked done, the step stays in doubt and is compensated like a done step:
// handlers must accept steps that never took effect.
//
// When do's effect completes after another process has begun compensating
// the step (this process was a zombie), Step returns a [*LateEffectError]:
// the step is reopened and will be compensated again under a new
// generation; the caller should compensate ([Journal.Compensate]).
func (j *Journal) Step(ctx context.Context, name string, do func(context.Context) error, handler string, args any) error {
	if name == "" || len(name) > MaxHandlerNameLen || do == nil {
		return fmt.Errorf("%w: step name must be 1 to %d bytes and do non-nil", ErrInvalid, MaxHandlerNameLen)
	}
	if !j.r.reg.Has(handler) {
		return fmt.Errorf("%w: %q (register it before the step runs)", ErrUnknownHandler, handler)
	}
	enc, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("%w: encode arguments of step %q: %w", ErrInvalid, name, err)
	}
	if len(enc) > j.r.cfg.maxArgs {
		return fmt.Errorf("%w: arguments of step %q are %d bytes, limit %d", ErrInvalid, name, len(enc), j.r.cfg.maxArgs)
	}
	if err := j.ensureIndexed(ctx); err != nil {
		return err
	}
	res, err := leasing.Fenced(ctx, j.r.leases, j.l, scripts.CompIntent,
		[]string{j.r.journalKey(j.ref), j.r.fencesKey(j.ref.Name)},
		j.ref.Name, name, handler, enc, j.r.cfg.openRetention.Milliseconds(), j.r.cfg.maxSteps)
	if err != nil {
		return j.r.redisErr("intent", j.ref, err)
	}
	j.setIndexed()
	n, _ := res.(int64)
	switch {
	case n == scripts.CompIntentNotOpen:
		return fmt.Errorf("%w: %s", ErrNotOpen, j.ref)
	case n == scripts.CompIntentTooMany:
		return fmt.Errorf("%w: %s holds %d", ErrTooManySteps, j.ref, j.r.cfg.maxSteps)
	case n < 1:
		return fmt.Errorf("compensation: intent %s: unexpected reply %v", j.ref, res)
	}

	if err := do(ctx); err != nil {
		return err
	}

	// The effect happened: record it even if ctx was cancelled meanwhile.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	res, err = scripts.CompDone.Run(dctx, j.r.client,
		[]string{j.r.journalKey(j.ref), j.r.fencesKey(j.ref.Name)},
		n, leasing.Token(j.l), j.r.cfg.openRetention.Milliseconds()).Result()
	if err != nil {
		return j.r.redisErr("done", j.ref, err)
	}
	switch code, _ := res.(int64); code {
	case scripts.CompDoneMarked:
		return nil
	case scripts.CompDoneLate:
		_ = j.r.index(dctx, j.ref)
		return &LateEffectError{Ref: j.ref, Step: int(n), StepName: name}
	default:
		return fmt.Errorf("compensation: done %s step %d: code %d", j.ref, n, code)
	}
}

// ensureIndexed adds the journal to the recovery index before its intents,
// so that the index always covers every journal. The entry is added again
// (ZADD NX: a no-op while it is there) before every intent until one has
// run: a sweep may have dropped it meanwhile, the journal being absent then
// (see [Runner.dropAbsent]).
func (j *Journal) ensureIndexed(ctx context.Context) error {
	j.mu.Lock()
	indexed := j.indexed
	j.mu.Unlock()
	if indexed {
		return nil
	}
	return j.r.index(ctx, j.ref)
}

// setIndexed records that an intent ran after the journal was indexed: the
// journal exists from then on, and the sweep keeps its entry until it is
// closed, compensated or dead-lettered.
func (j *Journal) setIndexed() {
	j.mu.Lock()
	j.indexed = true
	j.mu.Unlock()
}

// Seal marks the journal as about to commit; call it just before the job's
// fenced commit. From then on the recovery sweep no longer compensates the
// journal on its own (the commit may have landed); a takeover of the key,
// which proves it did not, still does. It returns an error wrapping
// lease.ErrLost when the lease is lost and [ErrNotOpen] when compensation
// has begun; the job must not commit then.
func (j *Journal) Seal(ctx context.Context) error {
	res, err := leasing.Fenced(ctx, j.r.leases, j.l, scripts.CompSeal, []string{j.r.journalKey(j.ref)})
	if err != nil {
		return j.r.redisErr("seal", j.ref, err)
	}
	if code, _ := res.(int64); code == scripts.CompSealNotOpen {
		return fmt.Errorf("%w: %s", ErrNotOpen, j.ref)
	}
	return nil
}

// Close marks the journal committed after the job's commit landed: it will
// never be compensated, and expires after the closed retention. It does not
// need the lease (the commit may have released it).
func (j *Journal) Close(ctx context.Context) error {
	res, err := scripts.CompClose.Run(ctx, j.r.client,
		[]string{j.r.journalKey(j.ref), j.r.fencesKey(j.ref.Name)},
		leasing.Token(j.l), j.r.cfg.closedRetention.Milliseconds()).Result()
	if err != nil {
		return j.r.redisErr("close", j.ref, err)
	}
	switch code, _ := res.(int64); code {
	case scripts.CompCloseNoJournal, scripts.CompClosed:
		j.r.unindex(ctx, j.ref)
		return nil
	case scripts.CompCloseBegun:
		return fmt.Errorf("%w: %s is being compensated", ErrNotOpen, j.ref)
	default:
		return fmt.Errorf("compensation: close %s: code %d", j.ref, code)
	}
}

// Compensate compensates this journal: see [Runner.Compensate].
func (j *Journal) Compensate(ctx context.Context) error {
	return j.r.Compensate(ctx, j.ref)
}

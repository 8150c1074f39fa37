package compensation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/lease"
)

// SweepReport counts what one recovery pass found.
type SweepReport struct {
	Scanned      int // journals looked at
	Live         int // owner still holds its lease (or is creating the journal): left alone
	Compensated  int // compensated (or finished compensating) by this pass
	DeadLettered int // ended, or found, dead-lettered
	Busy         int // another process was compensating them
	Sealed       int // sealed by a dead owner, left to takeover (no WithCommitted, or ErrCommitUnknown)
	Committed    int // sealed journals found committed and closed
	Removed      int // finished, expired or abandoned entries dropped from the index
	Failed       int // errors (the next pass tries again)
}

// Sweep runs one recovery pass over the journal index: it finishes
// journals whose compensation was interrupted (the process died) and
// compensates open journals whose owner no longer holds the job's lease
// (it died, or gave the lease up without sealing or closing the journal).
// Each journal is compensated under its compensation lease, so concurrent
// sweeps in several processes do not run a step twice; a journal another
// process is compensating is skipped.
func (r *Runner) Sweep(ctx context.Context) (SweepReport, error) {
	var (
		rep  SweepReport
		errs []error
	)
	// Snapshot the whole index first (oldest first, page by page), then
	// examine it in pipelined chunks: live long jobs at the index's head
	// never hide abandoned journals behind them, and entries removed while
	// the pass runs shift nothing.
	var all []string
	for off := int64(0); ; off += int64(r.cfg.sweepBatch) {
		page, err := r.client.ZRange(ctx, r.indexKey(), off, off+int64(r.cfg.sweepBatch)-1).Result()
		if err != nil {
			return rep, fmt.Errorf("%w: sweep: %w", ErrUnavailable, err)
		}
		all = append(all, page...)
		if len(page) < r.cfg.sweepBatch {
			break
		}
	}
	for len(all) > 0 && ctx.Err() == nil {
		chunk := all[:min(len(all), r.cfg.sweepBatch)]
		all = all[len(chunk):]
		if err := r.sweepPage(ctx, chunk, &rep); err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

// sweepPage examines one page of index entries.
func (r *Runner) sweepPage(ctx context.Context, members []string, rep *SweepReport) error {
	type row struct {
		ref   Ref
		j     *redis.SliceCmd
		owner *lease.PeekCmd
	}
	rows := make([]row, 0, len(members))
	pipe := r.client.Pipeline()
	for _, m := range members {
		ref, err := ParseRef(m)
		if err != nil {
			pipe.ZRem(ctx, r.indexKey(), m)
			continue
		}
		rows = append(rows, row{
			ref:   ref,
			j:     pipe.HMGet(ctx, r.journalKey(ref), "st", "tok", "fen"),
			owner: lease.Peek(ctx, pipe, r.leases.Key(ref.Name)),
		})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("%w: sweep: %w", ErrUnavailable, err)
	}
	var errs []error
	for _, row := range rows {
		if ctx.Err() != nil {
			break
		}
		rep.Scanned++
		if err := r.sweepRow(ctx, row.ref, row.j.Val(), row.owner, rep); err != nil {
			rep.Failed++
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sweepRow handles one journal of a sweep's page: j is its st, tok and fen,
// owner its job's lease as read with them. It counts what it did in rep,
// but for a failure, which it returns.
func (r *Runner) sweepRow(ctx context.Context, ref Ref, j []any, owner *lease.PeekCmd, rep *SweepReport) error {
	st, _ := j[0].(string)
	alive := ownedBy(owner, j[1], j[2])
	mode := modeSweep
	switch State(st) {
	case "":
		// Read as absent: expired, or not created yet (its first Step
		// indexes it before its intent creates it, and may have done so
		// since this page was read).
		gone, err := r.dropAbsent(ctx, ref)
		switch {
		case err != nil:
			return err
		case gone:
			rep.Removed++
		default:
			rep.Live++
		}
		return nil
	case StateCommitted, StateCompensated:
		r.unindex(ctx, ref)
		rep.Removed++
		return nil
	case StateDeadLettered:
		r.markDead(ctx, ref)
		rep.DeadLettered++
		return nil
	case StateOpen:
		if alive {
			rep.Live++
			return nil
		}
	case StateSealed:
		if alive {
			rep.Live++
			return nil
		}
		force, err := r.sweepSealed(ctx, ref, j[1], rep)
		if err != nil || !force {
			return err
		}
		mode = modeForce
	}
	code, err := r.compensate(ctx, ref, mode, false)
	return countCompensation(code, err, rep)
}

// countCompensation counts in rep what a sweep's compensate answered, but
// for a failure, which it returns.
func countCompensation(code int, err error, rep *SweepReport) error {
	switch {
	case errors.Is(err, ErrBusy):
		rep.Busy++
	case errors.Is(err, ErrDeadLettered):
		rep.DeadLettered++
	case err != nil:
		return err
	case code == scripts.CompBeginStarted:
		rep.Compensated++
	case code == scripts.CompBeginAlive:
		rep.Live++
	case code == scripts.CompBeginSealed:
		rep.Sealed++
	default:
		rep.Removed++
	}
	return nil
}

// sweepSealed handles a journal sealed by an owner that no longer holds its
// lease: with WithCommitted, a commit that landed closes it, and one that did
// not is compensated (force). Without it, or when the check cannot tell, the
// journal is left to the key's takeover.
func (r *Runner) sweepSealed(ctx context.Context, ref Ref, tok any, rep *SweepReport) (force bool, err error) {
	if r.cfg.committed == nil {
		rep.Sealed++
		return false, nil
	}
	done, err := r.cfg.committed(ctx, ref)
	switch {
	case errors.Is(err, ErrCommitUnknown):
		rep.Sealed++
		return false, nil
	case err != nil:
		return false, fmt.Errorf("compensation: sweep %s: commit check: %w", ref, err)
	case !done:
		return true, nil
	}
	t, _ := tok.(string)
	if err := r.closeAs(ctx, ref, t); err != nil {
		return false, err
	}
	rep.Committed++
	return false, nil
}

// dropAbsent removes from the index a journal the sweep read as absent, if
// it is gone for good: there is still no journal and the job's lease is no
// longer held under its fence, so no intent can create it (comp_absent.lua
// reads both atomically; the index lies in another Cluster slot, so the
// removal follows, and that answer cannot change in between). It reports
// whether the entry was removed; one whose journal has appeared, or whose
// owner may still create it, is kept.
func (r *Runner) dropAbsent(ctx context.Context, ref Ref) (bool, error) {
	res, err := scripts.CompAbsent.Run(ctx, r.client, []string{r.journalKey(ref), r.leases.Key(ref.Name)},
		strconv.FormatUint(ref.Fence, 10)).Result()
	if err != nil {
		return false, r.redisErr("check absent journal", ref, err)
	}
	switch code, _ := res.(int64); code {
	case scripts.CompAbsentGone:
		r.unindex(ctx, ref)
		return true, nil
	case scripts.CompAbsentExists, scripts.CompAbsentPending:
		return false, nil
	default:
		return false, fmt.Errorf("compensation: check absent journal %s: code %d", ref, code)
	}
}

// closeAs closes a journal on behalf of its (dead) owner whose commit landed.
func (r *Runner) closeAs(ctx context.Context, ref Ref, token string) error {
	res, err := scripts.CompClose.Run(ctx, r.client, []string{r.journalKey(ref), r.fencesKey(ref.Name)},
		token, r.cfg.closedRetention.Milliseconds()).Result()
	if err != nil {
		return r.redisErr("close", ref, err)
	}
	if code, _ := res.(int64); code != scripts.CompClosed && code != scripts.CompCloseNoJournal {
		return fmt.Errorf("compensation: close %s: code %d", ref, code)
	}
	r.unindex(ctx, ref)
	return nil
}

// Start starts the periodic recovery sweep (every sweep interval, jittered)
// in one goroutine and returns. The lease.Manager must be started.
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.started {
		return nil
	}
	r.started = true
	r.loopDone = make(chan struct{})
	go r.loop(context.WithoutCancel(ctx))
	return nil
}

func (r *Runner) loop(ctx context.Context) {
	defer close(r.loopDone)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.base, cancel) //nolint:contextcheck // r.base ends when the Runner closes: the loop stops then
	defer stop()
	for {
		d := time.Duration(float64(r.cfg.sweepInterval) * (0.75 + 0.5*rand.Float64()))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		rep, err := r.Sweep(ctx)
		lvl := slog.LevelDebug
		if err != nil || rep.Compensated > 0 || rep.DeadLettered > 0 {
			lvl = slog.LevelInfo
		}
		r.log.Log(ctx, lvl, "compensation: sweep", slog.Int("scanned", rep.Scanned),
			slog.Int("compensated", rep.Compensated), slog.Int("dead_lettered", rep.DeadLettered),
			slog.Int("busy", rep.Busy), slog.Int("sealed", rep.Sealed), slog.Int("committed", rep.Committed),
			slog.Any("err", err))
	}
}

// Shutdown stops the sweep and cancels in-flight compensations (the journals
// stay marked, and the next sweep anywhere resumes them), then waits for them
// to return or for ctx. It is idempotent. Shut the Runner down before its
// lease.Manager.
func (r *Runner) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	done := r.loopDone
	r.mu.Unlock()
	r.stop(ErrClosed)
	wait := make(chan struct{})
	go func() {
		r.inflight.Wait()
		if done != nil {
			<-done
		}
		close(wait)
	}()
	select {
	case <-wait:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ownedBy reports whether the lease read by c is held with the journal's
// owner token tok and fence fen (as the journal hash stores them).
func ownedBy(c *lease.PeekCmd, tok, fen any) bool {
	h, ok := c.Holder()
	t, _ := tok.(string)
	f, _ := fen.(string)
	return ok && t != "" && h.Token == t && strconv.FormatUint(h.Fence, 10) == f
}

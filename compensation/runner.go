package compensation

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/retry"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/lease"
)

// maxErrorLen bounds the error text kept in a journal.
const maxErrorLen = 1024

// maxPasses bounds the passes over one journal in one call: a pass is
// repeated only when a late effect reopened a step meanwhile.
const maxPasses = 8

// Modes of comp_begin.lua.
const (
	modeOwner = "owner"
	modeSweep = "sweep"
	modeForce = "force"
	modeRetry = "retry"
)

// Runner journals saga steps and compensates journals: on the job's own
// triggers ([Journal.Compensate], [Runner.Compensate]), on takeover
// ([Runner.CompensatePrevious]), in the recovery sweep ([Runner.Sweep],
// periodic after [Runner.Start]) and on an operator's retry ([Runner.Retry]).
//
// One journal is compensated under its own lease from the Runner's
// lease.Manager, so one process at a time works on it; every step's claim and
// outcome are Lua scripts fenced by that lease, so a step is compensated at
// most once per (key, fence, step) even when a zombie and a new owner race.
//
// Shutdown order: [Runner.Shutdown] (stops the sweep and cancels in-flight
// compensations, which the next sweep resumes), then the lease.Manager's.
type Runner struct {
	client redis.UniversalClient
	leases *lease.Manager
	reg    *Registry
	cfg    cfg
	log    *slog.Logger

	base     context.Context
	stop     context.CancelCauseFunc
	mu       sync.Mutex
	started  bool
	closed   bool
	inflight sync.WaitGroup
	loopDone chan struct{}
}

// NewRunner returns a Runner storing journals through client and taking
// compensation leases from leases, which must also be the Manager holding
// the jobs' leases (journal writes are fenced by them) and must use the
// Redis backend ([lease.NewManager]) over the same Redis as client: fenced
// scripts are not available over Redlock. reg holds the compensation
// handlers.
func NewRunner(client redis.UniversalClient, leases *lease.Manager, reg *Registry, opts ...Opt) (*Runner, error) {
	if client == nil || leases == nil || reg == nil {
		return nil, fmt.Errorf("%w: NewRunner needs a client, a lease manager and a registry", ErrInvalid)
	}
	var c cfg
	for _, o := range opts {
		o.apply(&c)
	}
	c.prefix = cmp.Or(c.prefix, "lh:")
	c.attempts = cmp.Or(max(c.attempts, 0), 5)
	c.backoffBase = cmp.Or(c.backoffBase, 200*time.Millisecond)
	c.backoffMax = cmp.Or(c.backoffMax, 30*time.Second)
	c.stepTimeout = cmp.Or(c.stepTimeout, 30*time.Second)
	c.journalTimeout = cmp.Or(c.journalTimeout, 15*time.Minute)
	c.openRetention = cmp.Or(c.openRetention, 7*24*time.Hour)
	c.closedRetention = cmp.Or(c.closedRetention, 24*time.Hour)
	c.maxSteps = cmp.Or(c.maxSteps, 1000)
	c.maxArgs = cmp.Or(c.maxArgs, 64<<10)
	c.sweepInterval = cmp.Or(c.sweepInterval, 30*time.Second)
	c.sweepBatch = cmp.Or(c.sweepBatch, 1000)
	c.poll = cmp.Or(c.poll, 250*time.Millisecond)
	c.logger = cmp.Or(c.logger, slog.New(slog.DiscardHandler))
	if c.observer == nil {
		c.observer = ObserverFuncs{}
	}
	base, stop := context.WithCancelCause(context.Background())
	return &Runner{client: client, leases: leases, reg: reg, cfg: c, log: c.logger, base: base, stop: stop}, nil
}

// Registry returns the Runner's handler registry.
func (r *Runner) Registry() *Registry { return r.reg }

// Compensate compensates the journal ref for its owner's triggers: the job's
// lease was lost, its fenced commit was rejected, or it failed terminally.
// Steps are undone in reverse order, in-doubt steps included. It runs
// detached from ctx's cancellation (it keeps ctx's values, e.g. the trace),
// bounded by the journal timeout and by [Runner.Shutdown]; when another
// process is compensating the journal, it waits for it. It returns nil once
// every step is compensated (or when there is nothing to compensate), and a
// [*DeadLetterError] when a step's compensation failed on every attempt.
func (r *Runner) Compensate(ctx context.Context, ref Ref) error {
	_, err := r.compensate(ctx, ref, modeOwner, true)
	return err
}

// CompensatePrevious is the takeover trigger: the caller acquired name with
// fence and compensates every journal of name with an older fence that is
// neither committed nor compensated yet (its owner's commit did not land,
// since the key was taken over). Call it before running the job again.
func (r *Runner) CompensatePrevious(ctx context.Context, name string, fence uint64) error {
	fences, err := r.client.ZRangeArgs(ctx, redis.ZRangeArgs{
		Key: r.fencesKey(name), ByScore: true, Start: "-inf", Stop: fmt.Sprintf("(%d", fence),
	}).Result()
	if err != nil {
		return fmt.Errorf("%w: list journals of %q: %w", ErrUnavailable, name, err)
	}
	var errs []error
	for _, f := range fences {
		ref, err := ParseRef(f + ":" + name)
		if err != nil {
			continue
		}
		if _, err := r.compensate(ctx, ref, modeForce, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// detach returns a context with ctx's values, bounded by the journal timeout
// and cancelled by Shutdown.
func (r *Runner) detach(ctx context.Context) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.journalTimeout)
	stop := context.AfterFunc(r.base, cancel)
	return dctx, func() { stop(); cancel() }
}

func (r *Runner) enter() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.inflight.Add(1)
	return nil
}

// compensate runs the journal's compensation in mode, returning the
// comp_begin code.
func (r *Runner) compensate(ctx context.Context, ref Ref, mode string, wait bool) (int, error) {
	if err := r.enter(); err != nil {
		return 0, err
	}
	defer r.inflight.Done()
	ctx, cancel := r.detach(ctx)
	defer cancel()

	l, err := r.acquire(ctx, ref, wait)
	if err != nil {
		return 0, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := l.Release(rctx); err != nil && !errors.Is(err, lease.ErrLost) {
			r.log.Warn("compensation: release compensation lease", slog.String("journal", ref.String()), slog.Any("err", err))
		}
	}()

	jkey := r.journalKey(ref)
	res, err := leasing.Fenced(ctx, r.leases, l, scripts.CompBegin, []string{jkey, r.leases.Key(ref.Name)},
		mode, r.cfg.openRetention.Milliseconds())
	if err != nil {
		return 0, r.redisErr("begin", ref, err)
	}
	code, n, err := pair(res)
	if err != nil {
		return 0, err
	}
	switch code {
	case scripts.CompBeginAbsent, scripts.CompBeginDone, scripts.CompBeginCommitted:
		r.unindex(ctx, ref)
		return code, nil
	case scripts.CompBeginDead:
		r.markDead(ctx, ref)
		return code, &DeadLetterError{Ref: ref, Err: errors.New("dead-lettered earlier; retry it")}
	case scripts.CompBeginAlive, scripts.CompBeginSealed:
		return code, nil
	case scripts.CompBeginStarted:
	default:
		return code, fmt.Errorf("compensation: begin %s: unexpected code %d", ref, code)
	}
	r.log.Info("compensation: compensating journal", slog.String("journal", ref.String()),
		slog.String("mode", mode), slog.Int("steps", n))

	for range maxPasses {
		dead, err := r.pass(ctx, l, ref, n)
		if err != nil {
			return code, err
		}
		res, err := leasing.Fenced(ctx, r.leases, l, scripts.CompSettle, []string{jkey, r.fencesKey(ref.Name)},
			r.cfg.closedRetention.Milliseconds())
		if err != nil {
			return code, r.redisErr("settle", ref, err)
		}
		st, err := ints(res, 3)
		if err != nil {
			return code, err
		}
		switch st[0] {
		case scripts.CompSettleDone:
			r.unindex(ctx, ref)
			_ = r.client.ZRem(ctx, r.deadKey(), ref.String()).Err()
			r.log.Info("compensation: journal compensated", slog.String("journal", ref.String()))
			return code, nil
		case scripts.CompSettleDead:
			r.markDead(ctx, ref)
			if dead == nil {
				dead = &DeadLetterError{Ref: ref, Err: errors.New("a step is dead-lettered")}
			}
			r.log.Error("compensation: journal dead-lettered", slog.String("journal", ref.String()),
				slog.Int("step", dead.Step), slog.Any("err", dead.Err))
			return code, dead
		case scripts.CompSettlePending:
			continue // a late effect reopened a step: another pass
		default:
			return code, fmt.Errorf("compensation: settle %s: unexpected code %d", ref, st[0])
		}
	}
	return code, fmt.Errorf("compensation: %s: steps kept reopening after %d passes", ref, maxPasses)
}

// acquire takes the journal's compensation lease, waiting for another holder
// when wait is set.
func (r *Runner) acquire(ctx context.Context, ref Ref, wait bool) (*lease.Lease, error) {
	for {
		l, err := r.leases.Acquire(ctx, compLeaseName(ref))
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, lease.ErrHeld) {
			return nil, r.redisErr("acquire", ref, err)
		}
		if !wait {
			return nil, fmt.Errorf("%w: %s", ErrBusy, ref)
		}
		t := time.NewTimer(r.cfg.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("compensation: wait for %s: %w (%w)", ref, context.Cause(ctx), ErrBusy)
		case <-t.C:
		}
	}
}

// pass compensates the steps of one journal in reverse order, stopping at
// the first dead-lettered step (a saga undoes step i only after i+1).
func (r *Runner) pass(ctx context.Context, l *lease.Lease, ref Ref, n int) (*DeadLetterError, error) {
	for i := n; i >= 1; i-- {
		dead, err := r.step(ctx, l, ref, i)
		if err != nil || dead != nil {
			return dead, err
		}
	}
	return nil, nil
}

// step compensates step i, retrying with backoff.
func (r *Runner) step(ctx context.Context, l *lease.Lease, ref Ref, i int) (*DeadLetterError, error) {
	jkey := r.journalKey(ref)
	for {
		res, err := leasing.Fenced(ctx, r.leases, l, scripts.CompClaim, []string{jkey}, i)
		if err != nil {
			return nil, r.redisErr("claim", ref, err)
		}
		vals, ok := res.([]any)
		if !ok || len(vals) == 0 {
			return nil, fmt.Errorf("compensation: claim %s step %d: unexpected reply %v", ref, i, res)
		}
		switch code, _ := vals[0].(int64); code {
		case scripts.CompClaimed:
		case scripts.CompClaimDone:
			return nil, nil
		case scripts.CompClaimDead:
			return &DeadLetterError{Ref: ref, Step: i, Err: errors.New("dead-lettered earlier")}, nil
		default:
			return nil, fmt.Errorf("compensation: claim %s step %d: code %d", ref, i, code)
		}
		if len(vals) < 7 {
			return nil, fmt.Errorf("compensation: claim %s step %d: short reply", ref, i)
		}
		att, _ := vals[1].(int64)
		gen, _ := vals[2].(int64)
		handler, _ := vals[3].(string)
		args, _ := vals[4].(string)
		done, _ := vals[5].(int64)
		name, _ := vals[6].(string)
		info := StepInfo{Ref: ref, Step: i, Name: name, Handler: handler, Attempt: int(att),
			Generation: int(gen), InDoubt: done == 0}

		herr := r.invoke(l, info, args) //nolint:contextcheck // a step runs under the compensation lease's context: it ends when the lease is lost
		outcome, code := OutcomeCompensated, scripts.CompAttemptCompensated
		switch {
		case herr == nil:
		case l.Err() != nil:
			// The compensation lease is gone: another process takes over.
			r.cfg.observer.StepEnd(ctx, info, OutcomeSuperseded, herr)
			return nil, fmt.Errorf("compensation: %s step %d: compensation lease lost: %w", ref, i, l.Err())
		case errors.Is(herr, ErrUnknownHandler) || int(att) >= r.cfg.attempts:
			outcome, code = OutcomeDeadLettered, scripts.CompAttemptDead
		default:
			outcome, code = OutcomeRetry, scripts.CompAttemptRetry
		}
		res, err = leasing.Fenced(ctx, r.leases, l, scripts.CompFinish, []string{jkey}, i, code, errText(herr), gen)
		if err != nil {
			r.cfg.observer.StepEnd(ctx, info, OutcomeSuperseded, err)
			return nil, r.redisErr("finish", ref, err)
		}
		if rec, _ := res.(int64); rec == scripts.CompFinishSuperseded {
			r.cfg.observer.StepEnd(ctx, info, OutcomeSuperseded, herr)
			return nil, nil // reopened by a late effect: the next pass claims it again
		}
		r.cfg.observer.StepEnd(ctx, info, outcome, herr)
		switch outcome {
		case OutcomeCompensated:
			r.log.Info("compensation: step compensated", slog.String("journal", ref.String()),
				slog.Int("step", i), slog.String("handler", handler), slog.Int("attempt", int(att)),
				slog.Bool("in_doubt", info.InDoubt))
			return nil, nil
		case OutcomeDeadLettered:
			return &DeadLetterError{Ref: ref, Step: i, StepName: name, Attempts: int(att), Err: herr}, nil
		}
		d := r.backoff(int(att))
		r.log.Warn("compensation: step failed, retrying", slog.String("journal", ref.String()),
			slog.Int("step", i), slog.String("handler", handler), slog.Int("attempt", int(att)),
			slog.Duration("backoff", d), slog.Any("err", herr))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-l.Done():
			t.Stop()
			return nil, fmt.Errorf("compensation: %s: compensation lease lost: %w", ref, l.Err())
		case <-t.C:
		}
	}
}

// invoke runs one attempt on a context detached from the job, derived from
// the compensation lease (lost lease, cancelled attempt) with the step timeout.
func (r *Runner) invoke(l *lease.Lease, info StepInfo, args string) error {
	hctx, cancel := context.WithTimeout(l.Context(), r.cfg.stepTimeout)
	defer cancel()
	hctx = context.WithValue(hctx, stepKey{}, info)
	hctx = r.cfg.observer.StepStart(hctx, info)
	return r.reg.run(hctx, info.Handler, []byte(args))
}

// backoff is the delay after the n-th failed attempt of a step: the module's
// one backoff (between half and all of a step that doubles from the base up
// to the ceiling).
func (r *Runner) backoff(n int) time.Duration {
	return retry.Delay(n, r.cfg.backoffBase, r.cfg.backoffMax)
}

func (r *Runner) unindex(ctx context.Context, ref Ref) {
	if err := r.client.ZRem(ctx, r.indexKey(), ref.String()).Err(); err != nil {
		r.log.Warn("compensation: unindex journal", slog.String("journal", ref.String()), slog.Any("err", err))
	}
}

func (r *Runner) index(ctx context.Context, ref Ref) error {
	err := r.client.ZAddNX(ctx, r.indexKey(), redis.Z{Score: float64(time.Now().UnixMilli()), Member: ref.String()}).Err()
	if err != nil {
		return r.redisErr("index", ref, err)
	}
	return nil
}

func (r *Runner) markDead(ctx context.Context, ref Ref) {
	if err := r.client.ZAddNX(ctx, r.deadKey(), redis.Z{Score: float64(time.Now().UnixMilli()), Member: ref.String()}).Err(); err != nil {
		r.log.Warn("compensation: record dead letter", slog.String("journal", ref.String()), slog.Any("err", err))
		return
	}
	r.unindex(ctx, ref)
}

// redisErr classifies an error from a Redis call: but for a lost or released lease, a
// refused argument, a closed Manager and the caller's own context, the call
// could not be made, which is an outage.
func (r *Runner) redisErr(op string, ref Ref, err error) error {
	switch {
	case errors.Is(err, ErrUnavailable), errors.Is(err, lease.ErrLost), errors.Is(err, lease.ErrReleased),
		errors.Is(err, lease.ErrInvalid), errors.Is(err, lease.ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("compensation: %s %s: %w", op, ref, err)
	}
	return fmt.Errorf("compensation: %s %s: %w (%w)", op, ref, err, ErrUnavailable)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > maxErrorLen {
		s = s[:maxErrorLen]
	}
	return s
}

func pair(res any) (int, int, error) {
	v, err := ints(res, 2)
	if err != nil {
		return 0, 0, err
	}
	return v[0], v[1], nil
}

func ints(res any, n int) ([]int, error) {
	vals, ok := res.([]any)
	if !ok || len(vals) < n {
		return nil, fmt.Errorf("compensation: unexpected script reply %v", res)
	}
	out := make([]int, n)
	for i := range n {
		v, ok := vals[i].(int64)
		if !ok {
			return nil, fmt.Errorf("compensation: unexpected script reply %v", res)
		}
		out[i] = int(v)
	}
	return out, nil
}

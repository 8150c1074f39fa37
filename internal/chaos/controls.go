package chaos

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/demo"
)

// Operator controls during the fault phase (Config.Cancels,
// Config.TypePauses). A few jobs, drawn from the seed, are cancelled while
// they run, as `worker cancel` does (inspect's Inspector.Cancel, against
// Redis directly): they hold (Config.Hold) between their charge and their
// fenced write, so that they are running when their cancel comes. And the
// demo.transfer type is paused and resumed at seeded times, as `worker
// pause` and `worker resume` do, while records keep arriving.
//
// A cancelled key ends FAILED as cancelled, its charge refunded by its saga;
// its fenced write is either absent (the cancel came before it) or applied
// once (a held transfer writes after its hold whatever its context says: see
// demo.Transferer.Run). [Check] holds cancelled keys to that: never doubled,
// never half applied, charges net zero.

// ControlFigures are the operator controls a run injected, and what came of
// them.
type ControlFigures struct {
	// CancelTargets counts the jobs drawn to be cancelled.
	CancelTargets int
	// CancelsRequested counts the cancels a running key's lease took.
	CancelsRequested int
	// CancelsMissed counts targets not cancelled: found finished before
	// they were seen running (an attempt after a kill does not hold), or
	// not run before the drain ended.
	CancelsMissed int
	// TypePauses counts the pauses of demo.transfer carried out, each
	// followed by its resume.
	TypePauses int
	// TypePaused is the total time the type was paused.
	TypePaused time.Duration
	// TypePauseClaims counts the claims of demo.transfer keys that ran a
	// job (acquired or taken over) while the type was paused, from one
	// renew interval after the pause (when every worker follows it) to the
	// resume, as the Redis links saw them. A worker started during a pause
	// reads the paused types with its first renew round, so a restart may
	// claim a record before it; the figure is informational.
	TypePauseClaims int
}

// controls drives the operator controls of a run.
type controls struct {
	in    *inspect.Inspector
	rdb   *redis.Client
	log   *slog.Logger
	renew time.Duration

	wg   sync.WaitGroup     // the cancels waiting for their key
	stop context.CancelFunc // ends them once the drain is over

	mu        sync.Mutex
	targets   []string
	requested map[string]uint64 // key: the fence its cancel was asked for
	missed    int
	windows   [][2]time.Time // the type's pauses: from, to
}

// planCancels draws n distinct job indexes from the middle of the run (its
// second to eighth tenth), in order.
func planCancels(seed uint64, jobs, n int) []int {
	lo, hi := jobs/10, jobs*8/10
	n = min(n, hi-lo)
	if n <= 0 {
		return nil
	}
	rng := mrand.New(mrand.NewPCG(seed, 4))
	picked := map[int]bool{}
	for len(picked) < n {
		picked[lo+rng.IntN(hi-lo)] = true
	}
	out := make([]int, 0, n)
	for i := range picked {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// planPauses draws when each of n pauses of the job type begins: one in
// each nth of the horizon, somewhere in its middle half.
func planPauses(seed uint64, horizon time.Duration, n int) []time.Duration {
	rng := mrand.New(mrand.NewPCG(seed, 5))
	out := make([]time.Duration, n)
	for k := range out {
		out[k] = time.Duration((float64(k) + 0.25 + 0.5*rng.Float64()) * float64(horizon) / float64(n))
	}
	return out
}

// planControls draws the jobs to cancel (which hold, see enqueue) and
// opens the controls' Inspector on the run's Redis, when the run injects
// cancels or pauses.
func (r *run) planControls(jobs []Job) {
	c := r.cfg
	if c.Cancels == 0 && c.TypePauses == 0 {
		return
	}
	r.cancelIdx = planCancels(c.Seed, len(jobs), c.Cancels)
	rdb := redis.NewClient(&redis.Options{Addr: r.redis.Addr(), DialTimeout: 500 * time.Millisecond,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	r.ctl = &controls{rdb: rdb, in: inspect.New(rdb, inspect.WithPrefix("lh:")), log: r.log,
		renew: c.LeaseTTL / 3, requested: map[string]uint64{}}
	for _, i := range r.cancelIdx {
		r.ctl.targets = append(r.ctl.targets, jobs[i].Key)
	}
}

// close ends the cancels still waiting and releases the Inspector and its
// client.
func (c *controls) close(ctx context.Context) {
	if c == nil {
		return
	}
	if c.stop != nil {
		c.stop()
	}
	c.wg.Wait()
	_ = c.in.Close(ctx)
	_ = c.rdb.Close()
}

// scheduleControls starts the cancels (job i is enqueued about i/rate
// after start; a backlog may run it much later, in the drain even: each
// waits for its key until the drain is over, see settle) and the pauses of
// the job type, as faults of the run (r.faults, waited for before the
// drain).
func (r *run) scheduleControls(ctx context.Context, start time.Time, jobs []Job) {
	if r.ctl == nil {
		return
	}
	c := r.cfg
	cctx, stop := context.WithCancel(ctx)
	r.ctl.stop = stop
	for _, i := range r.cancelIdx {
		due := start.Add(time.Duration(i/50*50) * time.Second / time.Duration(c.Rate))
		key := jobs[i].Key
		r.ctl.wg.Go(func() { r.ctl.cancelWhenRunning(cctx, key, due) })
	}
	for _, at := range planPauses(c.Seed, c.Horizon(), c.TypePauses) {
		r.faults.Go(func() { r.ctl.pauseType(ctx, start.Add(at), c.TypePauseFor) })
	}
}

// cancelWhenRunning waits until due, then until key runs, and cancels it;
// it gives up when key has finished first or ctx ends.
func (c *controls) cancelWhenRunning(ctx context.Context, key string, due time.Time) {
	sleepCtx(ctx, time.Until(due))
	why := "the drain ended before it ran"
	for ctx.Err() == nil {
		ki, err := c.in.Key(ctx, key)
		if err == nil && (ki.State == idempotency.Completed || ki.State == idempotency.Failed) {
			why = "it finished between two looks"
			break
		}
		if err == nil && ki.Leased {
			res, err := c.in.Cancel(ctx, key, "chaos")
			if err == nil {
				c.mu.Lock()
				c.requested[key] = res.Fence
				c.mu.Unlock()
				c.log.Info("cancel requested", slog.String("key", key), slog.Uint64("fence", res.Fence))
				return
			}
			if errors.Is(err, inspect.ErrFinished) {
				why = "it finished first"
				break
			}
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	c.mu.Lock()
	c.missed++
	c.mu.Unlock()
	c.log.Info("cancel missed", slog.String("key", key), slog.String("why", why))
}

// pauseType pauses demo.transfer at at for pauseFor, then resumes it. The
// resume is tried until it lands (Redis may be restarting) or the run ends:
// a type left paused would never drain.
func (c *controls) pauseType(ctx context.Context, at time.Time, pauseFor time.Duration) {
	sleepCtx(ctx, time.Until(at))
	if err := c.in.Pause(ctx, demo.TransferType); err != nil {
		c.log.Warn("type pause skipped", slog.Any("err", err))
		return
	}
	from := time.Now()
	c.log.Info("type paused", slog.String("type", demo.TransferType))
	sleepCtx(ctx, pauseFor)
	for {
		_, err := c.in.Resume(ctx, demo.TransferType)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return // the run is over
		}
		c.log.Warn("type resume failed; trying again", slog.Any("err", err))
		sleepCtx(ctx, 200*time.Millisecond)
	}
	c.mu.Lock()
	c.windows = append(c.windows, [2]time.Time{from, time.Now()})
	c.mu.Unlock()
	c.log.Info("type resumed", slog.String("type", demo.TransferType), slog.Duration("paused", time.Since(from)))
}

// settle ends the cancels still waiting for their key (the drain is
// over), and returns the keys cancelled, logging the cancels that did not
// take.
func (c *controls) settle(ctx context.Context) (map[string]bool, error) {
	if c == nil {
		return map[string]bool{}, nil
	}
	if c.stop != nil {
		c.stop()
	}
	c.wg.Wait()
	return c.cancelled(ctx, true)
}

// cancelled returns the keys whose cancel was requested and whose record
// is FAILED as cancelled now; with logMisses, it logs the others.
func (c *controls) cancelled(ctx context.Context, logMisses bool) (map[string]bool, error) {
	out := map[string]bool{}
	c.mu.Lock()
	asked := maps.Clone(c.requested)
	c.mu.Unlock()
	for k, fence := range asked {
		ki, err := c.in.Key(ctx, k)
		if err != nil {
			return nil, err
		}
		if ki.State == idempotency.Failed && leasehold.IsCancelledFailure(ki.Failure) {
			out[k] = true
			continue
		}
		if !logMisses {
			continue
		}
		// The attempt's commit landed before it learnt of the cancel (a
		// later attempt is covered by the cancel: it never runs the job).
		c.log.Info("cancel did not take: the attempt committed first", slog.String("key", k),
			slog.Uint64("asked_fence", fence), slog.Uint64("fence", ki.Fence), slog.String("state", ki.State.String()))
	}
	return out, nil
}

// absentCancelled counts the cancelled keys without a transfer row: the
// drain does not wait for them.
func (r *run) absentCancelled(ctx context.Context) (int, error) {
	cancelled, err := r.ctl.cancelled(ctx, false)
	if err != nil || len(cancelled) == 0 {
		return 0, err
	}
	keys := make([]string, 0, len(cancelled))
	for k := range cancelled {
		keys = append(keys, k)
	}
	var written int
	err = r.db.QueryRow(ctx, `SELECT count(*) FROM demo_transfers WHERE key = ANY($1)`, keys).Scan(&written)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, err
	}
	return len(keys) - written, nil
}

// figures returns the controls' figures; ops is the run's history, for the
// claims made while the type was paused.
func (c *controls) figures(ops []porcupine.Operation) *ControlFigures {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := &ControlFigures{CancelTargets: len(c.targets), CancelsRequested: len(c.requested), CancelsMissed: c.missed,
		TypePauses: len(c.windows)}
	for _, w := range c.windows {
		f.TypePaused += w[1].Sub(w[0])
	}
	for _, op := range ops {
		in, out := op.Input.(Op), op.Output.(OpOutput)
		if in.Kind != OpClaim || out.Unknown || out.Code != ClaimAcquired && out.Code != ClaimTakeover {
			continue
		}
		for _, w := range c.windows {
			if op.Call > w[0].Add(c.renew).UnixNano() && op.Call < w[1].UnixNano() {
				f.TypePauseClaims++
				c.log.Info("claimed while the type was paused", slog.String("key", in.Key),
					slog.String("worker", op.Metadata.(Meta).Worker), slog.Time("at", time.Unix(0, op.Call)))
			}
		}
	}
	return f
}

// controlLines are the cancelled keys' and the controls' figures (none
// when the run injected no controls).
func (f Figures) controlLines() []line {
	c := f.Controls
	if c == nil {
		return nil
	}
	return []line{
		{"jobs_cancelled", f.JobsCancelled, "jobs"},
		{"cancelled_effect_absent", f.CancelledEffectAbsent, "jobs"},
		{"cancelled_effect_applied", f.CancelledEffectApplied, "jobs"},
		{"cancelled_not_compensated", f.CancelledNotCompensated, "keys"},
		{"cancel_targets", c.CancelTargets, "keys"},
		{"cancels_requested", c.CancelsRequested, "keys"},
		{"cancels_missed", c.CancelsMissed, "keys"},
		{"type_pauses", c.TypePauses, "pauses"},
		{"type_paused_ms", ms(c.TypePaused), "ms"},
		{"type_pause_claims", c.TypePauseClaims, "claims"},
	}
}

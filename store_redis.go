package leasehold

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/jobtrace"
	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/resulterr"
	"github.com/leasehold/leasehold/lease"
)

// redisStore adapts idempotency.Store (over a lease.Manager) to the worker.
type redisStore struct {
	rdb  redis.UniversalClient
	m    *lease.Manager
	s    *idempotency.Store
	comp *compensation.Runner // nil without WithCompensation

	completions  chan completion // to the completion batcher
	completeDone chan struct{}   // closed when the batcher stopped
}

// newRedisStore builds and starts the lease manager, the idempotency store
// and, with WithCompensation, the compensation runner. It returns the store
// and its shutdown function (runner first, then the lease manager).
func newRedisStore(ctx context.Context, rdb redis.UniversalClient, c *config) (*redisStore, func(context.Context) error, error) {
	m, err := lease.NewManager(rdb, c.leaseOptions()...)
	if err != nil {
		return nil, nil, fmt.Errorf("leasehold: %w", err)
	}
	if err := m.Start(ctx); err != nil {
		return nil, nil, mapStoreErr(fmt.Errorf("leasehold: %w", err))
	}
	iopts := []idempotency.Opt{idempotency.WithPrefix(c.keyPrefix), idempotency.WithRetention(c.retention),
		idempotency.WithLogger(c.logger), idempotency.WithMaxKeyLen(MaxKeyLen)}
	if c.hbThrottle < m.RenewInterval() {
		// Heartbeats asked for more often than the renewer's rounds are
		// stored when Heartbeat returns, not with the next round.
		iopts = append(iopts, idempotency.WithDetailsAtOnce())
	}
	iopts = append(iopts, c.idemOpts...)
	s, err := idempotency.New(ctx, rdb, m, iopts...)
	if err != nil {
		_ = m.Shutdown(context.WithoutCancel(ctx))
		return nil, nil, mapStoreErr(fmt.Errorf("leasehold: %w", err))
	}
	rs := &redisStore{rdb: rdb, m: m, s: s}
	rs.initBatcher()
	stop := make(chan struct{})
	go rs.completeLoop(context.WithoutCancel(ctx), stop)
	stopBatcher := func() { close(stop); <-rs.completeDone }
	if c.compReg == nil {
		return rs, func(ctx context.Context) error { stopBatcher(); return m.Shutdown(ctx) }, nil
	}
	// The sweep settles journals sealed by owners that died around their
	// commit against the idempotency record (commitLanded).
	copts := []compensation.Opt{compensation.WithPrefix(c.keyPrefix), compensation.WithLogger(c.logger),
		compensation.WithCommitted(rs.commitLanded)}
	copts = append(copts, compensation.WithObserver(compensationObserver(jobtrace.Of(c.tracer), s, c.logger)))
	r, err := compensation.NewRunner(rdb, m, c.compReg, append(copts, c.compOpts...)...)
	if err == nil {
		err = r.Start(ctx)
	}
	if err != nil {
		stopBatcher()
		_ = m.Shutdown(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("leasehold: compensation: %w", err)
	}
	rs.comp = r
	return rs, func(ctx context.Context) error {
		stopBatcher()
		return errors.Join(r.Shutdown(ctx), m.Shutdown(ctx))
	}, nil
}

// leaseOptions are the options of the worker's lease manager: the worker's
// TTL, prefix, logger and providers, then WithLeaseOptions (which New found
// to agree with them).
func (c *config) leaseOptions() []lease.Opt {
	lopts := []lease.Opt{lease.WithTTL(c.leaseTTL), lease.WithPrefix(c.keyPrefix), lease.WithLogger(c.logger),
		lease.WithTracerProvider(c.tp), lease.WithMeterProvider(c.mp)}
	return append(lopts, c.leaseOpts...)
}

// mapStoreErr reads an error of a Redis call by the class it was made with
// (internal/leasing.Class: every sentinel of lease, idempotency and
// compensation carries one). Outages come out matching ErrUnavailable and
// lost leases matching ErrLeaseLost, so that the worker fails closed or
// compensates; answers (retry, terminal) pass as they are, but for a
// too-large result, which gets the user-facing sentence with its fix. An
// error without a class (of go-redis, the network, a call the worker sent
// itself) is read by leasing.Classify, the module's one reading of go-redis
// errors.
func mapStoreErr(err error) error {
	if err == nil {
		return nil // before tl, which errors.As moves to the heap: most calls succeed
	}
	var tl *idempotency.TooLargeError
	switch {
	case errors.As(err, &tl) && tl.What == "result":
		// Refused with nothing written: permanent, never an outage to
		// retry (the lease would be renewed and the job hang).
		return &resulterr.Error{Err: tl}
	case err == nil, errors.Is(err, ErrLeaseLost), errors.Is(err, ErrUnavailable),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err // read as it is, or the caller's own context
	}
	switch leasing.ClassOf(err) {
	case leasing.ClassOutage:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case leasing.ClassLeaseLost:
		return fmt.Errorf("%w: %w", ErrLeaseLost, err)
	case leasing.ClassRetry, leasing.ClassTerminal:
		return err // an answer
	case leasing.ClassNone:
	}
	return leasing.Classify(err)
}

func (rs *redisStore) ClaimBatch(ctx context.Context, reqs []claimRequest) ([]claim, error) {
	out := make([]claim, len(reqs))
	ireqs := make([]idempotency.Request, 0, len(reqs))
	idx := make([]int, 0, len(reqs))
	for i, r := range reqs {
		fp, err := rs.s.Fingerprint(r.Payload)
		if err != nil {
			out[i].Outcome, out[i].Err = OutcomeUndecodable, err
			continue
		}
		ireqs = append(ireqs, rs.request(r, fp))
		idx = append(idx, i)
	}
	unavailable := 0
	for j, ic := range rs.s.ClaimBatch(ctx, ireqs) {
		i := idx[j]
		if rs.answer(&out[i], ic) {
			continue
		}
		out[i].Err = mapStoreErr(ic.Err)
		if out[i].Err == nil {
			out[i].Err = fmt.Errorf("leasehold: claim of %q answered nothing", reqs[i].Key)
		}
		if errors.Is(out[i].Err, ErrUnavailable) {
			unavailable++
		}
	}
	if unavailable > 0 && unavailable == len(ireqs) {
		return nil, out[idx[0]].Err
	}
	return out, nil
}

// request is r's idempotency request; the history fields only when the
// store keeps a history (the hex IDs cost allocations).
func (rs *redisStore) request(r claimRequest, fp idempotency.Fingerprint) idempotency.Request {
	ir := idempotency.Request{Key: r.Key, Fingerprint: fp, TTL: r.TTL}
	if rs.s.HistoryLen() <= 0 {
		return ir
	}
	ir.Worker, ir.Type = r.Worker, r.Type
	if r.Span.IsValid() {
		ir.TraceID, ir.SpanID = r.Span.TraceID().String(), r.Span.SpanID().String()
	}
	return ir
}

type completion struct {
	c      *idempotency.Claim
	result []byte
	done   chan error
}

// maxCompleteBatch bounds one completion pipeline, and the completions
// queued for the batcher.
const maxCompleteBatch = 256

// initBatcher makes the completion batcher's queue (buffered: see
// completeLoop) and its done channel; completeLoop runs it.
func (rs *redisStore) initBatcher() {
	rs.completions = make(chan completion, maxCompleteBatch)
	rs.completeDone = make(chan struct{})
}

// completeLoop runs the completion batcher until stop is closed; requests
// queued then are still sent and answered.
//
// The queue is buffered (maxCompleteBatch): a job hands its completion in
// without waiting for the batcher to take it, and parks once, on its answer.
// Unbuffered, each job parked twice (on the hand-in while a batch was in
// flight, then on its answer), and the batcher woke every job it took.
func (rs *redisStore) completeLoop(base context.Context, stop <-chan struct{}) {
	defer close(rs.completeDone)
	batch := make([]completion, 0, maxCompleteBatch)
	for {
		select {
		case <-stop: // first, so that a stopped batcher never waits again
			for {
				select {
				case first := <-rs.completions:
					rs.completeBatch(base, rs.gather(batch, first))
				default:
					return
				}
			}
		default:
		}
		select {
		case first := <-rs.completions:
			rs.completeBatch(base, rs.gather(batch, first))
		case <-stop:
		}
	}
}

// gather returns first and what else is queued, up to maxCompleteBatch, in
// batch's array.
func (rs *redisStore) gather(batch []completion, first completion) []completion {
	batch = append(batch[:0], first)
	for len(batch) < maxCompleteBatch {
		select {
		case r := <-rs.completions:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// completeBatch sends batch in one pipeline and answers each request.
func (rs *redisStore) completeBatch(base context.Context, batch []completion) {
	cs := make([]idempotency.Completion, len(batch))
	for i, r := range batch {
		cs[i] = idempotency.Completion{Claim: r.c, Result: r.result}
	}
	ctx, cancel := context.WithTimeout(base, 10*time.Second)
	errs := rs.s.CompleteBatch(ctx, cs)
	cancel()
	for i, r := range batch {
		r.done <- errs[i]
	}
}

func (rs *redisStore) Ping(ctx context.Context) error {
	return mapStoreErr(rs.rdb.Ping(ctx).Err())
}

// answer fills c from the store's answer ic; it reports false when ic is
// an error, not an answer.
func (rs *redisStore) answer(c *claim, ic *idempotency.Claim) bool {
	c.Outcome = ic.Outcome // one enum: leasehold.Outcome is idempotency.Outcome
	switch ic.Outcome {
	case OutcomeAcquired, OutcomeTakeover:
		c.Fence, c.Attempt, c.LastBeat, c.PrevFence, c.Cancelled = ic.Fence, ic.Attempt, ic.Details, ic.PrevFence, ic.Cancelled
		c.run = &redisAttempt{rs: rs, ic: ic}
	case OutcomeHeld:
		c.Remaining = ic.Remaining
	case OutcomeDuplicate:
		c.Fence = ic.Fence
		if r := ic.Record; r != nil {
			c.Attempt = r.Attempt
			if r.State == idempotency.Failed {
				c.Failure = string(r.Result)
			} else {
				c.Result = r.Result
			}
		}
	case OutcomeMismatch:
	default:
		c.Outcome = 0
		return false
	}
	return true
}

// redisAttempt is a running attempt's handle over its idempotency claim.
type redisAttempt struct {
	rs *redisStore
	ic *idempotency.Claim
}

var _ attempt = (*redisAttempt)(nil)

func (a *redisAttempt) Context() context.Context { return a.ic.Lease.Context() }
func (a *redisAttempt) TTL() time.Duration       { return a.ic.Lease.TTL() }
func (a *redisAttempt) Lease() *lease.Lease      { return a.ic.Lease }

// Complete hands the completion to the batcher, which sends what is queued
// in one pipeline (idempotency.CompleteBatch): with many jobs finishing at
// once, completions cost a round trip per batch instead of one per job, and
// an idle worker adds no delay.
func (a *redisAttempt) Complete(ctx context.Context, result []byte) error {
	req := completion{c: a.ic, result: result, done: make(chan error, 1)}
	select {
	case a.rs.completions <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-a.rs.completeDone:
		return errBatcherStopped
	}
	select {
	case err := <-req.done:
		return mapStoreErr(err)
	case <-a.rs.completeDone:
		// The batcher answers every request it took before it stops.
		select {
		case err := <-req.done:
			return mapStoreErr(err)
		default:
			return errBatcherStopped
		}
	}
}

// errBatcherStopped answers a completion handed in after the store began
// to close: nothing was written, and the attempt ends as one whose lease
// the worker gave up at shutdown (ErrShutdown, an ErrLeaseLost): its record
// is not marked done and the key runs again after the lease expires.
var errBatcherStopped = fmt.Errorf("%w: the store closed before the completion was sent", ErrShutdown)

func (a *redisAttempt) Fail(ctx context.Context, cause error, terminal bool) error {
	p := idempotency.Retryable
	if terminal {
		p = idempotency.Terminal
	}
	return mapStoreErr(a.rs.s.Fail(ctx, a.ic, p, cause))
}

func (a *redisAttempt) SaveDetails(ctx context.Context, details []byte) error {
	return mapStoreErr(a.rs.s.SaveDetails(ctx, a.ic, details))
}

// Committed reports whether the attempt's commit landed (see commitLanded
// in sealed.go for why the record proves it either way while it is
// retained).
func (a *redisAttempt) Committed(ctx context.Context) (bool, error) {
	landed, _, err := a.rs.completedWith(ctx, a.ic.Key, a.ic.Fence)
	return landed, err
}

func (a *redisAttempt) Abandon() {
	l := a.ic.Lease
	if l == nil || l.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.TTL())
	defer cancel()
	_ = l.Release(ctx) // best effort: otherwise it expires after its TTL
}

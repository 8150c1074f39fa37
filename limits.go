package leasehold

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/jobtrace"
	"github.com/leasehold/leasehold/internal/limit"
)

// Fleet-wide limits (WithConcurrencyLimit, WithLimitKey, WithRateLimit,
// RetryAfter). A job of a limited type belongs to one limit group: its type
// ("type:<type>"), or the group its registration's key function derives
// from it ("key:<group>"). Just before the dispatcher claims a batch, it
// takes a running slot for every limited job in one pipeline
// (lua/limit_acquire.lua, in the group's own Cluster slot, which is why it
// is not part of the claim script); a job whose group is full, held or
// over its rate is parked like a paused type's (not claimed, its offset not
// passed, counted in the memory budget) and looked at again within one
// renew interval, or as soon as a slot of its group frees in this worker.
// A slot whose claim does not run the job is given back at once; a running
// job's slot is renewed with the lease renew rounds (one script a group a
// round) and given back when the job ends, however it ends. A worker killed
// leaks its slots for one lease TTL at most: the next acquire prunes them.
// The registry that lists the groups (worker limits) is pruned as it is
// written: each renew round, a worker removes the groups of one HSCAN page
// that no worker registered for limit.PruneAge.

// EventLimitWait is the event a job's span carries when the job waits for
// its limit group (full, held until a time, or over its rate).
const EventLimitWait = "leasehold.limit.wait"

// Attributes of EventLimitWait.
const (
	AttrLimitGroup  = "leasehold.limit.group"
	AttrLimitReason = "leasehold.limit.reason"
	AttrLimitWait   = "leasehold.limit.wait_ms"
)

type limitConfig struct {
	concurrency int               // WithConcurrencyLimit
	keyFn       func(*Job) string // WithLimitKey
	keyLimit    int               // WithLimitKey's n
	rate        float64           // WithRateLimit
	burst       int               // WithRateLimit
}

// WithConcurrencyLimit runs at most n jobs of this type at once across all
// the workers of the fleet (sharing the Redis and the key prefix), counted
// in Redis: the job type is its limit group. A job that finds its group
// full is held, not claimed, until a slot frees. It cannot be combined with
// [WithLimitKey]. Default: no fleet-wide limit (each worker runs up to
// [WithConcurrency] jobs of all types).
func WithConcurrencyLimit(n int) JobOpt {
	return jobOptFunc(func(c *jobConfig) { c.limits.concurrency = n })
}

// WithTypeLimit runs at most n jobs of job type typ at once across every
// worker of the fleet (sharing the Redis and the key prefix), as
// [WithConcurrencyLimit] on the type's registration does, for a binary whose
// registrations its operator does not edit (`worker run --type-limit
// TYPE=N`). A registration with limit options of its own keeps them. Give
// every worker the same n: the one that takes a slot applies its own. Each
// call adds one type. Default: none.
func WithTypeLimit(typ string, n int) Opt {
	return optFunc(func(c *config) {
		if c.typeLimits == nil {
			c.typeLimits = map[string]int{}
		}
		c.typeLimits[typ] = n
	})
}

// checkTypeLimits refuses a WithTypeLimit without a type or a limit.
func (c *config) checkTypeLimits() error {
	for typ, n := range c.typeLimits {
		if typ == "" || n < 1 {
			return fmt.Errorf("%w: WithTypeLimit(%q, %d): want a job type and a limit of at least 1", ErrConflictingOptions, typ, n)
		}
	}
	return nil
}

// WithLimitKey derives a limit group from each job (a tenant, an account:
// group must be a pure function of the job's fields) and runs at most n
// jobs of a group at once across the fleet; n = 0 limits only the group's
// rate ([WithRateLimit]) and its Retry-After holds ([RetryAfter]). Job types
// whose function returns the same group share it: give them the same n. A
// job for which group returns "" is not limited. It cannot be combined with
// [WithConcurrencyLimit]. Default: none.
func WithLimitKey(group func(job *Job) string, n int) JobOpt {
	return jobOptFunc(func(c *jobConfig) { c.limits.keyFn, c.limits.keyLimit = group, n })
}

// WithRateLimit starts at most perSecond jobs a second of the job's limit
// group across the fleet (the type, or the group of [WithLimitKey]), with up
// to burst of them at once (at least 1): a GCRA in Redis with Redis's clock.
// A start is counted when the job's slot is taken, just before its claim,
// so a duplicate record spends one too. Default: no rate.
func WithRateLimit(perSecond float64, burst int) JobOpt {
	return jobOptFunc(func(c *jobConfig) { c.limits.rate, c.limits.burst = perSecond, burst })
}

// check refuses limits that contradict each other or make no sense.
func (c limitConfig) check() error {
	switch {
	case c.concurrency < 0 || c.keyLimit < 0:
		return fmt.Errorf("%w: a negative concurrency limit", ErrConflictingOptions)
	case c.concurrency > 0 && c.keyFn != nil:
		return fmt.Errorf("%w: WithConcurrencyLimit and WithLimitKey together (a job has one limit group)", ErrConflictingOptions)
	case c.rate < 0 || c.burst < 0:
		return fmt.Errorf("%w: a negative rate or burst", ErrConflictingOptions)
	}
	return nil
}

// limited reports whether the type has a limit group.
func (c limitConfig) limited() bool { return c.concurrency > 0 || c.keyFn != nil || c.rate > 0 }

// RetryAfterError is a handler's answer that its job, and every job of its
// limit group, must wait Delay (an upstream 429's Retry-After). It matches
// [ErrRetryAfter] and unwraps to Err.
type RetryAfterError struct {
	Delay time.Duration
	Err   error
}

// Error implements error.
func (e *RetryAfterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%s %s", ErrRetryAfter.Error(), e.Delay)
	}
	return fmt.Sprintf("%s %s: %v", ErrRetryAfter.Error(), e.Delay, e.Err)
}

// Unwrap returns the cause.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// Is reports ErrRetryAfter as matching.
func (e *RetryAfterError) Is(target error) bool { return target == ErrRetryAfter }

// RetryAfter returns err (which may be nil) wrapped so that the worker
// retries the job after d, not after its backoff, and holds every job of
// the job's limit group for d across the fleet (none of them starts before
// d has passed since the handler returned; running ones finish). A job type
// without a limit group only has its own retry delayed. The attempt counts
// against [WithMaxAttempts] like any retryable failure; on the last one the
// job fails (the group is held all the same).
func RetryAfter(d time.Duration, err error) error {
	return &RetryAfterError{Delay: max(d, 0), Err: err}
}

// limiter is the worker's side of the limits.
type limiter struct {
	on       bool   // the worker has a Redis store (set by start)
	instance string // this worker's part of the slot members
	seq      atomic.Uint64

	mu      sync.Mutex
	running map[*limit.Slot]time.Time     // slots of running jobs (renewed each round) -> when their group was last registered
	touched map[string]limit.Spec         // groups used since the last round, for the registry
	waiting map[string]map[*delivery]bool // group -> parked deliveries (true: wake when a slot frees)
	held    atomic.Int64                  // deliveries parked by a limit now
	metrics *jobtrace.Metrics             // leasehold.limit.held follows held

	pruneCursor uint64 // the registry's HSCAN page to prune next round (the renewer goroutine's alone)
}

// limitRefresh is how often a running job's group is registered again, so
// that a group whose jobs run longer than limit.PruneAge stays listed.
const limitRefresh = limit.PruneAge / 4

func (l *limiter) init() {
	l.on = true
	l.instance = fmt.Sprintf("%s.%d.%d", workerIdentity(), os.Getpid(), time.Now().UnixNano()%1e9)
	l.running = make(map[*limit.Slot]time.Time)
	l.touched = make(map[string]limit.Spec)
	l.waiting = make(map[string]map[*delivery]bool)
}

// limitGroup returns the limit group of d's job and its limits; "" when the
// job is not limited.
func (w *Worker) limitGroup(d *delivery) (string, limit.Spec) {
	reg := w.handlers[d.typ]
	if reg == nil {
		return "", limit.Spec{}
	}
	c := reg.cfg.limits
	if !c.limited() {
		n := w.cfg.typeLimits[d.typ]
		if n == 0 {
			return "", limit.Spec{}
		}
		c = limitConfig{concurrency: n} // WithTypeLimit
	}
	spec := limit.Spec{Limit: c.concurrency, Rate: c.rate, Burst: c.burst}
	if c.keyFn == nil {
		return limit.Name("type:" + d.typ), spec
	}
	g := c.keyFn(&Job{Key: d.key, Type: d.typ, Payload: d.rec.Value, Headers: userHeaders(d.rec.Headers),
		Topic: d.rec.Topic, Partition: d.rec.Partition, Offset: d.rec.Offset})
	if g == "" {
		return "", limit.Spec{}
	}
	spec.Limit = c.keyLimit
	return limit.Name("key:" + g), spec
}

package redlock

import "time"

// Opt configures a [Backend].
type Opt interface{ apply(*cfg) }

type optFunc func(*cfg)

func (f optFunc) apply(c *cfg) { f(c) }

type cfg struct {
	prefix        string
	prefixSet     bool
	driftFactor   float64
	timeoutFactor float64
	quarantine    time.Duration
	fenceRetain   time.Duration
	linger        time.Duration
	maxBatch      int
	renewConc     int
}

// WithPrefix sets the prefix of every key the backend writes on the masters
// (lock keys prefix + "lease:{name}", fence counters, the epoch key).
// Default "lh:".
func WithPrefix(p string) Opt { return optFunc(func(c *cfg) { c.prefix, c.prefixSet = p, true }) }

// WithDriftFactor sets redsync's clock drift factor: the validity of a lock
// is its TTL minus the time the quorum took minus TTL*factor (the Redlock
// algorithm's drift term). Default 0.01.
func WithDriftFactor(f float64) Opt { return optFunc(func(c *cfg) { c.driftFactor = f }) }

// WithTimeoutFactor sets how long one master may take to answer, as a
// fraction of the TTL, before the backend counts it as failed (redsync's
// timeout factor, also applied to the fence phases). Default 0.1.
func WithTimeoutFactor(f float64) Opt { return optFunc(func(c *cfg) { c.timeoutFactor = f }) }

// WithRestartQuarantine sets how long a master found without its data takes
// no locks. Redlock requires it to be at least the longest lock TTL that any
// client of these masters uses: a master that restarts empty has forgotten
// locks that may still be live on the other masters, and could otherwise
// complete a second owner's quorum. A lock's own TTL is always used when it
// is longer. Default 0, meaning each acquisition's TTL. A negative value
// turns the check off, which is safe only if every master persists every
// write before answering (appendonly yes, appendfsync always).
func WithRestartQuarantine(d time.Duration) Opt { return optFunc(func(c *cfg) { c.quarantine = d }) }

// WithFenceRetention sets how long a name's fence counter stays on the
// masters after its last use. Past it the fence carries on from the masters'
// clocks (server TIME in microseconds) alone. Default 24h.
func WithFenceRetention(d time.Duration) Opt { return optFunc(func(c *cfg) { c.fenceRetain = d }) }

// WithBatchLinger sets how long a pipeline to a master waits for one more
// script call to join it; it leaves when none joined for a linger, when it is
// full, or ten lingers after its first call. Renewing many leases thus sends
// every lease's extend to each master in one pipeline per batch.
// Default 200µs.
func WithBatchLinger(d time.Duration) Opt { return optFunc(func(c *cfg) { c.linger = d }) }

// WithMaxBatch bounds the number of script calls in one pipeline to a
// master. Default 1000.
func WithMaxBatch(n int) Opt { return optFunc(func(c *cfg) { c.maxBatch = n }) }

// WithRenewConcurrency bounds the extends (Mutex.ExtendContext calls) one
// RenewBatch runs at once; their scripts to each master share pipelines.
// Each extend costs redsync a goroutine per master, so a bound keeps a round
// over thousands of leases from flooding the scheduler. Default 64 (the
// lease Manager runs several batches at once).
func WithRenewConcurrency(n int) Opt { return optFunc(func(c *cfg) { c.renewConc = n }) }

package idempotency

import (
	"log/slog"
	"time"
)

// Opt configures a Store.
type Opt interface{ apply(*cfg) }

type optFunc func(*cfg)

func (f optFunc) apply(c *cfg) { f(c) }

// setting is an option that names the one setting it makes and its value
// (Setting), so that a program that builds this layer with options of its
// own (the leasehold Worker) can refuse two different values for one
// setting instead of letting the later silently win.
type setting struct {
	name  string
	value any
	fn    func(*cfg)
}

func (s setting) apply(c *cfg) { s.fn(c) }

// Setting names the setting the option makes and its value.
func (s setting) Setting() (name string, value any) { return s.name, s.value }

type cfg struct {
	prefix        string
	retention     time.Duration
	windows       int
	shards        int
	maxKey        int
	maxResult     int
	maxDetails    int
	hold          time.Duration
	fingerprinter Fingerprinter
	logger        *slog.Logger
	allowEviction bool
	policy        string
	detailsAtOnce bool
	history       int  // attempts kept per key (WithHistory)
	historySet    bool // WithHistory was given
}

// WithPrefix sets the prefix of every key the Store writes (not of lease keys,
// which the lease.Manager names). It must not contain '{' or '}'. Default "lh:".
func WithPrefix(p string) Opt { return setting{"prefix", p, func(c *cfg) { c.prefix = p }} }

// WithRetention sets how long a COMPLETED or FAILED record is kept after it
// was written: a duplicate arriving within the retention is replayed; after
// it, the key runs again (with a higher fence). Records are kept at least this
// long and at most Retention + Retention/windows. Changing it is safe:
// records written under an earlier retention are still found by claims, and
// replayed, until they expire under the retention they were written with
// (while both are live, a record may be kept as long as the longer one: the
// two layouts may share buckets).
// Default 24h.
func WithRetention(d time.Duration) Opt {
	return setting{"retention", d, func(c *cfg) { c.retention = d }}
}

// WithWindows sets into how many time windows the retention is cut. Records
// are grouped in buckets per window; a claim looks at windows+1 buckets, and a
// record lives at most Retention/windows longer than the retention.
// Changing it is safe, like changing the retention. Default 2.
func WithWindows(n int) Opt { return optFunc(func(c *cfg) { c.windows = n }) }

// WithShards sets the number of hash-tag shards records are spread over. Each
// (shard, window) bucket is one Redis hash. Fewer shards mean fewer, larger
// buckets: less Redis CPU a job (a claim's lookups find the bucket keys in
// the server's caches), and, on a Cluster, more keys of a batch in one slot's
// script call; but a bucket is freed in one step when it expires, which
// stalls the server unless lazyfree-lazy-expire is on (3.6 ms for 21,000
// records, 13 ms for 42,000, measured in docs/idempotency.md). A bucket
// stays in the compact listpack encoding only while it holds at most
// hash-max-listpack-entries records no longer than
// hash-max-listpack-value, which history entries exceed: without a history (WithHistory(0)) the shard
// count should be at least rate x window / hash-max-listpack-entries
// (Capacity reports it). While records written under another shard count
// live, New refuses the change with a *LayoutError (ErrLayoutChanged): a
// claim could not reach them. Default DefaultShards, or, when records of one
// other shard count live (a deployment started before the default changed),
// that count.
func WithShards(n int) Opt { return optFunc(func(c *cfg) { c.shards = n }) }

// DefaultShards is the shard count of a Store started without WithShards
// where no records of another shard count live: one shard for every four
// Cluster slots. Earlier builds of this package defaulted to 65536 (four
// shards a slot); New keeps that count where their records live.
const DefaultShards = 4096

// DefaultMaxKeyLen is the default bound of an idempotency key's length, in
// bytes ([WithMaxKeyLen]). The worker's bound, leasehold.MaxKeyLen, is this
// constant, so that the store takes every key the worker takes.
const DefaultMaxKeyLen = 512

// WithMaxKeyLen bounds the length of an idempotency key in bytes. Default
// [DefaultMaxKeyLen] (512).
func WithMaxKeyLen(n int) Opt { return optFunc(func(c *cfg) { c.maxKey = n }) }

// WithMaxResult bounds a result (or terminal error text) in bytes; a larger
// result is refused with a *TooLargeError, never truncated. Default 64 KiB.
func WithMaxResult(n int) Opt { return optFunc(func(c *cfg) { c.maxResult = n }) }

// WithDetailsAtOnce makes every SaveDetails write at once, one fenced
// script call each, so that details are stored when it returns. Default:
// an attempt's first details are written at once and later ones coalesced
// (the latest wins) and written with the lease renewals, in batches.
func WithDetailsAtOnce() Opt { return optFunc(func(c *cfg) { c.detailsAtOnce = true }) }

// WithHistory keeps the last n attempts of each key in its history (see
// [Store.History]), as long as its record; n <= 0 keeps none. Default 16
// (DefaultHistory).
func WithHistory(n int) Opt {
	return optFunc(func(c *cfg) { c.history, c.historySet = max(n, 0), true })
}

// WithMaxDetails bounds heartbeat details in bytes. Default 64 KiB.
func WithMaxDetails(n int) Opt { return optFunc(func(c *cfg) { c.maxDetails = n }) }

// WithKeepHold sets how long Fail with the Keep policy holds a key before the
// next claim may run it. Default: the key's lease TTL (its Request.TTL, or
// the lease Manager's TTL).
func WithKeepHold(d time.Duration) Opt { return optFunc(func(c *cfg) { c.hold = d }) }

// WithFingerprinter sets how Store.Fingerprint computes payload fingerprints.
// Default PayloadFingerprint (a hash of the whole payload); see also
// FieldsFingerprint and FuncFingerprint.
func WithFingerprinter(f Fingerprinter) Opt { return optFunc(func(c *cfg) { c.fingerprinter = f }) }

// WithLogger sets the logger. Default: a logger that discards everything.
func WithLogger(l *slog.Logger) Opt { return optFunc(func(c *cfg) { c.logger = l }) }

// WithAllowEviction accepts a maxmemory-policy that evicts keys (allkeys-*,
// volatile-*): New then logs a warning instead of refusing. Evicted leases let
// a second owner run a held job; evicted records let a duplicate run again.
// Default: refused.
func WithAllowEviction() Opt { return optFunc(func(c *cfg) { c.allowEviction = true }) }

// WithMaxmemoryPolicy states the server's maxmemory-policy instead of reading
// it with CONFIG GET, for managed servers where CONFIG is disabled or renamed.
// The stated policy is checked like a read one. Default: read from the server
// (New fails with ErrPolicyUnknown when it cannot be read).
func WithMaxmemoryPolicy(policy string) Opt { return optFunc(func(c *cfg) { c.policy = policy }) }

package idempotency

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/lease"
)

// Store keeps idempotency records in Redis and hands out their leases through
// a lease.Manager. It is safe for concurrent use.
type Store struct {
	c       redis.UniversalClient
	m       *lease.Manager
	cfg     cfg
	log     *slog.Logger
	window  time.Duration // retention / windows
	inline  int           // largest record value kept inside a bucket (hash-max-listpack-value)
	entries int           // hash-max-listpack-entries, for Capacity
	policy  string        // the maxmemory-policy New found or was told
	ttl     time.Duration // lease TTL
	clockMu sync.Mutex
	local   time.Time // local time (monotonic) of the last TIME call
	remote  time.Time // Redis time at local
	scripts []*redis.Script
	names   atomic.Pointer[windowNames] // bucketKey's cache

	layoutMu  sync.Mutex   // held while the other layouts are read (layout.go)
	layoutAt  time.Time    // local time the layouts were last read; zero: never
	announced time.Time    // local time the Store's layout was last announced; zero: never
	layouts   []liveLayout // the other layouts whose records may still live

	detailsMu sync.Mutex        // guards pending
	pending   map[*Claim][]byte // coalesced heartbeat details, written by the renewer's rounds (details.go)
	flushMu   sync.Mutex        // held while pending details are written

	// inScript: the finishing scripts delete the lease key and the Store
	// then forgets the Lease (leasing.EndsInScript); otherwise it
	// releases the Lease after the script.
	inScript bool

	// leasePrefix, when not "", is what a claim's lease key starts with
	// (leasing.TaggedKeyPrefix): the claim builds the key itself, this
	// and its name, in the one string of its keys (setClaimKeys). "": it
	// asks the Manager.
	leasePrefix string
}

// New returns a Store over client and m. m must be a started Manager built
// with lease.NewManager on the same Redis (one node, or the same Cluster):
// the claim script creates leases in m's key layout, and the Manager renews
// them. ctx bounds the checks New makes: that Redis answers, that its
// maxmemory-policy does not evict keys (see WithAllowEviction and
// WithMaxmemoryPolicy), that it takes GETDEL (Redis 6.2; the completion
// reads its lease with it), the listpack limits that decide how records are
// laid out, the server clock, and loading the scripts.
func New(ctx context.Context, client redis.UniversalClient, m *lease.Manager, opts ...Opt) (*Store, error) {
	c := cfg{}
	for _, o := range opts {
		o.apply(&c)
	}
	c.prefix = cmp.Or(c.prefix, "lh:")
	c.retention = cmp.Or(c.retention, 24*time.Hour)
	c.windows = cmp.Or(c.windows, 2)
	shardsSet := c.shards != 0
	c.shards = cmp.Or(c.shards, DefaultShards)
	c.maxKey = cmp.Or(c.maxKey, DefaultMaxKeyLen)
	c.maxResult = cmp.Or(c.maxResult, 64<<10)
	c.maxDetails = cmp.Or(c.maxDetails, 64<<10)
	if !c.historySet {
		c.history = DefaultHistory
	}
	if c.fingerprinter == nil {
		c.fingerprinter = PayloadFingerprint
	}
	if c.logger == nil {
		c.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case client == nil || m == nil:
		return nil, errors.New("idempotency: New needs a Redis client and a lease.Manager")
	case strings.ContainsAny(c.prefix, "{}"):
		return nil, fmt.Errorf("idempotency: prefix %q must not contain '{' or '}' (hash tags are the Store's)", c.prefix)
	case c.windows < 1 || c.windows > 16:
		return nil, fmt.Errorf("idempotency: windows must be 1 to 16, got %d", c.windows)
	case c.shards < 1 || c.shards > 1<<24:
		return nil, fmt.Errorf("idempotency: shards must be 1 to 2^24, got %d", c.shards)
	case c.retention < time.Duration(c.windows)*time.Millisecond*10:
		return nil, fmt.Errorf("idempotency: retention %s too short for %d windows", c.retention, c.windows)
	case c.maxKey < 1 || c.maxResult < 0 || c.maxDetails < 0:
		return nil, errors.New("idempotency: size limits must be positive")
	}
	s := &Store{
		c:       client,
		m:       m,
		cfg:     c,
		log:     c.logger,
		window:  (c.retention / time.Duration(c.windows)).Truncate(time.Millisecond),
		ttl:     m.TTL(),
		scripts: []*redis.Script{scripts.IdemClaim, scripts.IdemComplete, scripts.IdemCompleteBatch, scripts.IdemRelease, scripts.IdemDetails, scripts.IdemDetailsBatch},
	}
	s.inScript = leasing.EndsInScript(m)
	s.leasePrefix = leasing.TaggedKeyPrefix(m)
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if err := s.startLayouts(ctx, !shardsSet); err != nil {
		return nil, err
	}
	leasing.OnRenewRound(m, s.flushDetails)
	return s, nil
}

// Fingerprint computes the fingerprint of payload with the Store's
// Fingerprinter (see WithFingerprinter).
func (s *Store) Fingerprint(payload []byte) (Fingerprint, error) { return s.cfg.fingerprinter(payload) }

// Retention returns the configured retention.
func (s *Store) Retention() time.Duration { return s.cfg.retention }

// check runs New's start-up checks.
func (s *Store) check(ctx context.Context) error {
	if err := s.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("idempotency: ping: %w", classify(err))
	}
	if err := s.checkPolicy(ctx); err != nil {
		return err
	}
	// The completion reads its lease with GETDEL (Redis 6.2): a server
	// without it, or an ACL user denied it, is refused here rather than at
	// every completion. GETDEL of a key no one writes changes nothing.
	if err := s.c.Do(ctx, "getdel", s.cfg.prefix+"probe:getdel").Err(); err != nil && !errors.Is(err, redis.Nil) {
		if cerr := classify(err); errors.Is(cerr, ErrUnavailable) {
			return fmt.Errorf("idempotency: GETDEL probe: %w", cerr)
		}
		return fmt.Errorf("idempotency: the server must take GETDEL (Redis 6.2 or later; an ACL user needs it "+
			"with +@write): %w", err)
	}
	s.inline, s.entries = 64, 128
	if v, err := s.configInt(ctx, "hash-max-listpack-value"); err == nil {
		s.inline = v
	}
	if v, err := s.configInt(ctx, "hash-max-listpack-entries"); err == nil {
		s.entries = v
	}
	if err := s.calibrate(ctx); err != nil {
		return err
	}
	return s.loadScripts(ctx)
}

// evicts reports whether a maxmemory-policy may evict keys.
func evicts(policy string) bool {
	return strings.HasPrefix(policy, "allkeys-") || strings.HasPrefix(policy, "volatile-")
}

func (s *Store) checkPolicy(ctx context.Context) error {
	type finding struct{ node, policy string }
	var found []finding
	if s.cfg.policy != "" {
		found = append(found, finding{"", s.cfg.policy})
	} else {
		var mu sync.Mutex
		read := func(ctx context.Context, c *redis.Client) error {
			p, err := readPolicy(ctx, c) // policy.go: CONFIG GET, else INFO memory
			if err != nil {
				return err
			}
			mu.Lock()
			found = append(found, finding{c.Options().Addr, p})
			mu.Unlock()
			return nil
		}
		var err error
		switch c := s.c.(type) {
		case *redis.ClusterClient:
			err = c.ForEachMaster(ctx, read)
		case *redis.Client:
			err = read(ctx, c)
		default:
			var res map[string]string
			if res, err = s.c.ConfigGet(ctx, "maxmemory-policy").Result(); err == nil {
				found = append(found, finding{"", res["maxmemory-policy"]})
			} else {
				err = fmt.Errorf("%w (%w): state the policy with WithMaxmemoryPolicy", ErrPolicyUnknown, classify(err))
			}
		}
		if err != nil {
			return err
		}
	}
	for _, f := range found {
		s.policy = f.policy
		if !evicts(f.policy) {
			continue
		}
		perr := &PolicyError{Policy: f.policy, Node: f.node}
		if !s.cfg.allowEviction {
			return perr
		}
		s.log.Warn("idempotency: accepting an evicting maxmemory-policy", slog.String("policy", f.policy),
			slog.String("node", f.node), slog.String("risk", perr.Error()))
	}
	return nil
}

// configInt reads an integer server setting (the first node's, on a Cluster).
func (s *Store) configInt(ctx context.Context, name string) (int, error) {
	res, err := s.c.ConfigGet(ctx, name).Result()
	if err != nil {
		return 0, err
	}
	v, ok := res[name]
	if !ok {
		return 0, fmt.Errorf("idempotency: no %s", name)
	}
	return strconv.Atoi(v)
}

func (s *Store) loadScripts(ctx context.Context) error {
	for _, sc := range s.scripts {
		if err := sc.Load(ctx, s.c).Err(); err != nil {
			return fmt.Errorf("idempotency: load scripts: %w", classify(err))
		}
	}
	return nil
}

// recalibrate reads the Redis clock again after the try-th pass (from 0) of
// what (claim, complete, release) whose scripts answered that the windows
// sent do not cover Redis time; after the third it gives up instead.
func (s *Store) recalibrate(ctx context.Context, try int, what string) error {
	if try >= 2 {
		return fmt.Errorf("idempotency: %s: the Redis clock keeps moving away from the windows computed for it", what)
	}
	return s.calibrate(ctx)
}

// calibrate reads the Redis clock. Windows are picked from it (the scripts
// check them against TIME and answer a skew status when they are off).
func (s *Store) calibrate(ctx context.Context) error {
	t0 := time.Now()
	rt, err := s.c.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("idempotency: TIME: %w", classify(err))
	}
	t1 := time.Now()
	s.clockMu.Lock()
	s.local, s.remote = t0.Add(t1.Sub(t0)/2), rt
	s.clockMu.Unlock()
	return nil
}

// redisNow estimates the Redis clock from the last calibration.
func (s *Store) redisNow() time.Time {
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	return s.remote.Add(time.Since(s.local))
}

// windowRange returns the first window index and the number of windows to
// pass to a script that needs the current window and the back earlier ones.
// Near a window edge (or when wide is set after a skew answer), one more
// window is passed on each side, so that a small difference between the
// estimate and Redis's TIME still falls inside the range.
func (s *Store) windowRange(back int, wide bool) (int64, int) {
	w := s.window.Milliseconds()
	now := s.redisNow().UnixMilli()
	cur := now / w
	margin := min(int64(time.Second/time.Millisecond), w/4)
	if off := now % w; wide || off < margin || w-off < margin {
		return cur - int64(back) - 1, back + 3
	}
	return cur - int64(back), back + 1
}

// classify maps errors from Redis: failures to reach it or to write to it
// wrap ErrUnavailable (leasing.Classify); the caller's own context errors
// are returned as they are.
func classify(err error) error {
	own := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	if own && !errors.Is(err, ErrUnavailable) {
		return err
	}
	return leasing.Classify(err)
}

func isNoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

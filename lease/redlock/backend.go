package redlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/lease"
)

// Backend is a [lease.Backend] over N independent Redis masters (N odd,
// quorum N/2+1), built on go-redsync/redsync. Plug it into a lease Manager
// with [lease.NewManagerWithBackend]; callers of the Manager do not change.
//
//   - Acquire: redsync's TryLockContext, fail-fast (SET NX on every master, in parallel,
//     with the token as the value through redsync.WithGenValueFunc), then the
//     fence (two phases over a quorum, see the package doc), then
//     ExtendContext to prove the quorum still holds the lock after the fence
//     was written back. The Grant's validity comes from Mutex.Until.
//   - RenewBatch: Mutex.ExtendContext (fail-fast) for every lease, up to
//     [WithRenewConcurrency] at once; the scripts running together reach each
//     master in one pipeline. Each result's validity comes from Mutex.Until.
//   - Release: Mutex.UnlockContext.
//
// A Backend is safe for concurrent use. Close it after the Manager's Shutdown.
type Backend struct {
	cfg     cfg
	masters []*master
	rs      *redsync.Redsync
	quorum  int
	owned   []redis.UniversalClient // clients made by NewFromAddrs
	closeMu sync.Once
}

var (
	_ lease.Backend = (*Backend)(nil)
	_ lease.Checker = (*Backend)(nil)
)

// New returns a Backend over masters, which must be independent Redis
// servers (not replicas of each other, not one Cluster), an odd number of
// them. The caller keeps ownership of the clients.
func New(masters []redis.UniversalClient, opts ...Opt) (*Backend, error) {
	var c cfg
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if !c.prefixSet {
		c.prefix = "lh:"
	}
	c.driftFactor = cmp.Or(c.driftFactor, 0.01)
	c.timeoutFactor = cmp.Or(c.timeoutFactor, 0.1)
	c.fenceRetain = cmp.Or(c.fenceRetain, 24*time.Hour)
	c.linger = cmp.Or(c.linger, 200*time.Microsecond)
	c.maxBatch = cmp.Or(c.maxBatch, 1000)
	c.renewConc = cmp.Or(c.renewConc, 64)
	switch {
	case len(masters) == 0 || len(masters)%2 == 0:
		return nil, fmt.Errorf("%w: need an odd number of masters, got %d", ErrInvalid, len(masters))
	case c.driftFactor < 0 || c.driftFactor >= 0.5 || c.timeoutFactor <= 0 || c.timeoutFactor >= 1:
		return nil, fmt.Errorf("%w: drift factor %v, timeout factor %v", ErrInvalid, c.driftFactor, c.timeoutFactor)
	case c.fenceRetain < 0 || c.linger < 0 || c.maxBatch < 1 || c.renewConc < 1:
		return nil, fmt.Errorf("%w: fence retention %s, linger %s, max batch %d", ErrInvalid, c.fenceRetain, c.linger, c.maxBatch)
	}
	b := &Backend{cfg: c, quorum: len(masters)/2 + 1}
	pools := make([]rsredis.Pool, len(masters))
	for i, cl := range masters {
		if cl == nil {
			return nil, fmt.Errorf("%w: master %d is nil", ErrInvalid, i)
		}
		b.masters = append(b.masters, newMaster(i, cl, &b.cfg))
		pools[i] = b.masters[i]
	}
	b.rs = redsync.New(pools...)
	return b, nil
}

// NewFromAddrs dials one client per address (host:port, no auth) and returns
// a Backend that closes them on [Backend.Close]. It is the configuration
// entry point: a comma-separated list of masters is all it needs.
func NewFromAddrs(addrs []string, opts ...Opt) (*Backend, error) {
	var clients []redis.UniversalClient
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		clients = append(clients, redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1}))
	}
	b, err := New(clients, opts...)
	if err != nil {
		for _, c := range clients {
			_ = c.Close()
		}
		return nil, err
	}
	b.owned = clients
	return b, nil
}

// Close closes the clients that [NewFromAddrs] made. It does not release
// leases: shut the Manager down first.
func (b *Backend) Close() error {
	var errs []error
	b.closeMu.Do(func() {
		for _, c := range b.owned {
			errs = append(errs, c.Close())
		}
	})
	return errors.Join(errs...)
}

// Quorum returns the number of masters that must agree: N/2+1.
func (b *Backend) Quorum() int { return b.quorum }

// Key returns the lock key of lease name on every master: prefix +
// "lease:{name}", or prefix + "lease:" + name when name holds a hash tag (the
// same layout as the Redis backend's, see [lease.KeyFor]).
func (b *Backend) Key(name string) string { return lease.KeyFor(b.cfg.prefix, name) }

// fenceKey is name's fence counter on every master.
func (b *Backend) fenceKey(name string) string { return b.Key(name) + ":fence" }

func (b *Backend) mutex(name string, ttl time.Duration, o ...redsync.Option) *redsync.Mutex {
	return b.rs.NewMutex(b.Key(name), append([]redsync.Option{
		redsync.WithExpiry(ttl),
		redsync.WithTries(1),
		redsync.WithDriftFactor(b.cfg.driftFactor),
		redsync.WithTimeoutFactor(b.cfg.timeoutFactor),
	}, o...)...)
}

// masterTimeout bounds one master's answer in the fence phases and in the
// extend that confirms an acquisition (redsync bounds its lock step itself).
func (b *Backend) masterTimeout(ttl time.Duration) time.Duration {
	return max(time.Duration(float64(ttl)*b.cfg.timeoutFactor), 10*time.Millisecond)
}

// Acquire locks name on a quorum of masters with token as the value, gives it
// a fence, and confirms the lock with an extend. The Grant's SentAt and TTL
// are set so that SentAt+TTL is redsync's Mutex.Until: the local deadline
// counts from the validity redsync computed, drift included.
func (b *Backend) Acquire(ctx context.Context, name, token string, ttl time.Duration) (lease.Grant, error) {
	if ttl <= 0 {
		return lease.Grant{}, fmt.Errorf("%w: ttl %s", lease.ErrInvalid, ttl)
	}
	// Fail-fast: done as soon as a quorum locked (or refused); a hung master
	// does not hold the acquisition up.
	mu := b.mutex(name, ttl, redsync.WithGenValueFunc(func() (string, error) { return token, nil }), redsync.WithFailFast(true))
	if err := mu.TryLockContext(ctx); err != nil {
		return lease.Grant{}, b.acquireErr(ctx, name, ttl, err)
	}
	fence, err := b.nextFence(ctx, name, ttl)
	if err == nil {
		// The fence was written back to a quorum before this extend reached
		// a quorum still holding the token, so the next owner's quorum (which
		// can only lock after these keys expire) will propose a greater fence.
		var ok bool
		ectx, cancel := context.WithTimeout(ctx, b.masterTimeout(ttl))
		ok, err = mu.ExtendContext(ectx)
		cancel()
		if !ok && err == nil {
			err = redsync.ErrExtendFailed
		}
		if err != nil {
			err = b.quorumErr("acquire", err)
		}
	}
	if err != nil {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.masterTimeout(ttl))
		defer cancel()
		_, _ = mu.UnlockContext(uctx)
		return lease.Grant{}, err
	}
	return lease.Grant{Name: name, Token: token, Fence: fence, TTL: ttl, SentAt: mu.Until().Add(-ttl)}, nil
}

// acquireErr maps a failed TryLockContext: a quorum holding another token is
// a [*lease.HeldError]; anything else is a [*QuorumError].
func (b *Backend) acquireErr(ctx context.Context, name string, ttl time.Duration, err error) error {
	var taken *redsync.ErrTaken
	if errors.As(err, &taken) && len(taken.Nodes) >= b.quorum {
		he := &lease.HeldError{Name: name}
		// Best effort: name the holder and its time left from one master.
		qctx, cancel := context.WithTimeout(ctx, b.masterTimeout(ttl))
		defer cancel()
		m := b.masters[taken.Nodes[0]]
		pipe := m.c.Pipeline()
		get := pipe.Get(qctx, b.Key(name))
		pttl := pipe.PTTL(qctx, b.Key(name))
		if _, perr := pipe.Exec(qctx); perr == nil {
			he.Token = get.Val()
			he.Remaining = max(pttl.Val(), 0)
		}
		return he
	}
	return b.quorumErr("acquire", err)
}

// quorumErr wraps a failure to reach a quorum, with each master's cause.
func (b *Backend) quorumErr(op string, err error) error {
	var qe *QuorumError
	if errors.As(err, &qe) {
		return err
	}
	return &QuorumError{Op: op, OK: b.countOK(err), Need: b.quorum, Of: len(b.masters), Err: b.nameMasters(err)}
}

// countOK counts the masters that succeeded from redsync's joined error:
// those not named in it as failed, taken or expired.
func (b *Backend) countOK(err error) int {
	failed := map[int]bool{}
	expired := 0
	walk(err, func(e error) {
		var re *redsync.RedisError
		var nt *redsync.ErrNodeTaken
		var all *redsync.ErrTaken
		switch {
		case errors.As(e, &re):
			failed[re.Node] = true
		case errors.As(e, &nt):
			failed[nt.Node] = true
		case errors.As(e, &all):
			for _, n := range all.Nodes {
				failed[n] = true
			}
		case errors.Is(e, redsync.ErrLockAlreadyExpired):
			expired++
		}
	})
	return max(0, len(b.masters)-len(failed)-expired)
}

// nameMasters rewrites redsync's "node #i" errors as MasterErrors with the
// master's address.
func (b *Backend) nameMasters(err error) error {
	var out []error
	walk(err, func(e error) {
		var re *redsync.RedisError
		var nt *redsync.ErrNodeTaken
		switch {
		case errors.As(e, &re) && re.Node < len(b.masters):
			out = append(out, b.masters[re.Node].wrap(re.Err))
		case errors.As(e, &nt) && nt.Node < len(b.masters):
			out = append(out, b.masters[nt.Node].wrap(errors.New("held by another token")))
		default:
			out = append(out, e)
		}
	})
	return errors.Join(out...)
}

// walk calls f on each leaf of a tree of errors.Join results.
func walk(err error, f func(error)) {
	if err == nil {
		return
	}
	// The tree is walked by hand, so direct assertions are what is meant.
	if j, ok := err.(interface{ Unwrap() []error }); ok { //nolint:errorlint // see above
		if _, isQ := err.(*QuorumError); !isQ { //nolint:errorlint // see above
			for _, e := range j.Unwrap() {
				walk(e, f)
			}
			return
		}
	}
	f(err)
}

// RenewBatch extends every lease in rs with Mutex.ExtendContext, up to
// [WithRenewConcurrency] at once; the batcher turns their concurrent
// per-master scripts into pipelines. A quorum of masters no longer holding the token loses the lease
// ([lease.ErrExpired]); anything short of a quorum either way is transient.
func (b *Backend) RenewBatch(ctx context.Context, rs []lease.Renewal) []lease.RenewResult {
	start := time.Now()
	out := make([]lease.RenewResult, len(rs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, b.cfg.renewConc)
	for i, r := range rs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// ctx (the Manager bounds each batch by its renew interval) is the
			// only bound: a round slowed by a hung master still renews on the
			// quorum, and fail-fast returns as soon as a quorum answered.
			mu := b.mutex(r.Name, r.TTL, redsync.WithValue(r.Token), redsync.WithFailFast(true))
			ok, err := mu.ExtendContext(ctx)
			switch {
			case ok:
				out[i].Valid = mu.Until().Sub(start)
				if out[i].Valid <= 0 {
					out[i].Err = b.quorumErr("renew", redsync.ErrExtendFailed)
				}
			default:
				out[i].Err = b.renewErr(err)
			}
		})
	}
	wg.Wait()
	return out
}

func (b *Backend) renewErr(err error) error {
	var taken *redsync.ErrTaken
	if errors.As(err, &taken) && len(taken.Nodes) >= b.quorum {
		return fmt.Errorf("%w: redlock: %d of %d masters no longer hold the token", lease.ErrExpired, len(taken.Nodes), len(b.masters))
	}
	if err == nil {
		err = redsync.ErrExtendFailed
	}
	return b.quorumErr("renew", err)
}

// Release unlocks name on every master where token holds it
// (Mutex.UnlockContext). It returns nil when a quorum released it;
// [lease.ErrStolen] or [lease.ErrExpired] when a quorum no longer held it
// (some with another token, or none at all), changing nothing there; and a
// [*QuorumError] otherwise.
func (b *Backend) Release(ctx context.Context, name, token string, fence uint64) error {
	mu := b.mutex(name, time.Second, redsync.WithValue(token))
	ok, err := mu.UnlockContext(ctx)
	if ok {
		return nil
	}
	expired, taken := 0, 0
	walk(err, func(e error) {
		var nt *redsync.ErrNodeTaken
		var all *redsync.ErrTaken
		switch {
		case errors.Is(e, redsync.ErrLockAlreadyExpired):
			expired++
		case errors.As(e, &all):
			taken += len(all.Nodes)
		case errors.As(e, &nt):
			taken++
		}
	})
	switch {
	case taken > 0 && expired+taken >= b.quorum:
		return fmt.Errorf("%w: redlock: %d of %d masters hold another token", lease.ErrStolen, taken, len(b.masters))
	case expired >= b.quorum:
		return fmt.Errorf("%w: redlock: %d of %d masters no longer hold the lock", lease.ErrExpired, expired, len(b.masters))
	}
	if err == nil {
		err = errors.New("unlock failed")
	}
	return b.quorumErr("release", err)
}

// Fenced returns [ErrFencedUnsupported]: see its doc.
func (b *Backend) Fenced(context.Context, string, string, uint64, *redis.Script, []string, []any) (any, error) {
	return nil, ErrFencedUnsupported
}

// Check verifies that a quorum of masters answers, that no answering master
// evicts keys (maxmemory-policy allkeys-* or volatile-*: an evicted lock lets
// a second owner in), loads the scripts, and starts the epoch of any master
// that has none, so that its restart quarantine counts from now. The Manager
// calls it from Start.
func (b *Backend) Check(ctx context.Context) error {
	_, err := b.eachMaster(ctx, "check", 0, true, func(ctx context.Context, m *master) (int64, error) {
		pol, err := m.c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err == nil {
			if p := pol["maxmemory-policy"]; strings.HasPrefix(p, "allkeys-") || strings.HasPrefix(p, "volatile-") {
				return 0, fmt.Errorf("%w: %s", lease.ErrEvictionPolicy, p)
			}
		}
		for _, s := range []*redis.Script{scripts.RedlockAcquire, scripts.RedlockEpoch, scripts.RedlockFenceNext, scripts.RedlockFenceRaise} {
			if err := s.Load(ctx, m.c).Err(); err != nil {
				return 0, err
			}
		}
		return scripts.RedlockEpoch.Run(ctx, m.c, []string{m.epoch}).Int64()
	})
	if err != nil && errors.Is(err, lease.ErrEvictionPolicy) {
		return fmt.Errorf("%w (%w)", lease.ErrEvictionPolicy, err)
	}
	return err
}

// Ready reports how many masters take locks now (answering and out of
// quarantine) and, if fewer than a quorum, the longest quarantine left among
// the others. It starts the epoch of masters that have none.
func (b *Backend) Ready(ctx context.Context, ttl time.Duration) (ready int, wait time.Duration, err error) {
	ages, err := b.eachMaster(ctx, "ready", 0, true, func(ctx context.Context, m *master) (int64, error) {
		return scripts.RedlockEpoch.Run(ctx, m.c, []string{m.epoch}).Int64()
	})
	for i, age := range ages {
		if age < 0 {
			continue
		}
		q := b.masters[i].quar(ttl)
		if left := q - time.Duration(age)*time.Millisecond; left > 0 {
			wait = max(wait, left)
			continue
		}
		ready++
	}
	if ready >= b.quorum {
		wait = 0
	}
	return ready, wait, err
}

// WaitReady blocks until a quorum of masters takes locks of the given TTL
// (answering and out of their restart quarantine), or ctx ends. New masters
// and masters that lost their data start quarantined for the TTL, so a fresh
// deployment waits about one TTL before its first lock.
func (b *Backend) WaitReady(ctx context.Context, ttl time.Duration) error {
	for {
		ready, wait, err := b.Ready(ctx, ttl)
		if ready >= b.quorum {
			return nil
		}
		wait = min(max(wait, 20*time.Millisecond), time.Second)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if err != nil {
				return fmt.Errorf("redlock: %d of %d masters ready, need %d: %w (last error: %w)", ready, len(b.masters), b.quorum, ctx.Err(), err)
			}
			return fmt.Errorf("redlock: %d of %d masters ready, need %d: %w", ready, len(b.masters), b.quorum, ctx.Err())
		case <-t.C:
		}
	}
}

// eachMaster runs f on every master in parallel, each bounded by timeout (0:
// ctx only), and returns the results (-1 for masters that failed or had not
// answered) and a *QuorumError when fewer than a quorum succeeded. Unless all
// is set it returns as soon as a quorum has succeeded, so that one hung
// master does not slow every call down; the calls still running end at their
// timeout.
func (b *Backend) eachMaster(ctx context.Context, op string, timeout time.Duration, all bool, f func(context.Context, *master) (int64, error)) ([]int64, error) {
	type answer struct {
		i   int
		v   int64
		err error
	}
	ch := make(chan answer, len(b.masters))
	for i, m := range b.masters {
		go func() {
			mctx, cancel := ctx, context.CancelFunc(func() {})
			if timeout > 0 {
				mctx, cancel = context.WithTimeout(ctx, timeout)
			}
			defer cancel()
			v, err := f(mctx, m)
			ch <- answer{i, v, m.wrap(err)}
		}()
	}
	res := make([]int64, len(b.masters))
	for i := range res {
		res[i] = -1
	}
	var errs []error
	ok := 0
	for range b.masters {
		a := <-ch
		if a.err != nil {
			errs = append(errs, a.err)
			continue
		}
		res[a.i] = a.v
		if ok++; ok >= b.quorum && !all {
			break
		}
	}
	if ok < b.quorum {
		return res, &QuorumError{Op: op, OK: ok, Need: b.quorum, Of: len(b.masters), Err: errors.Join(errs...)}
	}
	return res, nil
}

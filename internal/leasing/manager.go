package leasing

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/scripts"
)

// MaxNameLen bounds lease names (bytes).
const MaxNameLen = 1024

// errFencedLost is the cause of a lease found lost by a fenced write.
var errFencedLost error = &lostError{"lease: fenced write refused"}

// Manager hands out leases and keeps them alive: one renewer goroutine renews
// every held lease each renew interval in batches, and each lease carries a
// local deadline that ends it when renewals keep failing, whether or not the
// backend ever answers.
//
// Lifecycle: [NewManager], [Manager.Start], then Acquire/Adopt/Fenced from any
// goroutine, then [Manager.Shutdown].
type Manager struct {
	cfg    cfg
	b      Backend
	clock  Clock
	log    *slog.Logger
	tracer trace.Tracer
	met    *metrics

	renewFailing bool // the last renew round failed; used by the renewer goroutine only

	dlTimer Timer     // the deadline watcher's timer (guarded by mu)
	dlAt    time.Time // when dlTimer fires; zero when not armed (guarded by mu)

	mu        sync.Mutex
	held      map[*Lease]struct{}
	seq       uint64                  // last Lease.seq handed out
	abandoned []abandonedLease        // leases given up locally, to release when the backend answers
	rounds    []func(context.Context) // run by the renewer after each round (OnRenewRound)
	started   bool
	closed    bool
	cbClosed  bool
	stop      context.CancelFunc
	loopDone  chan struct{}
	shutDone  chan struct{}
	shutErr   error
	cbWG      sync.WaitGroup
}

// NewManager returns a Manager whose leases live in Redis through client (a
// single node, a Sentinel failover client or a Cluster client).
func NewManager(client redis.UniversalClient, opts ...Opt) (*Manager, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalid)
	}
	c := buildCfg(opts)
	return newManager(NewRedisBackend(client, c.prefix), c)
}

// NewManagerWithBackend returns a Manager over another [Backend], such as the
// Redlock backend of package lease/redlock. [WithPrefix] does not apply: the
// backend names its keys.
func NewManagerWithBackend(b Backend, opts ...Opt) (*Manager, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil backend", ErrInvalid)
	}
	return newManager(b, buildCfg(opts))
}

func buildCfg(opts []Opt) cfg {
	var c cfg
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	c.ttl = cmp.Or(c.ttl, 15*time.Second)
	c.interval = cmp.Or(c.interval, c.ttl/3)
	if !c.prefixSet {
		c.prefix = "lh:"
	}
	c.logger = cmp.Or(c.logger, slog.Default())
	if c.clock == nil {
		c.clock = SystemClock{}
	}
	if c.tracerProv == nil {
		c.tracerProv = otel.GetTracerProvider()
	}
	if c.meterProv == nil {
		c.meterProv = otel.GetMeterProvider()
	}
	c.batch = cmp.Or(c.batch, 1000)
	c.parallel = cmp.Or(c.parallel, 4)
	return c
}

func newManager(b Backend, c cfg) (*Manager, error) {
	if c.ttl <= 0 || c.interval <= 0 || c.drift < 0 || c.batch < 0 || c.parallel < 0 {
		return nil, fmt.Errorf("%w: ttl %s, renew interval %s, drift %s must be positive", ErrInvalid, c.ttl, c.interval, c.drift)
	}
	if err := checkTTL(c, c.ttl); err != nil {
		return nil, err
	}
	met, err := newMetrics(c.meterProv)
	if err != nil {
		return nil, fmt.Errorf("lease: metrics: %w", err)
	}
	return &Manager{
		cfg:      c,
		b:        b,
		clock:    c.clock,
		log:      c.logger,
		tracer:   c.tracerProv.Tracer(instrumentation),
		met:      met,
		held:     make(map[*Lease]struct{}),
		shutDone: make(chan struct{}),
	}, nil
}

// checkTTL reports whether a Manager with configuration c can keep a lease
// with TTL ttl: the renew interval must be shorter than ttl minus the drift
// margin, or the lease's local deadline would pass between two renewals.
func checkTTL(c cfg, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: ttl %s must be positive", ErrInvalid, ttl)
	}
	if c.interval >= ttl-driftFor(c, ttl) {
		return fmt.Errorf("%w: renew interval %s must be shorter than ttl %s minus drift %s",
			ErrInvalid, c.interval, ttl, driftFor(c, ttl))
	}
	return nil
}

// CheckTTL reports whether a Manager built with opts could keep a lease with
// TTL ttl alive (see [Manager.CheckTTL]), before the Manager is built. The
// error wraps [ErrInvalid].
func CheckTTL(ttl time.Duration, opts ...Opt) error { return checkTTL(buildCfg(opts), ttl) }

// driftFor returns the drift margin of a lease with the given TTL.
func driftFor(c cfg, ttl time.Duration) time.Duration {
	if c.driftSet {
		return c.drift
	}
	return ttl/100 + 2*time.Millisecond
}

// Key returns the backend key of lease name. For the Redis backend it is
// prefix + "lease:{" + name + "}", or prefix + "lease:" + name when name
// already holds a {hash tag}: scripts that pass their own keys next to the
// lease key put them in the same tag.
func (m *Manager) Key(name string) string { return m.b.Key(name) }

// TTL returns the lease TTL.
func (m *Manager) TTL() time.Duration { return m.cfg.ttl }

// RenewInterval returns the renew interval.
func (m *Manager) RenewInterval() time.Duration { return m.cfg.interval }

// CheckTTL reports whether m can keep a lease with TTL ttl alive, for a
// [Grant.TTL] other than the Manager's own: the renew interval must be
// shorter than ttl minus the drift margin ([WithDrift]), or the lease would
// run out between two renewals. The error wraps [ErrInvalid]. Adopt does not
// check it: a caller that takes TTLs from its users checks them first.
func (m *Manager) CheckTTL(ttl time.Duration) error { return checkTTL(m.cfg, ttl) }

// NewToken returns a fresh owner token (128 random bits), for a Grant made by
// another package's script and then given to [Adopt].
func NewToken() string { return rand.Text() }

// OwnerDigest returns the digest of an owner token that operators see (the
// Inspector, a key's history): the first 8 hex digits of its SHA-256, or
// "-" for none. Unlike the token, it grants nothing.
func OwnerDigest(token string) string {
	if token == "" {
		return "-"
	}
	var b [8]byte
	PutOwnerDigest(b[:], token)
	return string(b[:])
}

// PutOwnerDigest writes the OwnerDigest of a non-empty token into b, which
// must hold 8 bytes, without allocating.
func PutOwnerDigest(b []byte, token string) {
	sum := sha256.Sum256([]byte(token))
	hex.Encode(b[:8], sum[:4])
}

// Start checks the backend (for Redis: that it answers, that its
// maxmemory-policy does not evict keys, and loads the lease scripts) and
// starts the renewer goroutine. It does not block; ctx bounds the checks only.
// Start returns an error when called twice or after Shutdown.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	switch {
	case m.closed:
		m.mu.Unlock()
		return ErrClosed
	case m.started:
		m.mu.Unlock()
		return errors.New("lease: manager already started")
	}
	m.mu.Unlock()
	if ch, ok := m.b.(Checker); ok {
		if err := ch.Check(ctx); err != nil {
			return fmt.Errorf("lease: start: %w", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.started {
		return errors.New("lease: manager already started")
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.started, m.stop, m.loopDone = true, cancel, make(chan struct{})
	t := m.clock.NewTimer(m.cfg.interval)
	go m.renewLoop(rctx, t)
	return nil
}

// Shutdown ends the Manager, in this order: it refuses new Acquire and Adopt
// calls, stops the renewer (aborting a batch in flight), releases every held
// lease (or leaves it to expire with [WithLeaveOnShutdown]), ends each with
// cause [ErrClosed] (Done closed, Context cancelled), and waits for OnLost
// callbacks still running. It is idempotent; later calls wait for the first
// one. It returns release failures, or ctx's error if ctx ends first (leases
// are ended locally all the same).
func (m *Manager) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		select {
		case <-m.shutDone:
			return m.shutErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.closed = true
	stop, loopDone := m.stop, m.loopDone
	m.mu.Unlock()

	defer close(m.shutDone)
	if stop != nil {
		stop()
		select {
		case <-loopDone:
		case <-ctx.Done():
		}
	}

	var errs []error
	held := m.Held()
	if !m.cfg.leave && len(held) > 0 {
		errs = append(errs, m.releaseAll(ctx, held))
	}
	for _, l := range held {
		l.end(ErrClosed)
	}

	m.mu.Lock()
	m.cbClosed = true
	if m.dlTimer != nil {
		m.dlTimer.Stop()
		m.dlAt = time.Time{}
	}
	m.mu.Unlock()
	cbDone := make(chan struct{})
	go func() { m.cbWG.Wait(); close(cbDone) }()
	select {
	case <-cbDone:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("lease: shutdown: waiting for OnLost callbacks: %w", ctx.Err()))
	}
	m.shutErr = errors.Join(errs...)
	return m.shutErr
}

// releaseAll releases leases concurrently, a bounded number at a time.
func (m *Manager) releaseAll(ctx context.Context, leases []*Lease) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, 32)
	)
	for _, l := range leases {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := m.b.Release(ctx, l.name, l.token, l.fence)
			if err != nil && !errors.Is(err, ErrLost) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("lease: release %q: %w", l.name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (m *Manager) ready() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return ErrClosed
	case !m.started:
		return ErrNotStarted
	}
	return nil
}

func validName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: lease name must be 1 to %d bytes, got %d", ErrInvalid, MaxNameLen, len(name))
	}
	return nil
}

// Acquire takes lease name with a fresh token and the Manager's TTL. When
// another owner holds it, the error is a [*HeldError] (errors.Is ErrHeld).
// Failures to reach the backend wrap [ErrUnavailable]. The lease's Context
// derives from ctx: cancelling ctx cancels it (without releasing the lease).
func (m *Manager) Acquire(ctx context.Context, name string) (_ *Lease, err error) {
	parent := ctx // the lease's context: not a child of the acquire span
	ctx, span := m.tracer.Start(ctx, "lease.acquire", trace.WithAttributes(attribute.String("lease.name", name)))
	defer func() { endSpan(span, err) }()
	if err := validName(name); err != nil {
		return nil, err
	}
	if err := m.ready(); err != nil {
		return nil, err
	}
	token := NewToken()
	sent := m.clock.Now()
	g, err := m.b.Acquire(ctx, name, token, m.cfg.ttl)
	if err != nil {
		outcome := "error"
		var he *HeldError
		if errors.As(err, &he) {
			outcome = "held"
			he.Name = name
		}
		m.met.acquire.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
		if outcome == "error" && errors.Is(err, ErrUnavailable) {
			// The script may have run with its answer lost: the lease would
			// then be held under a token nobody knows for a whole TTL. The
			// renewer releases it by token when the backend answers.
			m.abandonGrant(Grant{Name: name, Token: token, TTL: m.cfg.ttl, SentAt: sent})
		}
		return nil, err
	}
	m.met.acquire.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "acquired")))
	g.Name, g.Token = name, token
	if g.SentAt.IsZero() {
		g.SentAt = sent
	}
	g.TTL = cmp.Or(g.TTL, m.cfg.ttl)
	span.SetAttributes(attribute.Int64("lease.fence", int64(g.Fence))) //nolint:gosec // a fence is a microsecond timestamp or one above the last: far below 2^63
	l, err := m.track(parent, g)
	if err != nil {
		// Closed meanwhile, or the acquisition took longer than the TTL:
		// give the lease back rather than leave it held in Redis.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.interval)
		defer cancel()
		_ = m.b.Release(rctx, name, token, g.Fence)
		return nil, err
	}
	return l, nil
}

// Adopt makes m track a lease acquired by another package's script (which must
// store it like the acquire script does: see [Manager.Key]): the renewer
// renews it from now on, and the returned Lease behaves like one from
// Acquire. g.SentAt must be the local time the acquiring call was sent; g.TTL
// zero means the Manager's TTL.
func Adopt(ctx context.Context, m *Manager, g Grant) (*Lease, error) {
	if err := validName(g.Name); err != nil {
		return nil, err
	}
	if g.Token == "" || g.SentAt.IsZero() || g.TTL < 0 {
		return nil, fmt.Errorf("%w: grant needs a token, a send time and a TTL", ErrInvalid)
	}
	if err := m.ready(); err != nil {
		return nil, err
	}
	g.TTL = cmp.Or(g.TTL, m.cfg.ttl)
	return m.track(ctx, g)
}

func (m *Manager) track(ctx context.Context, g Grant) (*Lease, error) {
	drift := driftFor(m.cfg, g.TTL)
	deadline := g.SentAt.Add(g.TTL - drift)
	now := m.clock.Now()
	if !now.Before(deadline) {
		return nil, fmt.Errorf("%w: lease %q granted at %s was past its local deadline on arrival",
			ErrRenewDeadline, g.Name, g.SentAt.Format(time.RFC3339Nano))
	}
	lctx, cancel := context.WithCancelCause(ctx)
	l := &Lease{
		m:        m,
		name:     g.Name,
		token:    g.Token,
		fence:    g.Fence,
		ttl:      g.TTL,
		ctx:      lctx,
		cancel:   cancel,
		done:     make(chan struct{}),
		lastSent: g.SentAt,
		deadline: deadline,
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		cancel(ErrClosed)
		return nil, ErrClosed
	}
	m.seq++
	l.seq = m.seq
	m.held[l] = struct{}{}
	m.armDeadline(deadline, now)
	m.mu.Unlock()
	m.met.held.Add(ctx, 1)
	return l, nil
}

// Held returns the leases held now.
func (m *Manager) Held() []*Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Lease, 0, len(m.held))
	for l := range m.held {
		out = append(out, l)
	}
	return out
}

// Fenced runs s, a script built with scripts.Fenced, only while l is held: the
// script sees KEYS = [m.Key(l.Name()), keys...] and ARGV = [token, fence,
// args...], so the check and its writes are one atomic step in Redis. When the
// script answers scripts.StatusLost, Fenced returns an error wrapping [ErrLost]
// and ends l with that cause. Failures to reach Redis wrap [ErrUnavailable].
// keys must share the lease key's Cluster slot (use a hash tag in the name).
// On a lease that has already ended, Fenced sends nothing and returns its Err.
func Fenced(ctx context.Context, m *Manager, l *Lease, s *redis.Script, keys []string, args ...any) (_ any, err error) {
	ctx, span := m.tracer.Start(ctx, "lease.fenced", trace.WithAttributes(
		attribute.String("lease.name", l.name), attribute.Int64("lease.fence", int64(l.fence)))) //nolint:gosec // a fence is a microsecond timestamp or one above the last: far below 2^63
	defer func() { endSpan(span, err) }()
	if l.m != m {
		return nil, fmt.Errorf("%w: lease belongs to another manager", ErrInvalid)
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	res, err := m.b.Fenced(ctx, l.name, l.token, l.fence, s, keys, args)
	if err != nil {
		return nil, err
	}
	if code, ok := res.(int64); ok && code == scripts.StatusLost {
		m.lose(l, errFencedLost)
		return nil, fmt.Errorf("lease: fenced write on %q: %w", l.name, errFencedLost)
	}
	return res, nil
}

// abandon queues a lease given up locally, to be released by the renewer
// once the backend answers again (its key would otherwise block others until
// it expires). The queue is bounded.
func (m *Manager) abandon(l *Lease) {
	l.mu.Lock()
	sent := l.lastSent
	l.mu.Unlock()
	m.abandonGrant(Grant{Name: l.name, Token: l.token, Fence: l.fence, TTL: l.ttl, SentAt: sent})
}

// abandonGrant queues g for a best-effort release until g.SentAt + g.TTL
// (fence 0 releases by token alone).
func (m *Manager) abandonGrant(g Grant) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.abandoned) < maxAbandoned && !m.closed {
		m.abandoned = append(m.abandoned, abandonedLease{
			Renewal: Renewal{Name: g.Name, Token: g.Token, Fence: g.Fence, TTL: g.TTL},
			until:   g.SentAt.Add(g.TTL),
		})
	}
}

// maxAbandoned bounds the queue of leases waiting for a best-effort release.
const maxAbandoned = 10000

// abandonedLease is a lease given up locally whose key may still be in the
// backend until about until.
type abandonedLease struct {
	Renewal
	until time.Time
}

// lose ends l with cause, a loss: Done closes, Context is cancelled and OnLost
// callbacks run. It reports whether l was held.
//
//nolint:contextcheck // a loss is counted for the whole Manager, under no caller's context
func (m *Manager) lose(l *Lease, cause error) bool {
	cbs, ok := l.finish(cause, true)
	if !ok {
		return false
	}
	m.met.lostOne(cause)
	m.log.Warn("lease lost", slog.String("lease", l.name), slog.Uint64("fence", l.fence), slog.String("cause", cause.Error()))
	if len(cbs) == 0 {
		return true
	}
	m.mu.Lock()
	async := !m.cbClosed
	if async {
		m.cbWG.Add(1)
	}
	m.mu.Unlock()
	run := func() {
		for _, f := range cbs {
			f(cause)
		}
	}
	if async {
		go func() { defer m.cbWG.Done(); run() }()
	} else {
		run()
	}
	return true
}

//nolint:contextcheck // the held gauge counts the whole Manager: a lease ending is no caller's request
func (m *Manager) untrack(l *Lease) {
	m.mu.Lock()
	_, ok := m.held[l]
	delete(m.held, l)
	m.mu.Unlock()
	if ok {
		m.met.held.Add(context.Background(), -1)
	}
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Fencer is a Manager whose [Fenced] is a method, for callers that take
// "acquire, then run fenced scripts" as an interface (the dead-letter
// writer's Locks).
type Fencer struct{ *Manager }

// Fenced is [Fenced] on f's Manager.
func (f Fencer) Fenced(ctx context.Context, l *Lease, s *redis.Script, keys []string, args ...any) (any, error) {
	return Fenced(ctx, f.Manager, l, s, keys, args...)
}

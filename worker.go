package leasehold

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/internal/deadletter"
	"github.com/leasehold/leasehold/internal/fleet"
	"github.com/leasehold/leasehold/internal/jobtrace"
	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/lease"
)

// Worker consumes jobs from Kafka and runs each job's effect once: it claims
// the record's idempotency key under a lease in Redis, runs the registered
// handler while the lease is renewed, commits the result fenced, and commits
// the Kafka offset only when the record is finished (completed, replayed or
// dead-lettered).
//
// Lifecycle: [New], [Worker.Register] every job type, then [Worker.Run] (or
// [Worker.Start] and [Worker.Shutdown]).
//
// Shutdown order:
//  1. stop polling and claiming; fetching is paused; records parked for a
//     retry are left uncommitted for the partition's next owner;
//  2. wait for running jobs, up to the drain timeout (the earlier of the
//     context deadline and [WithShutdownTimeout]);
//  3. cancel jobs still running with cause [ErrShutdown] (it matches
//     [ErrLeaseLost]): their leases are given up, OnLeaseLost hooks run
//     (compensation), and the next owner takes the keys over;
//  4. commit the offsets of finished records, blocking (share mode: copy
//     the records still held at their last delivery to the dead-letter
//     topic and accept them, then flush the acknowledgements; the client's
//     close releases the other records);
//  5. leave the consumer group and close the Kafka client;
//  6. shut the lease manager down (releasing any lease still held).
type Worker struct {
	cfg   config
	fleet *fleet.Publisher // set by Start (WithFleet)
	rdb   redis.UniversalClient
	store store
	comp  *compensation.Runner // nil without WithCompensation
	obs   *observers           // built by Start
	log   *slog.Logger

	// hbRideRenewals: heartbeat details go straight to the store, whose
	// lease renewer coalesces them at the throttle's pace (set by start).
	hbRideRenewals bool
	// hbRounds: heartbeat details held back by a throttle longer than the
	// renew interval, handed to the store by the renewer's rounds (set by
	// start; nil without).
	hbRounds *heartbeatRounds

	// typesPaused is the job types paused fleet-wide, read every renew round
	// (pause.go); pauseEvery is how long a held record waits to look again.
	typesPaused atomic.Pointer[pausedSet]
	pauseEvery  time.Duration
	lim         limiter // fleet-wide limits (limits.go)

	// lifeMu serializes Start and Shutdown: a Shutdown called while Start
	// runs waits for Start to end.
	lifeMu sync.Mutex

	mu       sync.Mutex
	handlers map[string]*registration
	started  bool          // Start was called and has not failed
	live     bool          // Start succeeded: the fields below are set and stay set
	closed   bool          // Shutdown was called
	startCh  chan struct{} // closed when live becomes true (Started)

	cl    *kgo.Client
	offs  *offsets
	share *shareState // share-group mode (share.go); nil in consumer-group mode
	sched *schedule
	// sem holds the run slots (WithConcurrency): a job takes one at its claim
	// and trades it for a commit slot when its handler returns (pool.go).
	sem     *semaphore.Weighted
	commits *semaphore.Weighted

	lagReg metric.Registration // leasehold.commit.lag callback; nil without tracing
	// kcancel cancels the Kafka client's own context (kgo.WithContext): a
	// shutdown whose group leave timed out cancels it so that Close does not
	// wait on a broker that no longer answers (leaveGroup).
	kcancel context.CancelFunc

	origins deadletter.Origins // consumed topics' cluster and topic IDs, for dead-letter markers
	dlq     deadLetterWriter   // dead-letter copies, exactly once; set by start

	baseCtx    context.Context // parents leases; not cancelled by shutdown
	baseSpan   bool            // baseCtx carries a valid span (traceContext)
	stopCtx    context.Context // cancelled when shutdown begins
	stopLoop   context.CancelFunc
	loopDone   chan struct{}
	running    sync.WaitGroup // handler goroutines
	aux        sync.WaitGroup // dead-letter writers
	pollMu     sync.Mutex
	pollCancel context.CancelFunc
	wakeCh     chan struct{} // wakePoll's signal to a dispatcher that does not poll (budget.go)
	paused     atomic.Bool
	fetch      fetchGate   // pauses fetching for Redis, the memory budget, shutdown
	budget     budgetState // the memory budget (budget.go)

	activeMu sync.Mutex
	active   map[*Job]*activeJob

	shutdownOnce sync.Once
	shutdownErr  error
	closeStore   func(context.Context) error

	stats counters
}

type registration struct {
	typ     string
	handler Handler // wrapped with middleware
	cfg     jobConfig
}

type activeJob struct {
	cancel   context.CancelCauseFunc
	started  time.Time
	progress atomic.Pointer[[]byte]
}

// New returns a worker over the Redis client rdb. It checks nothing on the
// network yet; [Worker.Start] does.
func New(rdb redis.UniversalClient, opts ...Opt) (*Worker, error) {
	var c config
	for _, o := range opts {
		o.apply(&c)
	}
	if err := c.settle(); err != nil {
		return nil, err
	}
	if err := c.checkNegative(); err != nil {
		return nil, err
	}
	c.group = cmp.Or(c.group, DefaultGroup)
	if len(c.topics) == 0 {
		c.topics = []string{DefaultTopic}
	}
	c.concurrency = cmp.Or(c.concurrency, DefaultConcurrency)
	c.dlqTopic = cmp.Or(c.dlqTopic, c.topics[0]+".dlq")
	c.commitInterval = cmp.Or(c.commitInterval, DefaultCommitInterval)
	c.shutdownTimeout = cmp.Or(c.shutdownTimeout, DefaultShutdownTimeout)
	c.leaseTTL = cmp.Or(c.leaseTTL, DefaultLeaseTTL)
	c.retention = cmp.Or(c.retention, DefaultRetention)
	c.hbThrottle = cmp.Or(c.hbThrottle, c.leaseTTL/3)
	c.maxPayload = cmp.Or(c.maxPayload, DefaultMaxPayload)
	c.heldMin = cmp.Or(c.heldMin, 100*time.Millisecond)
	c.heldMax = cmp.Or(c.heldMax, c.leaseTTL)
	c.probeMin = cmp.Or(c.probeMin, 100*time.Millisecond)
	c.probeMax = cmp.Or(c.probeMax, 2*time.Second)
	c.keyPrefix = cmp.Or(c.keyPrefix, "lh:")
	c.logger = workerLogger(c.logger)
	if err := c.kafkaAndTelemetry(); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	w := &Worker{
		cfg:      c,
		rdb:      rdb,
		log:      c.logger,
		handlers: make(map[string]*registration),
		active:   make(map[*Job]*activeJob),
		startCh:  make(chan struct{}),
	}
	w.closeStore = func(context.Context) error { return nil }
	if rdb == nil {
		return nil, errors.New("leasehold: nil redis client")
	}
	return w, nil
}

// checkNegative refuses a negative number or duration in the options whose
// 0 means their default, before the defaults are set: a default only
// replaces 0, and a negative value would run (a payload bound below every
// record, a drain that cancels every job at once, a busy retry loop).
func (c *config) checkNegative() error {
	const want = "want 0 (the default) or more"
	switch {
	case c.concurrency < 0:
		return fmt.Errorf("leasehold: WithConcurrency(%d): %s", c.concurrency, want)
	case c.commitInterval < 0:
		return fmt.Errorf("leasehold: WithCommitInterval(%s): %s", c.commitInterval, want)
	case c.shutdownTimeout < 0:
		return fmt.Errorf("leasehold: WithShutdownTimeout(%s): %s", c.shutdownTimeout, want)
	case c.leaseTTL < 0:
		return fmt.Errorf("leasehold: WithLeaseTTL(%s): %s", c.leaseTTL, want)
	case c.retention < 0:
		return fmt.Errorf("leasehold: WithRetention(%s): %s", c.retention, want)
	case c.hbThrottle < 0:
		return fmt.Errorf("leasehold: WithHeartbeatThrottle(%s): %s", c.hbThrottle, want)
	case c.maxPayload < 0:
		return fmt.Errorf("leasehold: WithMaxPayload(%d): %s", c.maxPayload, want)
	case c.heldMin < 0 || c.heldMax < 0:
		return fmt.Errorf("leasehold: WithHeldBackoff(%s, %s): %s for each", c.heldMin, c.heldMax, want)
	case c.probeMin < 0 || c.probeMax < 0:
		return fmt.Errorf("leasehold: WithRedisProbe(%s, %s): %s for each", c.probeMin, c.probeMax, want)
	}
	return nil
}

// check refuses settings New cannot run with, after their defaults are set.
func (c *config) check() error {
	if c.concurrency < 1 {
		return fmt.Errorf("leasehold: concurrency %d < 1", c.concurrency)
	}
	gp, err := ParseGroupProtocol(string(c.groupProtocol))
	if err != nil {
		return err
	}
	c.groupProtocol = gp
	if err := c.checkShare(); err != nil {
		return err
	}
	if err := c.checkTypeLimits(); err != nil {
		return err
	}
	if err := c.budgetDefaults(); err != nil {
		return err
	}
	for _, t := range append([]string{c.dlqTopic}, c.topics...) {
		if t == "" {
			return errors.New("leasehold: empty topic name")
		}
	}
	for _, t := range c.topics {
		if t == c.dlqTopic {
			return fmt.Errorf("leasehold: dead-letter topic %q is also consumed", t)
		}
	}
	return nil
}

// Register binds a handler to a job type. It must be called before
// [Worker.Start]; registering a type twice returns [ErrDuplicateType], and a
// [WithJobLeaseTTL] the worker cannot renew in time returns
// [ErrInvalidLeaseTTL].
func (w *Worker) Register(jobType string, h Handler, opts ...JobOpt) error {
	if err := ValidateType(jobType); err != nil {
		return err
	}
	if h == nil {
		return fmt.Errorf("leasehold: nil handler for %q", jobType)
	}
	jc := jobConfig{
		maxAttempts: DefaultMaxAttempts,
		backoffMin:  DefaultBackoffMin,
		backoffMax:  DefaultBackoffMax,
	}
	for _, o := range w.cfg.jobDefaults {
		o.applyJob(&jc)
	}
	for _, o := range opts {
		o.applyJob(&jc)
	}
	if err := jc.check(jobType); err != nil {
		return err
	}
	if jc.leaseTTL != 0 {
		if err := w.checkLeaseTTL(jc.leaseTTL); err != nil {
			return fmt.Errorf("%w %s for %q: %w", ErrInvalidLeaseTTL, jc.leaseTTL, jobType, err)
		}
	}
	wrapped := Chain(jc.middleware...)(h)
	wrapped = Chain(w.cfg.middleware...)(wrapped)

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return fmt.Errorf("leasehold: register %q after start", jobType)
	}
	if _, dup := w.handlers[jobType]; dup {
		return fmt.Errorf("%w: %q", ErrDuplicateType, jobType)
	}
	w.handlers[jobType] = &registration{typ: jobType, handler: wrapped, cfg: jc}
	return nil
}

// check refuses job options Register cannot run jobType with.
func (c *jobConfig) check(jobType string) error {
	switch {
	case c.maxAttempts < 1:
		return fmt.Errorf("leasehold: max attempts %d < 1 for %q", c.maxAttempts, jobType)
	case c.backoffMin < 0 || c.backoffMax < 0:
		return fmt.Errorf("leasehold: WithBackoff(%s, %s) for %q: want 0 or more for each", c.backoffMin, c.backoffMax, jobType)
	case c.timeout < 0:
		return fmt.Errorf("leasehold: WithTimeout(%s) for %q: want 0 (none, the default) or more", c.timeout, jobType)
	}
	if err := c.limits.check(); err != nil {
		return fmt.Errorf("%w for %q", err, jobType)
	}
	return nil
}

// checkLeaseTTL checks a job type's lease TTL against the renew interval and
// drift of the lease manager Start will build (the same options).
func (w *Worker) checkLeaseTTL(ttl time.Duration) error {
	if ttl < 0 {
		return errors.New("negative")
	}
	if err := lease.CheckTTL(ttl, w.cfg.leaseOptions()...); err != nil {
		return fmt.Errorf("the worker renews its leases too seldom for it (%w)", err)
	}
	return nil
}

// Run starts the worker, blocks until ctx is done, then shuts down
// gracefully (see [Worker] for the order): running jobs get up to
// [WithShutdownTimeout] to finish, then the final commit and leaving the
// group up to 10s more. [Worker.Started] tells another
// goroutine when Run has started the worker; a failed start is Run's error.
//
// To shut down by a deadline of your own (a host's shutdown budget, an HTTP
// server's Shutdown beside it), set [WithShutdownTimeout] to it, or call
// [Worker.Start] and, when the host stops, [Worker.Shutdown] with a context
// carrying the deadline: running jobs are cancelled at the earlier of that
// deadline and WithShutdownTimeout (see the Worker_Shutdown example).
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.shutdownTimeout+finalCommitTimeout)
	defer cancel()
	return w.Shutdown(sctx)
}

// Start joins the consumer group and starts consuming; it does not block.
// It fails if no job type is registered or Redis does not answer; a failed
// Start may be called again.
func (w *Worker) Start(ctx context.Context) error {
	w.lifeMu.Lock()
	defer w.lifeMu.Unlock()
	if err := w.markStarted(); err != nil {
		return err
	}
	if err := w.start(ctx); err != nil {
		// A failed start leaves the worker as it was: not started, nothing held.
		_ = w.closeStore(context.WithoutCancel(ctx))
		w.closeStore = func(context.Context) error { return nil }
		w.store, w.comp = nil, nil
		w.mu.Lock()
		w.started = false
		w.mu.Unlock()
		return err
	}
	// Publish the started worker: Ready, Stats and Client read the fields
	// set by start only once live is true (under mu).
	w.mu.Lock()
	w.live = true
	close(w.startCh)
	w.mu.Unlock()
	w.startFleet(ctx)
	w.log.Info("worker started", slog.String("group", w.cfg.group), slog.Any("topics", w.cfg.topics),
		slog.Int("concurrency", w.cfg.concurrency))
	return nil
}

// markStarted refuses a closed, started or empty worker, else marks it
// started.
func (w *Worker) markStarted() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
		return ErrClosed
	case w.started:
		return errors.New("leasehold: worker already started")
	case len(w.handlers) == 0:
		return ErrNoHandlers
	}
	w.started = true
	return nil
}

// start builds the store, the Kafka client and the metrics, then starts the
// dispatcher.
func (w *Worker) start(ctx context.Context) error {
	var leases *lease.Manager // the dead-letter writer's locks
	if w.store == nil {
		s, closeFn, err := newRedisStore(ctx, w.rdb, &w.cfg)
		if err != nil {
			return err
		}
		w.store, w.closeStore, w.comp, leases = s, closeFn, s.comp, s.m
		// Details then ride the renewer's rounds, which store at most one
		// per renew interval: the throttle the default asks for, with no
		// timer of a job's own.
		w.hbRideRenewals = w.cfg.hbThrottle == s.m.RenewInterval()
		if w.cfg.hbThrottle > s.m.RenewInterval() {
			// Details held back by a longer throttle ride the rounds too,
			// handed to the store's flush once the throttle has passed.
			w.hbRounds = &heartbeatRounds{}
			leasing.OnRenewRoundFirst(s.m, w.hbRounds.flushDue)
		}
		w.watchPaused(s.m)
		w.lim.init()
	}
	if err := w.store.Ping(ctx); err != nil {
		return err
	}
	if err := w.loadPaused(ctx); err != nil {
		return err
	}
	w.initPool()
	w.sched = newSchedule(w.cfg.ordered, w.wakePoll)
	w.wakeCh = make(chan struct{}, 1)
	cl, err := w.kafkaClient(ctx)
	if err != nil {
		return err
	}
	if w.dlq, err = w.newDeadLetterWriter(cl, leases); err != nil {
		cl.Close()
		w.kcancel()
		return err
	}
	w.cl = cl
	w.fetch.pause = func() { cl.PauseFetchTopics(w.cfg.topics...) }
	w.fetch.resume = func() { cl.ResumeFetchTopics(w.cfg.topics...) }
	w.offs = newOffsets(cl.MarkCommitOffsets)
	if leases != nil {
		// The limits' round reads w.offs: registered once it is set.
		w.watchLimits(leases)
	}
	if err := w.startMetrics(); err != nil {
		cl.Close()
		w.kcancel()
		return err
	}
	w.baseCtx = context.WithoutCancel(ctx)
	w.baseSpan = trace.SpanContextFromContext(ctx).IsValid() // baseCtx carries ctx's values
	w.obs = w.newObservers()
	w.stopCtx, w.stopLoop = context.WithCancel(w.baseCtx)
	w.loopDone = make(chan struct{})
	go w.loop() //nolint:contextcheck // the dispatcher runs on the worker's own contexts (baseCtx, stopCtx)
	return nil
}

// kafkaClient checks the topics and builds the consumer-group client.
// franz-go logs through the worker's logger, from WithKafkaLogLevel up (warn:
// its group lifecycle at info stays quiet), unless the caller's options give
// it another logger. The
// producer takes a dead-letter copy of any record the payload bound lets in
// (the caller's options may override it). The group's session timeout and
// heartbeat interval follow the lease TTL unless the caller's options set
// them (groupTimeouts).
func (w *Worker) kafkaClient(ctx context.Context) (*kgo.Client, error) {
	kopts, session, hb, err := w.groupTimeouts(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:9092"), kgo.WithLogger(kafkaLogger(w.log, w.cfg.kafkaLogLevel)),
		kgo.ProducerBatchMaxBytes(producerBatchMax(w.cfg.maxPayload))}, w.cfg.kafkaOpts...))
	if err != nil {
		return nil, err
	}
	if err := checkTopics(ctx, w.log, kopts, append([]string{w.cfg.dlqTopic}, w.cfg.topics...)); err != nil {
		return nil, err
	}
	w.setGroupTimeouts(ctx, kopts, session, hb)
	if w.cfg.shareGroup != "" {
		if err := w.startShare(ctx, kopts); err != nil {
			return nil, err
		}
		kopts = append(kopts, w.cfg.tracer.KgoOpt())
		kopts = append(kopts, w.shareOpts()...)
	} else {
		kopts = append(kopts, w.cfg.tracer.KgoOpt(),
			kgo.ConsumerGroup(w.cfg.group),
			kgo.ConsumeTopics(w.cfg.topics...),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.AutoCommitMarks(),
			kgo.AutoCommitInterval(w.cfg.commitInterval),
			kgo.BlockRebalanceOnPoll(),
			kgo.OnPartitionsAssigned(w.onAssignedRefresh),
			kgo.OnPartitionsRevoked(w.onRevoked),
			kgo.OnPartitionsLost(w.onLost),
		)
		kopts = append(kopts, w.cfg.balancerOpts()...)
	}
	kctx, kcancel := context.WithCancel(context.WithoutCancel(ctx))
	kopts = append(kopts, kgo.WithContext(kctx))
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		kcancel()
		return nil, fmt.Errorf("leasehold: kafka client: %w", err)
	}
	w.kcancel = kcancel
	return cl, nil
}

// startMetrics shows every dead-letter reason at 0 and registers the commit
// lag gauge.
func (w *Worker) startMetrics() error {
	jobtrace.Of(w.cfg.tracer).Metrics().ZeroDeadLettered(deadletter.Reasons()...)
	reg, err := jobtrace.Of(w.cfg.tracer).Metrics().ObserveCommitLag(func() []jobtrace.PartitionLag {
		return w.offs.commitLag(w.cl.CommittedOffsets())
	})
	if err != nil {
		return fmt.Errorf("leasehold: commit lag metric: %w", err)
	}
	w.lagReg = reg
	w.lim.metrics = jobtrace.Of(w.cfg.tracer).Metrics()
	return nil
}

// finalCommitTimeout bounds a shutdown's final commit and the lease
// manager's release, after the drain (they run even when the shutdown
// context is done: a commit skipped would only rerun finished records).
const finalCommitTimeout = 10 * time.Second

// Shutdown stops the worker gracefully (see [Worker] for the order). It is
// idempotent; later calls return the first call's result.
func (w *Worker) Shutdown(ctx context.Context) error {
	w.shutdownOnce.Do(func() { w.shutdownErr = w.shutdown(ctx) })
	return w.shutdownErr
}

func (w *Worker) shutdown(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true // a Start that has not begun yet returns ErrClosed
	w.mu.Unlock()
	w.lifeMu.Lock() // wait for a Start under way
	defer w.lifeMu.Unlock()
	w.mu.Lock()
	live := w.live
	w.mu.Unlock()
	if !live {
		return w.closeStore(ctx)
	}
	defer w.stopFleet(ctx)

	// 1. Stop polling and claiming.
	w.stopLoop()
	w.fetch.set(pauseShutdown, true)
	<-w.loopDone

	// 2. and 3. Drain running jobs; cancel what still runs at the deadline.
	var errs []error
	if err := w.drain(ctx); err != nil {
		errs = append(errs, err)
	}
	// Left for the partitions' next owners; in share mode those held at
	// their last delivery are dead-lettered first.
	w.endDropped(context.WithoutCancel(ctx), w.shareEndHeld(ctx, w.sched.takeAll()))

	// 4. Commit what is finished.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalCommitTimeout)
	defer cancel()
	if err := w.commitFinished(cctx); err != nil {
		errs = append(errs, fmt.Errorf("leasehold: final commit: %w", err))
	}
	// 5. Leave the group and close the client.
	if w.lagReg != nil {
		_ = w.lagReg.Unregister()
	}
	w.leaveGroup(ctx)
	w.cl.Close()
	w.kcancel()
	// 6. Release what the lease manager still holds.
	if err := w.closeStore(cctx); err != nil {
		errs = append(errs, err)
	}
	w.log.Info("worker stopped")
	return errors.Join(errs...)
}

// newObservers builds the worker's observers: counting, logging, tracing,
// then the user's hooks in the order given.
func (w *Worker) newObservers() *observers {
	os := []any{statsObserver{c: &w.stats}, logObserver{log: w.log}, newHistoryObserver(w),
		traceObserver{tr: jobtrace.Of(w.cfg.tracer), base: w.baseCtx, stopping: func() bool { return w.stopCtx.Err() != nil }}}
	for _, h := range w.cfg.hooks {
		os = append(os, h)
	}
	return newObservers(os...)
}

// drain waits for running jobs and dead-letter writers until the drain
// deadline (the earlier of ctx's deadline and the shutdown timeout), then
// cancels the jobs still running with cause ErrShutdown: their leases are
// given up.
func (w *Worker) drain(ctx context.Context) error {
	deadline := time.Now().Add(w.cfg.shutdownTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	drained := make(chan struct{})
	go func() { w.running.Wait(); w.aux.Wait(); close(drained) }()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-drained:
		return nil
	case <-timer.C:
		n := w.cancelActive(ErrShutdown)
		w.log.Warn("drain timeout: cancelled running jobs", slog.Int("jobs", n))
		select {
		case <-drained:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("leasehold: handlers ignored cancellation: %w", ctx.Err())
		}
	case <-ctx.Done():
		w.cancelActive(ErrShutdown)
		return ctx.Err()
	}
}

// Started returns a channel that is closed once the worker has started:
// [Worker.Start] (or [Worker.Run]) has joined the consumer group and begun
// consuming, and [Worker.Ready], [Worker.Client] and [Worker.Stats] see the
// running worker. It is not closed while Start is under way, nor after a
// failed Start (a later successful Start closes it). Safe to call at any
// time, from any goroutine.
func (w *Worker) Started() <-chan struct{} { return w.startCh }

// Ready reports whether the worker can make progress: started, not shutting
// down, Redis answering and fetching not paused, and a Kafka broker answering.
// Before the worker has started it returns [ErrNotStarted], after Shutdown
// [ErrClosed]; any other error is a started worker that is broken for now
// (errors matching [ErrUnavailable]: Redis, or fetching paused; a Kafka
// error). It is safe to call at any time, from any goroutine, also while
// Start or Run is starting the worker.
func (w *Worker) Ready(ctx context.Context) error {
	w.mu.Lock()
	live, closed := w.live, w.closed
	w.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case !live:
		return ErrNotStarted
	case w.paused.Load():
		return fmt.Errorf("%w: fetching paused", ErrUnavailable)
	}
	// live: store and cl are set and no longer written.
	if err := w.store.Ping(ctx); err != nil {
		return err
	}
	if err := w.cl.Ping(ctx); err != nil {
		return fmt.Errorf("leasehold: kafka: %w", err)
	}
	return nil
}

// Client returns the worker's franz-go client, for producing from handlers
// or reading metrics: nil until the worker has started ([Worker.Started]),
// then the same client, also after Shutdown has closed it. Safe to call at
// any time, from any goroutine.
func (w *Worker) Client() *kgo.Client {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.live {
		return nil
	}
	return w.cl
}

func (w *Worker) cancelActive(cause error) int {
	w.activeMu.Lock()
	defer w.activeMu.Unlock()
	for _, a := range w.active {
		a.cancel(cause)
	}
	return len(w.active)
}

// RunningJob describes a job a handler is running.
type RunningJob struct {
	Key      string
	Type     string
	Fence    uint64
	Attempt  int
	Takeover bool
	Started  time.Time
	Progress []byte // the latest heartbeat details
}

// Running lists the jobs being run now.
func (w *Worker) Running() []RunningJob {
	w.activeMu.Lock()
	defer w.activeMu.Unlock()
	out := make([]RunningJob, 0, len(w.active))
	for j, a := range w.active {
		var p []byte
		if pp := a.progress.Load(); pp != nil {
			p = *pp
		}
		out = append(out, RunningJob{Key: j.Key, Type: j.Type, Fence: j.fence, Attempt: j.Attempt,
			Takeover: j.Takeover, Started: a.started, Progress: p})
	}
	return out
}

package chaos

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/demo"
	"github.com/leasehold/leasehold/internal/paystub"
)

// Run executes one chaos run as configured (call [Config.Finish] first),
// logging progress to log, and returns the figures. The error is an
// *InvariantError when a must-be-zero figure is not zero; other errors mean
// the run itself could not be carried out.
func Run(ctx context.Context, c Config, log *slog.Logger) (Figures, error) {
	r := &run{cfg: c, log: log}
	defer r.teardown(ctx)
	f, err := r.run(ctx)
	if err != nil {
		return f, err
	}
	return f, f.Err()
}

type run struct {
	cfg Config
	log *slog.Logger

	dir       string
	workerBin string
	redis     *Redis
	broker    *Proc         // the dev-broker (kfake), or nil
	kafka     *brokerFaults // Apache Kafka, or nil
	stub      *Proc
	brokerAdr string
	stubURL   string
	pgURL     string // with the run's search_path
	schema    string
	db        *pgxpool.Pool

	mu      sync.Mutex
	workers []*Proc        // in start order; removed workers stay, stopped
	removed map[*Proc]bool // stopped on purpose: not restarted
	busy    map[*Proc]bool // a kill, pause or partition is in progress
	cutOff  map[*Proc]bool // partitioned
	nets    map[*Proc]*workerNet
	metrics map[*Proc]string // the worker's /metrics URL
	parts   partitions
	hist    *History // nil: no history recorded
	kills   []KillMark
	outage  time.Duration // Redis restart
	obs     *Observer
	faults  sync.WaitGroup

	ctl        *controls // nil: no cancels or pauses of the job type
	cancelIdx  []int     // the jobs to cancel: they hold
	deferUntil time.Time // a deferred worker fault is given up after it
	drainLeft  int       // jobs unfinished when the drain timed out
}

func (r *run) run(ctx context.Context) (Figures, error) {
	c := r.cfg
	r.removed, r.busy, r.cutOff = map[*Proc]bool{}, map[*Proc]bool{}, map[*Proc]bool{}
	r.nets, r.metrics = map[*Proc]*workerNet{}, map[*Proc]string{}
	sc := ScheduleConfig{Seed: c.Seed, Horizon: c.Horizon(), KillEvery: c.KillEvery, PauseFor: c.Pause, Slots: c.Workers,
		PartitionEvery: c.PartitionEvery, PartitionFor: c.PartitionFor, PartitionNets: c.PartitionNets}
	if c.Kafka != KafkaFake {
		sc.BrokerEvery, sc.BrokerPauseFor = c.BrokerFaultEvery, c.BrokerPause
	}
	sched, err := NewSchedule(sc)
	if err != nil {
		return Figures{Seed: c.Seed}, err
	}
	r.log.Info("chaos schedule", slog.Uint64("seed", c.Seed), slog.Int("events", len(sched.Events)),
		slog.Duration("horizon", c.Horizon()), slog.String("kafka", c.Kafka),
		slog.String("replay", "CHAOS_SEED="+strconv.FormatUint(c.Seed, 10)))
	if err := r.prepare(ctx); err != nil {
		return Figures{Seed: c.Seed}, err
	}
	jobs, err := r.setUp(ctx, sched)
	if err != nil {
		return Figures{Seed: c.Seed}, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.redis.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: time.Second, WriteTimeout: time.Second})
	defer func() { _ = rdb.Close() }()
	r.obs = NewObserver(rdb, "lh:", 25*time.Millisecond, r.cfg.LeaseTTL/3) // the workers' default renew interval
	octx, stopObs := context.WithCancel(ctx)
	obsDone := make(chan struct{})
	go func() { r.obs.Run(octx); close(obsDone) }()
	defer func() { stopObs(); <-obsDone }()

	var smp *sampler
	if c.Soak > 0 {
		smp = &sampler{run: r, rdb: rdb, every: c.SoakSample, http: &http.Client{Timeout: 2 * time.Second}}
		sctx, stopSmp := context.WithCancel(ctx)
		smpDone := make(chan struct{})
		go func() { smp.loop(sctx); close(smpDone) }()
		defer func() { stopSmp(); <-smpDone }()
	}

	start := time.Now()
	r.deferUntil = start.Add(c.Horizon() + deferFor)
	enqErr := make(chan error, 1)
	go func() { enqErr <- r.enqueue(ctx, jobs, start) }()
	r.scheduleControls(ctx, start, jobs)
	stopSup := r.startSupervisor(ctx)
	defer stopSup()

	for _, e := range sched.Events {
		select {
		case <-time.After(time.Until(start.Add(e.At))):
		case <-ctx.Done():
			return Figures{Seed: c.Seed}, context.Cause(ctx)
		}
		r.apply(ctx, e)
	}
	if err := <-enqErr; err != nil {
		return Figures{Seed: c.Seed}, err
	}
	r.faults.Wait()
	var soak *SoakFigures
	kills, pauses, brokerOut, err := r.kafka.figures()
	if err != nil {
		return Figures{Seed: c.Seed}, err
	}
	if smp != nil {
		sf, err := Flatness(smp.all(), c.SoakWarmup())
		if err != nil {
			return Figures{Seed: c.Seed}, err
		}
		soak = &sf
		for _, g := range sf.Growing {
			r.log.Warn("soak: a resource grew beyond the bound", slog.String("resource", g))
		}
	}
	r.log.Info("fault phase over; restarting dead workers and draining", slog.Duration("took", time.Since(start)),
		slog.Int("broker_kills", kills), slog.Int("broker_pauses", pauses))
	stopSup()
	r.reviveAll()

	ledger, drained, err := r.drain(ctx, jobs)
	if err != nil {
		return Figures{Seed: c.Seed}, err
	}
	cancelled, err := r.ctl.settle(ctx)
	if err != nil {
		return Figures{Seed: c.Seed}, err
	}
	f, err := Check(ctx, Evidence{DB: r.db, Ledger: ledger, Cancelled: cancelled}, jobs)
	if err != nil {
		return f, err
	}
	f.Seed = c.Seed
	f.Drain = drained
	f.Soak = soak
	f.Partitions = r.parts.all()
	f.BrokerKills, f.BrokerPauses, f.BrokerOutage = kills, pauses, brokerOut
	r.takeovers(&f)
	r.mu.Lock()
	f.RedisOutage = r.outage
	var logs []string
	for _, w := range r.workers {
		logs = append(logs, w.LogPath)
	}
	r.mu.Unlock()
	if f.ZombieWritesRejected, err = CountStaleFences(logs); err != nil {
		return f, err
	}
	if err := r.judge(&f); err != nil {
		return f, err
	}
	f.Controls = r.ctl.figures(r.hist.Operations())
	if err := r.accountRecords(ctx, &f, rdb, jobs); err != nil {
		return f, err
	}
	return f, nil
}

// accountRecords puts in f what became of the jobs topic's records: in
// share mode, those the share group left unacknowledged; in every mode,
// `worker audit`'s account and the jobs' attempt histories against their
// records (checkAttempts).
func (r *run) accountRecords(ctx context.Context, f *Figures, rdb *redis.Client, jobs []Job) (err error) {
	f.Share = r.cfg.Share
	f.DrainUnfinished = r.drainLeft
	if f.ShareUnacknowledged, err = r.shareUnacknowledged(ctx, 30*time.Second); err != nil {
		return err
	}
	if f.Audit, err = r.audit(ctx); err != nil {
		return err
	}
	f.Attempts, err = r.checkAttempts(ctx, rdb, jobs)
	return err
}

// setUp writes the schedule, opens the jobs' accounts, plans the operator
// controls and starts the workers (in share mode, waits for their share
// group's state: waitShareState); it returns the run's jobs.
func (r *run) setUp(ctx context.Context, sched Schedule) ([]Job, error) {
	r.hist = NewHistory()
	if err := os.WriteFile(filepath.Join(r.dir, "schedule.txt"), []byte(sched.String()), 0o600); err != nil {
		return nil, err
	}
	jobs := makeJobs(r.cfg.Seed, r.cfg.Jobs)
	if err := r.openAccounts(ctx, jobs); err != nil {
		return nil, err
	}
	r.planControls(jobs)
	for range r.cfg.Workers {
		if _, err := r.addWorker(ctx); err != nil {
			return nil, err
		}
	}
	if err := r.waitShareState(ctx, 3*time.Minute); err != nil {
		return nil, err
	}
	return jobs, nil
}

// takeovers puts the observed takeovers and their latencies in f and logs
// the slowest.
func (r *run) takeovers(f *Figures) {
	f.Takeovers = r.obs.Takeovers()
	f.TakeoverLatencies = r.obs.Latencies()
	r.log.Info("takeover latency", slog.Int("takeovers_measured", len(f.TakeoverLatencies)),
		slog.Int("kills_not_measured", r.obs.Unmeasured()), slog.String("why", "within a renew interval of a pause"))
	for _, t := range r.obs.Slowest(5) {
		r.log.Info("slow takeover", slog.String("key", t.Key), slog.Time("killed_at", t.KilledAt),
			slog.Duration("latency", t.Latency))
	}
}

// judge checks the history (the Redis operations the links saw and the
// fenced writes the workers logged) against the model, and times the
// takeovers of partitioned workers' leases.
func (r *run) judge(f *Figures) error {
	r.mu.Lock()
	logs := map[string]string{}
	for _, w := range r.workers {
		logs[w.Name] = w.LogPath
	}
	r.mu.Unlock()
	ev, err := readWorkerEvents(logs)
	if err != nil {
		return err
	}
	redisOps := r.hist.Operations()
	r.mu.Lock()
	kills := append([]KillMark(nil), r.kills...)
	r.mu.Unlock()
	pv := judgePartitions(redisOps, ev, f.Partitions, kills)
	f.PartitionVerdict = &pv
	for _, c := range pv.Closest {
		r.log.Info("partition takeover with the thinnest margin", slog.String("key", c.Key), slog.Uint64("fence", c.Fence),
			slog.String("old", c.Old), slog.String("new", c.New), slog.Time("cancelled", c.Cancelled),
			slog.Duration("overlap", c.Overlap))
	}
	ev.addTo(r.hist)
	began := time.Now()
	hv, err := CheckHistory(r.hist.Operations(), r.dir, 5*time.Minute)
	if err != nil {
		return err
	}
	f.History = &hv
	r.log.Info("history checked", slog.Int("ops", hv.Ops), slog.Int("keys", hv.Keys), slog.Int("ambiguous", hv.Ambiguous),
		slog.String("result", string(hv.Result)), slog.Duration("took", time.Since(began)),
		slog.Int("unparsed_connections", r.hist.Unparsed()))
	for _, o := range hv.Offending {
		r.log.Error("history not linearizable", slog.String("ops", o))
	}
	if hv.Visualization != "" {
		r.log.Error("history visualisation", slog.String("file", hv.Visualization))
	}
	return nil
}

// prepare makes the directory, builds the worker if needed, and starts
// Redis, the broker and the payment stub, and the PostgreSQL schema.
func (r *run) prepare(ctx context.Context) error {
	c := r.cfg
	r.dir = c.Dir
	if r.dir == "" {
		d, err := os.MkdirTemp("", fmt.Sprintf("leasehold-chaos-%d-", c.Seed))
		if err != nil {
			return err
		}
		r.dir = d
	} else if err := os.MkdirAll(r.dir, 0o750); err != nil {
		return err
	}
	r.log.Info("chaos logs", slog.String("dir", r.dir))
	r.workerBin = c.Worker
	if r.workerBin == "" {
		r.workerBin = filepath.Join(r.dir, "worker")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", r.workerBin, "github.com/leasehold/leasehold/cmd/worker") //nolint:gosec // fixed arguments; the output path is the run directory
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("chaos: build worker: %w\n%s", err, out)
		}
	}

	redisDir := filepath.Join(r.dir, "redis")
	if err := os.MkdirAll(redisDir, 0o750); err != nil {
		return err
	}
	var err error
	if r.redis, err = NewRedis(ctx, c.RedisServer, redisDir); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := r.redis.StartReady(rctx); err != nil {
		return err
	}

	if err := r.startKafka(ctx); err != nil {
		return err
	}
	sport, err := FreePort(ctx)
	if err != nil {
		return err
	}
	stubAddr := "127.0.0.1:" + strconv.Itoa(sport)
	r.stubURL = "http://" + stubAddr
	r.stub = &Proc{Name: "payment-stub", Path: r.workerBin, LogPath: filepath.Join(r.dir, "payment-stub.log"),
		Args: []string{"payment-stub", "--listen", stubAddr}}
	if err := r.stub.Start(); err != nil {
		return err
	}
	// A context of its own: Apache Kafka's start may have taken rctx's time.
	sctx, scancel := context.WithTimeout(ctx, 15*time.Second)
	defer scancel()
	if err := waitTCP(sctx, r.stub, stubAddr); err != nil {
		return err
	}
	return r.openSchema(ctx)
}

// openSchema creates a fresh schema and the demo tables in it.
func (r *run) openSchema(ctx context.Context) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	r.schema = fmt.Sprintf("chaos_%d_%s", r.cfg.Seed%1_000_000, hex.EncodeToString(b[:]))
	admin, err := pgx.Connect(ctx, r.cfg.PostgresURL)
	if err != nil {
		return fmt.Errorf("chaos: PostgreSQL: %w", err)
	}
	defer func() { _ = admin.Close(ctx) }()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{r.schema}.Sanitize()); err != nil {
		return fmt.Errorf("chaos: create schema: %w", err)
	}
	pc, err := pgxpool.ParseConfig(r.cfg.PostgresURL)
	if err != nil {
		return err
	}
	pc.ConnConfig.RuntimeParams["search_path"] = r.schema
	if r.db, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return err
	}
	r.pgURL, err = withSearchPath(r.cfg.PostgresURL, r.schema)
	if err != nil {
		return err
	}
	return demo.Migrate(ctx, r.db)
}

// openAccounts opens the two accounts of every job.
func (r *run) openAccounts(ctx context.Context, jobs []Job) error {
	ids := make([]string, 0, 2*len(jobs))
	for _, j := range jobs {
		ids = append(ids, FromAccount(j.Key), ToAccount(j.Key))
	}
	_, err := r.db.Exec(ctx, `INSERT INTO demo_accounts (id, balance) SELECT unnest($1::text[]), $2`, ids, InitialBalance)
	if err != nil {
		return fmt.Errorf("chaos: open accounts: %w", err)
	}
	return nil
}

// addWorker starts one more `worker run` process, with its own links to
// Redis and to the broker (see [workerNet]) and its /metrics on a free port.
func (r *run) addWorker(ctx context.Context) (*Proc, error) {
	r.mu.Lock()
	n := len(r.workers) + 1
	r.mu.Unlock()
	name := "worker-" + strconv.Itoa(n)
	wn, err := r.openNet(ctx, name)
	if err != nil {
		return nil, err
	}
	port, err := FreePort(ctx)
	if err != nil {
		wn.close()
		return nil, err
	}
	httpAddr := "127.0.0.1:" + strconv.Itoa(port)
	w := &Proc{
		Name: name, Path: r.workerBin, LogPath: filepath.Join(r.dir, name+".log"),
		Args: []string{"run",
			"--brokers", r.brokerAdr,
			"--kafka-dial-map", wn.dialMap(),
			"--redis", "redis://" + wn.redis.Addr() + "/0",
			"--http", httpAddr,
			"--retention", r.cfg.Retention.String(),
			"--journal-retention", r.cfg.Retention.String(),
			"--lease-ttl", r.cfg.LeaseTTL.String(),
			"--concurrency", strconv.Itoa(r.cfg.Concurrency),
			// demo.transfer's fenced writes and cancellations, for the
			// history check and the partition figures.
			"--log-level", "debug",
			"--shutdown-timeout", "5s",
			// A partition handed over is fetched once the fetch in
			// flight returns: up to the fetch max wait on a quiet topic.
			"--fetch-max-wait", r.cfg.FetchMaxWait.String(),
			"--rebalance-timeout", "10s",
			// A journal whose compensation failed while Redis was down
			// is left to the recovery sweep (every 30s by default); the
			// drain settles within a few lease TTLs, so sweep as often.
			"--sweep-interval", r.cfg.LeaseTTL.String(),
			"--pg", r.pgURL,
			"--payment-stub", r.stubURL,
		},
	}
	// A SIGKILLed member's partitions move after the session timeout, and
	// the survivors learn of the rebalance on their next heartbeat: by
	// default the workers derive both from the lease TTL, as users run them.
	w.Args = append(w.Args, r.cfg.workerGroupArgs()...)
	// No trace collector runs during chaos; spans would only pile up
	// export errors.
	w.Env = []string{"OTEL_TRACES_EXPORTER=none"}
	if err := w.Start(); err != nil {
		wn.close()
		return nil, err
	}
	r.mu.Lock()
	r.workers = append(r.workers, w)
	r.nets[w] = wn
	r.metrics[w] = "http://" + httpAddr + "/metrics"
	r.mu.Unlock()
	return w, nil
}

// pick returns the live, idle worker at slot (modulo the live ones), or nil.
func (r *run) pick(slot int) *Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	var live []*Proc
	for _, w := range r.workers {
		if !r.removed[w] && w.Running() {
			live = append(live, w)
		}
	}
	for i := range live {
		w := live[(slot+i)%len(live)]
		if !r.busy[w] {
			r.busy[w] = true
			return w
		}
	}
	return nil
}

func (r *run) idle(w *Proc) {
	r.mu.Lock()
	delete(r.busy, w)
	r.mu.Unlock()
}

// liveCount returns how many workers run and are not paused.
func (r *run) liveCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, w := range r.workers {
		if !r.removed[w] && w.Running() && !w.Paused() && !r.cutOff[w] {
			n++
		}
	}
	return n
}

// apply carries out one event; kills, pauses and the Redis restart run in
// the background so that the schedule keeps its pace.
func (r *run) apply(ctx context.Context, e Event) {
	log := r.log.With(slog.String("event", e.String()))
	switch e.Action {
	case Kill:
		r.workerFault(ctx, e, log, r.kill)
	case Pause:
		r.workerFault(ctx, e, log, r.pause)
	case RestartRedis:
		r.faults.Go(func() {
			out, err := r.redis.Bounce(ctx, 5*time.Second, e.For)
			r.mu.Lock()
			r.outage += out
			r.mu.Unlock()
			log.Info("redis restarted", slog.Duration("outage", out), slog.Any("err", err))
		})
	case KillBroker, PauseBroker:
		if r.kafka == nil {
			log.Warn("skipped: the dev-broker is not killed or paused")
			return
		}
		r.faults.Go(func() { r.kafka.apply(ctx, e, log) })
	case Partition:
		r.workerFault(ctx, e, log, r.partition)
	case AddWorker:
		w, err := r.addWorker(ctx)
		if err != nil {
			log.Warn("add worker", slog.Any("err", err))
			return
		}
		log.Info("added", slog.String("worker", w.Name))
	case RemoveWorker:
		if r.liveCount() < 3 {
			log.Info("skipped: it would leave fewer than two live workers")
			return
		}
		w := r.pick(e.Slot)
		if w == nil {
			log.Info("skipped: no idle worker")
			return
		}
		r.mu.Lock()
		r.removed[w] = true
		r.mu.Unlock()
		r.faults.Go(func() {
			defer r.idle(w)
			if err := w.Stop(15 * time.Second); err != nil {
				log.Warn("remove", slog.Any("err", err))
			}
			log.Info("removed", slog.String("worker", w.Name))
		})
	}
}

// deferFor bounds how long past the schedule's horizon a worker fault that
// could not be carried out at its time is retried.
const deferFor = 30 * time.Second

// workerFault carries out a kill, pause or partition through try, which
// returns why it could not ("" once done). Such a fault needs a second live
// worker and an idle one; when another fault holds them at the event's time,
// the fault is deferred and retried every 250ms until it can be carried out
// or the horizon plus [deferFor] has passed, so that a fault the schedule
// guarantees (one pause at least) is not lost to a moment's overlap.
func (r *run) workerFault(ctx context.Context, e Event, log *slog.Logger, try func(context.Context, Event, *slog.Logger) string) {
	why := try(ctx, e, log)
	if why == "" {
		return
	}
	log.Info("deferred", slog.String("why", why))
	r.faults.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if why = try(ctx, e, log); why == "" {
				return
			}
			if time.Now().After(r.deferUntil) {
				log.Info("skipped", slog.String("why", why))
				return
			}
		}
	})
}

// target picks (marks busy) the live, idle worker at slot for a kill or a
// pause, or returns nil and why none can take it: the fault would leave no
// live worker, or every live one is busy with another fault.
func (r *run) target(slot int) (*Proc, string) {
	if r.liveCount() < 2 {
		return nil, "it would leave no live worker"
	}
	if w := r.pick(slot); w != nil {
		return w, ""
	}
	return nil, "no idle worker"
}

// kill SIGKILLs a live, idle worker and starts it again after e.For.
func (r *run) kill(ctx context.Context, e Event, log *slog.Logger) string {
	w, why := r.target(e.Slot)
	if w == nil {
		return why
	}
	if err := w.Kill(); err != nil {
		log.Warn("kill", slog.Any("err", err))
	}
	r.mu.Lock()
	r.kills = append(r.kills, KillMark{Worker: w.Name, At: time.Now()})
	r.mu.Unlock()
	r.obs.MarkKill(10 * r.cfg.LeaseTTL)
	log.Info("killed", slog.String("worker", w.Name))
	r.later(ctx, w, e.For, log, "restart after kill", w.Start)
	return ""
}

// pause SIGSTOPs a live, idle worker and SIGCONTs it after e.For. A pause
// that fails is not retried: the worker is in a state the harness did not
// plan, and the log says so.
func (r *run) pause(ctx context.Context, e Event, log *slog.Logger) string {
	w, why := r.target(e.Slot)
	if w == nil {
		return why
	}
	if err := w.Pause(); err != nil {
		log.Warn("pause", slog.Any("err", err))
		r.idle(w)
		return ""
	}
	r.obs.MarkPause(e.For)
	log.Info("paused", slog.String("worker", w.Name))
	r.later(ctx, w, e.For, log, "resume", w.Resume)
	return ""
}

// later ends a fault in the background: after d it runs f (a restart, a
// resume), logs its error as what, and frees w for other faults.
func (r *run) later(ctx context.Context, w *Proc, d time.Duration, log *slog.Logger, what string, f func() error) {
	r.faults.Go(func() {
		defer r.idle(w)
		sleepCtx(ctx, d)
		if err := f(); err != nil {
			log.Warn(what, slog.Any("err", err))
		}
	})
}

// startSupervisor runs supervise until the returned function is called
// (more than once is fine); that function waits for it to return.
func (r *run) startSupervisor(ctx context.Context) func() {
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { r.supervise(sctx); close(done) }()
	return sync.OnceFunc(func() { cancel(); <-done })
}

// supervise restarts, every 500ms until ctx ends (the fault phase), a
// worker that exited on its own: one the harness is not killing, pausing,
// partitioning or removing. Users run `worker run` under a supervisor
// (Kubernetes, systemd's Restart=) that does so; `worker run` exits when it
// cannot start within 15s, as when the broker is down longer, and such a
// worker used to stay down until the drain while the faults scheduled
// meanwhile found no second live worker. Each restart is logged with the
// exit's error.
func (r *run) supervise(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, w := range r.exited() {
			exit := w.ExitErr()
			err := w.Start()
			r.idle(w)
			r.log.Warn("restarted: it had exited", slog.String("worker", w.Name), slog.Any("exit", exit),
				slog.String("log", w.LogPath), slog.Any("err", err))
		}
	}
}

// exited returns the workers that exited on their own (not removed, no fault
// in progress), marked busy until supervise has restarted them.
func (r *run) exited() []*Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ws []*Proc
	for _, w := range r.workers {
		if !r.removed[w] && !r.busy[w] && !w.Running() {
			r.busy[w] = true
			ws = append(ws, w)
		}
	}
	return ws
}

// reviveAll starts every worker that is down and was not removed on purpose,
// and continues any that is paused.
func (r *run) reviveAll() {
	r.mu.Lock()
	ws := append([]*Proc(nil), r.workers...)
	r.mu.Unlock()
	for _, w := range ws {
		r.mu.Lock()
		removed := r.removed[w]
		r.mu.Unlock()
		switch {
		case removed:
		case w.Paused():
			_ = w.Resume()
		case !w.Running():
			if err := w.Start(); err != nil {
				r.log.Warn("revive", slog.String("worker", w.Name), slog.Any("err", err))
			}
		}
	}
}

// makeJobs returns the run's distinct jobs; keys embed the seed so that runs
// never share keys.
func makeJobs(seed uint64, n int) []Job {
	rng := mrand.New(mrand.NewPCG(seed, 1))
	jobs := make([]Job, n)
	for i := range jobs {
		jobs[i] = Job{Key: fmt.Sprintf("chaos-%d-%06d", seed, i), Amount: 1 + rng.Int64N(100)}
	}
	return jobs
}

// enqueue produces every job once, paced at the configured rate, plus
// Duplicates*n extra records: half repeat a recent key (a producer retry),
// half re-send a key from the first tenth of the run (an old record
// redelivered after its job finished). A seeded SlowFraction of the jobs
// carry a hold of Hold between their charge and their fenced write.
func (r *run) enqueue(ctx context.Context, jobs []Job, start time.Time) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokerAddrs()...), kgo.DefaultProduceTopic(leasehold.DefaultTopic),
		kgo.RecordRetries(100), kgo.ProduceRequestTimeout(10*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	// The holds come from their own stream, so that the duplicate draws
	// below are those of a run without holds. A re-sent record carries its
	// job's hold: the payload, and so its fingerprint, is the job's.
	slow := mrand.New(mrand.NewPCG(r.cfg.Seed, 3))
	holds := make([]time.Duration, len(jobs))
	for i := range holds {
		if slow.Float64() < r.cfg.SlowFraction {
			holds[i] = r.cfg.Hold
		}
	}
	for _, i := range r.cancelIdx { // running when their cancel comes
		holds[i] = r.cfg.Hold
	}
	rng := mrand.New(mrand.NewPCG(r.cfg.Seed, 2))
	const batch = 50
	for i := 0; i < len(jobs); i += batch {
		var nj []leasehold.NewJob
		for k := i; k < min(i+batch, len(jobs)); k++ {
			nj = append(nj, transferJob(jobs[k], holds[k]))
		}
		for range len(nj) {
			if rng.Float64() >= r.cfg.Duplicates {
				continue
			}
			var d int
			if rng.IntN(2) == 0 || i < 10 {
				d = max(0, i-rng.IntN(min(i+1, 200)))
			} else {
				d = rng.IntN(max(1, len(jobs)/10))
				if r.cfg.Soak > 0 {
					// A re-send after the retention would be a new job:
					// re-send one finished within half of it.
					back := max(1, int(r.cfg.Retention.Seconds()*float64(r.cfg.Rate)/2))
					d = max(0, i-rng.IntN(min(i+1, back)))
				}
			}
			nj = append(nj, transferJob(jobs[d], holds[d]))
		}
		if _, err := leasehold.EnqueueBatch(ctx, cl, nj); err != nil {
			return fmt.Errorf("chaos: enqueue: %w", err)
		}
		// Pace: job i+batch is due at start + (i+batch)/rate.
		due := start.Add(time.Duration(i+batch) * time.Second / time.Duration(r.cfg.Rate))
		sleepCtx(ctx, time.Until(due))
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
	return nil
}

// transferJob is the record of job j, holding for hold (0: none) between
// its charge and its fenced write.
func transferJob(j Job, hold time.Duration) leasehold.NewJob {
	p, _ := json.Marshal(demo.TransferArgs{From: FromAccount(j.Key), To: ToAccount(j.Key), Amount: j.Amount,
		HoldMS: hold.Milliseconds()})
	return leasehold.NewJob{Type: demo.TransferType, Key: j.Key, Payload: p, Topic: leasehold.DefaultTopic}
}

// drain waits until every job's transfer is in PostgreSQL and the payment
// stub's ledger has stopped changing for three lease TTLs (compensations
// and recovery sweeps settle), or until the drain timeout. It returns the
// final ledger and how long the transfers took to be all in PostgreSQL
// (the drain timeout if they never were).
func (r *run) drain(ctx context.Context, jobs []Job) (paystub.Ledger, time.Duration, error) {
	pay := paystub.NewClient(r.stubURL, nil)
	begin := time.Now()
	deadline := begin.Add(r.cfg.Drain)
	var last paystub.Ledger
	var drained time.Duration
	stableSince, lastLog := time.Now(), time.Time{}
	for {
		var done int
		err := r.db.QueryRow(ctx, `SELECT count(*) FROM demo_transfers`).Scan(&done)
		if err != nil {
			return last, drained, fmt.Errorf("chaos: drain: %w", err)
		}
		if done < len(jobs) && r.ctl != nil {
			// A cancelled key may never write; a failed read is
			// read again at the next look.
			if absent, err := r.absentCancelled(ctx); err == nil {
				done += absent
			}
		}
		if done >= len(jobs) && drained == 0 {
			drained = time.Since(begin)
			r.log.Info("drain: every transfer in PostgreSQL", slog.Duration("after", drained))
		}
		if time.Since(lastLog) >= 2*time.Second && drained == 0 {
			// Whether a slow drain works off a backlog or stalls.
			r.log.Info("drain progress", slog.Int("transfers", done), slog.Int("jobs", len(jobs)),
				slog.Duration("after", time.Since(begin)))
			lastLog = time.Now()
		}
		l, err := pay.Ledger(ctx)
		if err != nil {
			return last, drained, fmt.Errorf("chaos: drain: %w", err)
		}
		if l.ChargeRequests != last.ChargeRequests || l.RefundRequests != last.RefundRequests {
			stableSince = time.Now()
		}
		last = l
		settled := time.Since(stableSince) > 3*r.cfg.LeaseTTL
		if done >= len(jobs) && settled {
			return last, drained, nil
		}
		if time.Now().After(deadline) {
			r.log.Warn("drain timeout", slog.Int("transfers", done), slog.Int("jobs", len(jobs)))
			r.drainLeft = max(len(jobs)-done, 0)
			r.logStuck(ctx, r.unfinished(ctx, jobs))
			return last, cmp.Or(drained, r.cfg.Drain), nil
		}
		sleepCtx(ctx, 250*time.Millisecond)
		if ctx.Err() != nil {
			return last, drained, context.Cause(ctx)
		}
	}
}

// unfinished returns the keys of jobs without a transfer row.
func (r *run) unfinished(ctx context.Context, jobs []Job) map[string]bool {
	left := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		left[j.Key] = true
	}
	rows, err := r.db.Query(ctx, `SELECT key FROM demo_transfers`)
	if err != nil {
		return left
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if rows.Scan(&k) == nil {
			delete(left, k)
		}
	}
	return left
}

// teardown stops every process and drops the schema (unless kept).
func (r *run) teardown(ctx context.Context) {
	r.mu.Lock()
	ws := append([]*Proc(nil), r.workers...)
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() { _ = w.Stop(10 * time.Second) })
	}
	wg.Wait()
	r.mu.Lock()
	for _, n := range r.nets {
		n.close()
	}
	r.mu.Unlock()
	for _, p := range []*Proc{r.stub, r.broker} {
		if p != nil {
			_ = p.Stop(5 * time.Second)
		}
	}
	r.kafka.stop(ctx)
	r.ctl.close(ctx)
	if r.redis != nil {
		_ = r.redis.Stop(5 * time.Second)
	}
	if r.db != nil {
		r.db.Close()
	}
	if r.schema != "" && !r.cfg.KeepSchema {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if admin, err := pgx.Connect(ctx, r.cfg.PostgresURL); err == nil {
			_, _ = admin.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{r.schema}.Sanitize()+" CASCADE")
			_ = admin.Close(ctx)
		}
	}
}

// waitTCP waits until addr accepts connections, p exits, or ctx ends.
func waitTCP(ctx context.Context, p *Proc, addr string) error {
	for {
		d := net.Dialer{Timeout: 200 * time.Millisecond}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("%w: %s exited (see %s): %w", ErrNotReady, p.Name, p.LogPath, p.ExitErr())
		case <-ctx.Done():
			return fmt.Errorf("%w: %s at %s: %w", ErrNotReady, p.Name, addr, context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// withSearchPath returns url with the search_path runtime parameter set, so
// that the workers' unqualified table names land in the run's schema.
func withSearchPath(raw, schema string) (string, error) {
	if _, err := pgx.ParseConfig(raw); err != nil {
		return "", fmt.Errorf("chaos: PostgreSQL URL: %w", err)
	}
	sep := "?"
	for i := range len(raw) {
		if raw[i] == '?' {
			sep = "&"
		}
	}
	return raw + sep + "search_path=" + schema, nil
}

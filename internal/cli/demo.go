package cli

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/freeport"
)

// demoConfig is what `worker demo` reads.
type demoConfig struct {
	redisURL  string
	jobs      int
	dup       float64
	workers   int
	conc      int
	leaseTTL  time.Duration
	minJob    time.Duration
	maxJob    time.Duration
	timeout   time.Duration
	plain     bool
	keepState bool
}

func cmdDemo(ctx context.Context, e *Env, args []string) error {
	f := newFlags(e, "demo", "")
	var c demoConfig
	f.stringVar(&c.redisURL, "redis", "REDIS_URL", "", "Redis URL; default 127.0.0.1:6379 if it answers, else a redis-server started on a free port")
	f.IntVar(&c.jobs, "jobs", 24, "distinct jobs, 4 to 1000")
	f.Float64Var(&c.dup, "dup", 0.25, "fraction of duplicate records")
	f.IntVar(&c.workers, "workers", 3, "workers in the group")
	f.IntVar(&c.conc, "concurrency", 4, "handlers per worker")
	f.DurationVar(&c.leaseTTL, "lease-ttl", 2*time.Second, "lease TTL")
	f.DurationVar(&c.minJob, "min-job", 2*time.Second, "shortest job")
	f.DurationVar(&c.maxJob, "max-job", 5*time.Second, "longest job")
	f.DurationVar(&c.timeout, "timeout", 100*time.Second, "give up after this long, more than 0")
	f.BoolVar(&c.plain, "plain", false, "print events line by line instead of redrawing the screen")
	f.BoolVar(&c.keepState, "keep", false, "keep the demo's Redis keys afterwards")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	switch {
	case c.jobs < 4 || c.jobs > 1000:
		// Below 4, the job whose lease is lost and the job that fails
		// once would be one job (or absent).
		return usagef("jobs %d: want 4 to 1000", c.jobs)
	case c.dup < 0 || c.dup > 1:
		return usagef("dup %v: want 0 to 1", c.dup)
	case c.workers < 1 || c.workers > 16:
		return usagef("workers %d: want 1 to 16", c.workers)
	case c.conc < 1 || c.conc > 64:
		return usagef("concurrency %d: want 1 to 64", c.conc)
	case c.minJob <= 0 || c.maxJob < c.minJob || c.maxJob > maxSleep:
		return usagef("job durations: want 0 < min-job <= max-job <= %v", maxSleep)
	case c.leaseTTL < 300*time.Millisecond:
		return usagef("lease TTL %v: want at least 300ms", c.leaseTTL)
	case c.timeout <= 0:
		return usagef("timeout %v: want more than 0", c.timeout)
	}
	return runDemo(ctx, e, c)
}

// demoRedis returns the demo's Redis: REDIS_URL, else the local default
// server, else a redis-server it starts on a free port (stopped by cleanup).
func demoRedis(ctx context.Context, url, localURL string) (redis.UniversalClient, string, func(), error) {
	if url != "" {
		c, err := openRedis(ctx, url)
		return c, "REDIS_URL " + redisHosts(url), func() {}, err
	}
	if c, err := openRedis(ctx, localURL); err == nil {
		return c, "local redis " + redisHosts(localURL), func() {}, nil
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, "", nil, errors.New("no Redis: 127.0.0.1:6379 does not answer, REDIS_URL is unset and redis-server is not on PATH")
	}
	port, err := freeport.Port(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	dir, err := os.MkdirTemp("", "leasehold-demo-redis-")
	if err != nil {
		return nil, "", nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}
	// The server lives as long as the demo: it is killed by stop, not by ctx.
	cmd := exec.CommandContext(context.WithoutCancel(ctx), bin, args...) //nolint:gosec // redis-server from PATH, fixed arguments
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", nil, fmt.Errorf("start redis-server: %w", err)
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}
	url = "redis://127.0.0.1:" + strconv.Itoa(port) + "/0"
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := openRedis(ctx, url)
		if err == nil {
			return c, "redis-server started on 127.0.0.1:" + strconv.Itoa(port), stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, "", nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func runDemo(ctx context.Context, e *Env, c demoConfig) error {
	rdb, redisWhere, stopRedis, err := demoRedis(ctx, c.redisURL, DefaultRedisURL)
	if err != nil {
		return err
	}
	defer stopRedis()
	defer func() { _ = rdb.Close() }()

	run := strings.ToLower(crand.Text()[:6])
	prefix := "lh:demo:" + run + ":"
	topic := "demo.jobs"
	kc, err := e.application().startEmbeddedKafka(ctx, "127.0.0.1:0", []topicSpec{{topic, 6}, {topic + ".dlq", 1}})
	if err != nil {
		return err
	}
	defer kc.Close()
	brokers := kc.ListenAddrs()

	v := newDemoView(e.Stdout, c.plain, e.Getenv)
	kept := "deletes them when it ends (--keep keeps them)"
	if c.keepState {
		kept = "keeps them afterwards (--keep)"
	}
	v.note("redis: %s; the demo writes only keys under the prefix %s there and %s", redisWhere, prefix, kept)
	v.note("kafka: embedded, in memory (kfake) on %s", brokers[0])

	// The plan: jobs, duplicates (some right behind their original, so that
	// they find the key held; some later, replayed), one job that fails once
	// and is retried, one record nobody handles (dead-lettered), and one job
	// whose lease the demo expires while it runs.
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	type planned struct {
		key string
		job SleepJob
	}
	var plan []planned
	for i := range c.jobs {
		d := c.minJob + time.Duration(rng.Int64N(int64(c.maxJob-c.minJob)+1))
		plan = append(plan, planned{key: fmt.Sprintf("job-%s-%02d", run, i), job: SleepJob{DurationMS: int(d.Milliseconds()), Steps: 10, Reserve: true}})
	}
	retryKey := plan[len(plan)/2].key
	plan[len(plan)/2].job.FailAt = 4
	lostKey := plan[1].key
	plan[1].job.DurationMS = int(max(c.maxJob, 4*c.leaseTTL).Milliseconds())

	dups := int(float64(c.jobs) * c.dup)
	v.setPlan(c.jobs, dups, lostKey, retryKey)

	var lostOnce sync.Once
	expireLost := func(_ context.Context, j *leasehold.Job) {
		if j.Key != lostKey || j.Takeover {
			return
		}
		lostOnce.Do(func() {
			go func() {
				time.Sleep(c.leaseTTL)
				expireForDemo(ctx, rdb, prefix, j.Key, v)
			}()
		})
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := compensation.NewRegistry()
	if err := registerDemoCompensations(reg, func(ctx context.Context, a ReleaseArgs) { v.released(ctx, a) }); err != nil {
		return err
	}
	var workers []*leasehold.Worker
	stopAll := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		sctx, stopForce := untilForced(sctx, e.Force) // a second signal cuts the drain short
		defer stopForce()
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() { defer wg.Done(); _ = w.Shutdown(sctx) }()
		}
		wg.Wait()
	}
	for i := range c.workers {
		name := fmt.Sprintf("w%d", i+1)
		hooks := v.hooks(name)
		hooks.OnStart = chainStart(hooks.OnStart, expireLost)
		w, err := leasehold.New(rdb,
			leasehold.WithKafka(kgo.SeedBrokers(brokers...), kgo.ClientID("demo-"+name)),
			leasehold.WithTopics(topic),
			leasehold.WithGroup("demo-"+run),
			leasehold.WithKeyPrefix(prefix),
			leasehold.WithLeaseTTL(c.leaseTTL),
			leasehold.WithRetention(10*time.Minute),
			leasehold.WithConcurrency(c.conc),
			leasehold.WithHeartbeatThrottle(200*time.Millisecond),
			leasehold.WithHeldBackoff(100*time.Millisecond, time.Second),
			leasehold.WithShutdownTimeout(5*time.Second),
			leasehold.WithCommitInterval(500*time.Millisecond),
			leasehold.WithLogger(log),
			leasehold.WithHooks(hooks),
			leasehold.WithCompensation(reg, compensation.WithSweepInterval(time.Second)),
		)
		if err != nil {
			stopAll()
			return err
		}
		if err := registerDemoJobs(w); err != nil {
			stopAll()
			return err
		}
		if err := w.Start(ctx); err != nil {
			stopAll()
			return err
		}
		v.addWorker(name, w)
		workers = append(workers, w)
	}
	defer stopAll()

	// Produce: originals in a shuffled order; each duplicate goes either
	// right behind its original (held while it runs) or at the end
	// (replayed from the cached result).
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer prod.Close()
	var recs []*kgo.Record
	var late []*kgo.Record
	mk := func(p planned) *kgo.Record {
		b, _ := json.Marshal(p.job)
		r, _ := leasehold.KafkaRecord(ctx, leasehold.NewJob{Type: "demo.sleep", Key: p.key, Payload: b})
		return r
	}
	for i, p := range plan {
		recs = append(recs, mk(p))
		if i < dups {
			if i%2 == 0 {
				recs = append(recs, mk(p))
			} else {
				late = append(late, mk(p))
			}
		}
	}
	poison, _ := leasehold.KafkaRecord(ctx, leasehold.NewJob{Type: "demo.unknown", Key: "poison-" + run})
	recs = append(recs, poison)
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	v.note("produced %d jobs, %d duplicates (half right behind the original, half later), 1 poison record", c.jobs, dups)

	lateSent := false
	deadline := time.NewTimer(c.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var outcome error
loop:
	for {
		select {
		case <-ctx.Done():
			v.note("interrupted: draining (a second Ctrl-C cancels the running jobs)")
			outcome = ctx.Err()
			break loop
		case <-deadline.C:
			outcome = fmt.Errorf("the demo did not finish within %v", c.timeout)
			break loop
		case <-tick.C:
			v.draw()
			if !lateSent && v.completedCount() >= c.jobs/2 {
				lateSent = true
				if len(late) > 0 {
					if err := prod.ProduceSync(ctx, late...).FirstErr(); err != nil {
						outcome = fmt.Errorf("produce: %w", err)
						break loop
					}
				}
			}
			if lateSent && v.finished() {
				break loop
			}
		}
	}
	drawWhile(v, 200*time.Millisecond, stopAll) // the view keeps moving while the workers drain
	v.draw()
	v.totals()
	if !c.keepState {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		deletePrefix(cctx, rdb, prefix)
		cancel()
	}
	if errors.Is(outcome, context.Canceled) {
		return nil
	}
	return outcome
}

// drawWhile redraws v every interval while fn runs.
func drawWhile(v *demoView, every time.Duration, fn func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				v.draw()
			}
		}
	}()
	fn()
	close(done)
	wg.Wait()
}

func chainStart(a, b func(context.Context, *leasehold.Job)) func(context.Context, *leasehold.Job) {
	return func(ctx context.Context, j *leasehold.Job) {
		if a != nil {
			a(ctx, j)
		}
		b(ctx, j)
	}
}

// expireForDemo makes a running job's lease expire, as `worker expire` does:
// it names the key's lease directly (no SCAN, which on a crowded Redis may
// not reach it in time).
func expireForDemo(ctx context.Context, rdb redis.UniversalClient, prefix, key string, v *demoView) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	in := inspect.New(rdb, inspect.WithPrefix(prefix), inspect.WithStoreOptions(idempotency.WithMaxKeyLen(leasehold.MaxKeyLen)))
	defer func() { _ = in.Close(ctx) }()
	l, err := in.Expire(ctx, key, 0)
	switch {
	case errors.Is(err, inspect.ErrNoLease):
		v.note("the lease of %s was not found to expire", key)
	case err != nil:
		v.note("could not expire the lease of %s: %v", key, err)
	default:
		v.note("expired the lease of %s (fence %d) while it runs, as the expire command would", key, l.Fence)
	}
}

// deletePrefix removes the demo's keys (best effort).
func deletePrefix(ctx context.Context, rdb redis.UniversalClient, prefix string) {
	del := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, escapeGlob(prefix)+"*", 500).Iterator()
		for it.Next(ctx) {
			_ = c.Unlink(ctx, it.Val()).Err()
		}
		return it.Err()
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return del(ctx, n) })
		return
	}
	_ = del(ctx, rdb)
}

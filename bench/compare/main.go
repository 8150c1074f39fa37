// Command compare runs the same work on leasehold and on its peers, one
// after the other and alternating, in one run on one machine, and prints one
// figure a line (name=value unit):
//
//	leasehold_jobs_per_s              the worker (embedded Kafka in a child process, concurrency -concurrency, no-op handler)
//	leasehold_worker_cpu_us_per_job   the worker process's CPU per job (the broker's is not counted)
//	leasehold_worker_allocs_per_job   heap allocations of the worker process per job (runtime/metrics /gc/heap/allocs:objects: tiny objects count by their 16-byte blocks)
//	leasehold_redis_cpu_us_per_job    Redis CPU per job (INFO cpu, used_cpu_user + used_cpu_sys)
//	leasehold_redis_bound_jobs_per_s  the jobs per second one Redis core allows at that cost
//	leasehold_broker_cpu_us_per_job   the embedded broker child's CPU per job (/proc/<pid>/stat, 10 ms ticks)
//	leasehold_all_cpu_us_per_job      worker + Redis + broker CPU per job: what the run costs the machine
//	leasehold_cpu_bound_jobs_per_s    the jobs per second the machine's cores allow at that cost (asynq_cpu_bound_jobs_per_s: its worker + Redis)
//	asynq_jobs_per_s ...              asynq (Unique + TaskID as its idempotency), same concurrency
//	dbos_jobs_per_s ...               DBOS Transact: a workflow with one step per job, workflow ID = key, on PostgreSQL
//	setnx_jobs_per_s ...              the common SET NX pattern (SET NX PROCESSING, job, SET COMPLETED)
//	leasehold_vs_asynq                leasehold_jobs_per_s / asynq_jobs_per_s, from the same round (also _vs_dbos, _vs_setnx)
//	leasehold_vs_asynq_cpu_per_job    asynq's worker + Redis CPU per job / leasehold's, from the same round
//	longjobs_worker_cpu_pct           -long-jobs jobs held in one worker, each calling Heartbeat every -long-heartbeat: process CPU, percent of one core
//	longjobs_redis_cpu_pct            Redis CPU during the same window, percent of one core
//	longjobs_hold_*                   the same without Heartbeat calls (lease upkeep alone)
//	longjobs_wake_*                   handlers that wake every -long-heartbeat but call nothing (their timers' cost)
//	longjobs_heartbeat_worker_cpu_pct longjobs_worker_cpu_pct - longjobs_wake_worker_cpu_pct: what the Heartbeat calls cost the worker
//	longjobs_asynq_*                  asynq holding as many tasks at that concurrency
//
// Throughput figures are measured in steady state: between -warm of the jobs
// done and the last one, so that group joins, connection pools and script
// loads are not counted; each is the median of -rounds rounds, and each round
// runs every system once, in turn. The program starts a private redis-server
// (on PATH) and flushes it between runs; DBOS gets a fresh database on the
// PostgreSQL at -pg.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/benchkit"
)

type config struct {
	rounds                       int
	n, asynqN, dbosN, setnxN     int
	bareN                        int
	warm                         float64
	conc, partitions             int
	pg                           string
	long                         longCfg
	skipLong, skipDBOS, cmdstats bool
	only                         string
	kafka, kafkaBrokers          string
	cpuprofile                   string
	memprofile                   string
	table                        string
}

func main() {
	if spec := os.Getenv(brokerEnv); spec != "" {
		if err := runBroker(spec); err != nil {
			log.Fatalf("broker: %v", err)
		}
		return
	}
	var c config
	flag.IntVar(&c.rounds, "rounds", 3, "rounds; each runs every system once, in turn")
	flag.IntVar(&c.n, "n", 150_000, "leasehold jobs a round")
	flag.IntVar(&c.asynqN, "asynq-n", 60_000, "asynq jobs a round")
	flag.IntVar(&c.dbosN, "dbos-n", 3_000, "DBOS workflows a round")
	flag.IntVar(&c.setnxN, "setnx-n", 100_000, "SET NX jobs a round")
	flag.IntVar(&c.bareN, "bare-n", 1_000_000, "records the bare consumer reads a round (-kafka apache; it reads them ~50 times faster than leasehold runs jobs)")
	flag.Float64Var(&c.warm, "warm", 0.1, "fraction of each run's jobs done before the measured window opens")
	flag.IntVar(&c.conc, "concurrency", 64, "jobs run at once, for every system")
	flag.IntVar(&c.partitions, "partitions", 6, "partitions of the leasehold topic")
	flag.StringVar(&c.pg, "pg", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL for DBOS (a database named leasehold_compare is created there)")
	flag.IntVar(&c.long.jobs, "long-jobs", 10_000, "long jobs held at once")
	flag.DurationVar(&c.long.ttl, "long-ttl", 30*time.Second, "lease TTL of the long jobs")
	flag.DurationVar(&c.long.heartbeat, "long-heartbeat", 5*time.Second, "interval between a long job's Heartbeat calls")
	flag.DurationVar(&c.long.warm, "long-warm", 10*time.Second, "time after every long job started before the window")
	flag.DurationVar(&c.long.window, "long-window", 30*time.Second, "measured window of the long-job scenario")
	flag.StringVar(&c.long.profile, "long-cpuprofile", "", "write a CPU profile of the measured window of the long-job scenario (with heartbeats) to this file")
	flag.BoolVar(&c.skipLong, "skip-long", false, "skip the long-job scenario")
	flag.BoolVar(&c.skipDBOS, "skip-dbos", false, "skip DBOS (no PostgreSQL)")
	flag.BoolVar(&c.cmdstats, "commandstats", false, "also print Redis calls per leasehold job, by command (INFO commandstats)")
	flag.StringVar(&c.only, "only", "", "run only these systems (comma-separated: leasehold,asynq,dbos,setnx,long; with -kafka apache: leasehold,bare_consumer,setnx)")
	flag.StringVar(&c.kafka, "kafka", "kfake", "the broker: kfake (embedded, in a child process) or apache (Apache Kafka: leasehold, a bare consumer and the SET NX pattern on it)")
	flag.StringVar(&c.kafkaBrokers, "kafka-brokers", "", "with -kafka apache: the brokers to use (comma-separated; default: start one from $KAFKA_LIBS)")
	flag.IntVar(&shards, "shards", 0, "shards of leasehold's store (idempotency.WithShards; 0: the default, idempotency.DefaultShards), to measure what the shard count costs")
	flag.IntVar(&windows, "windows", 0, "windows leasehold's store cuts its retention into (idempotency.WithWindows; 0: the default, 2): a claim looks up windows+1 buckets, to measure what that costs")
	flag.IntVar(&historyLen, "history", idempotency.DefaultHistory, "attempts leasehold's store keeps per key (idempotency.WithHistory; 0: no history writes, to measure what they cost)")
	flag.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.StringVar(&c.memprofile, "memprofile", "", "write an allocation profile of the whole run to this file (at its end)")
	flag.StringVar(&c.table, "table", "", "rewrite the section between the make-compare markers of this Markdown file with this run's figures")
	flag.Parse()
	if c.rounds < 1 || c.n < 100 || c.asynqN < 100 || c.dbosN < 100 || c.setnxN < 100 || c.bareN < 100 || c.conc < 1 ||
		c.warm < 0 || c.warm >= 1 || c.long.jobs < 1 || (c.kafka != "kfake" && c.kafka != "apache") ||
		(c.kafkaBrokers != "" && c.kafka != "apache") {
		fmt.Fprintln(os.Stderr, "compare: want -rounds >= 1, job counts >= 100, -concurrency >= 1, 0 <= -warm < 1, -long-jobs >= 1, "+
			"-kafka kfake or apache (-kafka-brokers only with -kafka apache)")
		os.Exit(2)
	}
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// figure is one measured value of one round.
type figure struct {
	name, unit string
	prec       int
	vals       []float64
}

type figures struct {
	order []string
	by    map[string]*figure
}

func (f *figures) add(name string, v float64, prec int, unit string) {
	if f.by == nil {
		f.by = make(map[string]*figure)
	}
	g, ok := f.by[name]
	if !ok {
		g = &figure{name: name, unit: unit, prec: prec}
		f.by[name] = g
		f.order = append(f.order, name)
	}
	g.vals = append(g.vals, v)
}

func (f *figures) vals(name string) []float64 {
	if g, ok := f.by[name]; ok {
		return g.vals
	}
	return nil
}

// median returns a figure's median over the rounds.
func (f *figures) median(name string) (float64, bool) {
	v := slices.Clone(f.vals(name))
	if len(v) == 0 {
		return 0, false
	}
	slices.Sort(v)
	return v[len(v)/2], true
}

// print writes each figure's median over the rounds.
func (f *figures) print(out *benchkit.Figures) {
	for _, name := range f.order {
		v, _ := f.median(name)
		out.Float(name, v, f.by[name].prec, f.by[name].unit)
	}
}

func (c config) runs(name string) bool {
	return c.only == "" || slices.Contains(strings.Split(c.only, ","), name)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

func run(ctx context.Context, c config) error {
	srv, err := benchkit.StartRedis("") //nolint:contextcheck // it bounds its own wait for the server
	if err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	defer srv.Stop()
	addr := srv.Addr()
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 4 * c.conc})
	defer func() { _ = rdb.Close() }()
	if c.kafka == "apache" {
		return runApache(ctx, c, rdb)
	}
	var dbURL string
	if !c.skipDBOS && c.runs("dbos") {
		if dbURL, err = dbosDatabase(ctx, c.pg, "leasehold_compare"); err != nil {
			return err
		}
	}
	if c.cpuprofile != "" {
		f, err := os.Create(c.cpuprofile)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if c.memprofile != "" {
		defer writeHeapProfile(c.memprofile)
	}
	out := benchkit.NewFigures(os.Stdout)
	h, err := startConditions(ctx, rdb, out)
	if err != nil {
		return err
	}
	var f figures
	warm := func(n int) int { return int(c.warm * float64(n)) }
	for r := range c.rounds {
		if err := round(ctx, c, &f, rdb, addr, dbURL, r, warm); err != nil {
			return err
		}
	}
	if c.runs("long") && !c.skipLong {
		if err := longRound(ctx, c, &f, rdb, addr); err != nil {
			return err
		}
	}
	f.print(out)
	out.Int("rounds", int64(c.rounds), "")
	if err := h.end(ctx, rdb, out); err != nil {
		return err
	}
	if err := out.Err(); err != nil {
		return err
	}
	if c.table != "" {
		return writeTable(c.table, &f, h, os.Args[1:])
	}
	return nil
}

func mustFloat(s string) float64 {
	var v float64
	_, _ = fmt.Sscan(s, &v)
	return v
}

// round runs every system once, in turn, starting with a different one each
// round so that none always runs first.
func round(ctx context.Context, c config, f *figures, rdb *redis.Client, addr, dbURL string, r int, warm func(int) int) error {
	type system struct {
		name string
		n    int
		do   func() (window, error)
	}
	systems := []system{
		{"leasehold", c.n, func() (window, error) {
			return leaseholdRun(ctx, rdb, r, c.n, warm(c.n), c.partitions, c.conc)
		}},
		{"asynq", c.asynqN, func() (window, error) { return asynqRun(ctx, rdb, addr, r, c.asynqN, warm(c.asynqN), c.conc) }},
		{"dbos", c.dbosN, func() (window, error) { return dbosRun(ctx, dbURL, r, c.dbosN, warm(c.dbosN), c.conc) }},
		{"setnx", c.setnxN, func() (window, error) { return setnxRun(ctx, rdb, r, c.setnxN, warm(c.setnxN), c.conc) }},
	}
	k := r % len(systems)
	systems = append(systems[k:], systems[:k]...)
	rate := make(map[string]float64)
	cpu := make(map[string]float64) // worker + Redis CPU per job, µs (DBOS: the worker's only)
	for _, s := range systems {
		if !c.runs(s.name) || (s.name == "dbos" && c.skipDBOS) {
			continue
		}
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			return err
		}
		var before map[string]cmdStat
		if c.cmdstats && s.name == "leasehold" {
			_ = rdb.ConfigResetStat(ctx).Err()
		}
		w, err := s.do()
		if err != nil {
			return fmt.Errorf("%s, round %d: %w", s.name, r+1, err)
		}
		jobs := s.n - warm(s.n)
		rate[s.name] = float64(jobs) / w.wall.Seconds()
		proc, red := w.perJob(jobs)
		f.add(s.name+"_jobs_per_s", rate[s.name], 0, "jobs/s")
		f.add(s.name+"_worker_cpu_us_per_job", proc, 1, "us")
		f.add(s.name+"_worker_allocs_per_job", float64(w.allocs)/float64(jobs), 1, "objects")
		if s.name != "dbos" {
			f.add(s.name+"_redis_cpu_us_per_job", red, 1, "us")
		}
		cpu[s.name] = proc + red
		if s.name == "asynq" {
			f.add("asynq_cpu_bound_jobs_per_s", float64(runtime.NumCPU())*1e6/(proc+red), 0, "jobs/s")
		}
		if s.name == "leasehold" {
			f.add("leasehold_redis_bound_jobs_per_s", 1e6/red, 0, "jobs/s")
			broker := float64(w.child.Microseconds()) / float64(jobs)
			all := proc + red + broker
			f.add("leasehold_broker_cpu_us_per_job", broker, 1, "us")
			f.add("leasehold_all_cpu_us_per_job", all, 1, "us")
			f.add("leasehold_cpu_bound_jobs_per_s", float64(runtime.NumCPU())*1e6/all, 0, "jobs/s")
			if c.cmdstats {
				if before, err = commandStats(ctx, rdb); err != nil {
					return err
				}
				for _, cmd := range slices.Sorted(maps.Keys(before)) {
					st, name := before[cmd], strings.ReplaceAll(cmd, "|", "_")
					if st.calls < int64(s.n)/100 {
						continue
					}
					f.add("leasehold_calls_per_job_"+name, float64(st.calls)/float64(s.n), 2, "calls")
					f.add("leasehold_usec_per_job_"+name, float64(st.usec)/float64(s.n), 2, "us")
				}
			}
		}
	}
	for _, peer := range []string{"asynq", "dbos", "setnx"} {
		if lh, p := rate["leasehold"], rate[peer]; lh > 0 && p > 0 {
			f.add("leasehold_vs_"+peer, lh/p, 1, "x")
		}
	}
	if lh, p := cpu["leasehold"], cpu["asynq"]; lh > 0 && p > 0 {
		// On a machine whose cores are all busy, the rates compare as these do.
		f.add("leasehold_vs_asynq_cpu_per_job", p/lh, 1, "x")
	}
	return nil
}

// longRound runs the long-job scenario: leasehold with heartbeats, asynq
// holding as many tasks, leasehold holding leases alone, and leasehold with
// handlers that wake as often as the heartbeating ones but call nothing (the
// difference to the first is what Heartbeat costs).
func longRound(ctx context.Context, c config, f *figures, rdb *redis.Client, addr string) error {
	f.add("longjobs_jobs", float64(c.long.jobs), 0, "jobs")
	runs := []struct {
		name string
		do   func() (window, error)
	}{
		{"longjobs", func() (window, error) { return leaseholdLong(ctx, rdb, 0, c.long) }},
		{"longjobs_asynq", func() (window, error) {
			aq := c.long
			aq.profile = ""
			return asynqLong(ctx, rdb, addr, 0, aq)
		}},
		{"longjobs_hold", func() (window, error) {
			hold := c.long
			hold.heartbeat, hold.profile = 0, ""
			return leaseholdLong(ctx, rdb, 1, hold)
		}},
		{"longjobs_wake", func() (window, error) {
			wake := c.long
			wake.wakeOnly, wake.profile = true, ""
			return leaseholdLong(ctx, rdb, 2, wake)
		}},
	}
	worker := map[string]float64{}
	for _, r := range runs {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			return err
		}
		w, err := r.do()
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		proc, red := w.pct()
		worker[r.name] = proc
		f.add(r.name+"_worker_cpu_pct", proc, 2, "%")
		f.add(r.name+"_redis_cpu_pct", red, 2, "%")
	}
	f.add("longjobs_heartbeat_worker_cpu_pct", worker["longjobs"]-worker["longjobs_wake"], 2, "%")
	return nil
}

// writeHeapProfile writes the allocation profile (alloc_space and
// alloc_objects cover the whole run) to file, reporting a failure on stderr.
func writeHeapProfile(file string) {
	f, err := os.Create(file) //nolint:gosec // a path the user gave
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "memprofile:", err)
	}
}

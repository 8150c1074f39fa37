// Command flood measures a worker under a flood of records it cannot finish
// yet: copies of an idempotency key that another worker holds (its job runs
// until the flood has been fetched), and records queued behind a busy
// ordering key (WithOrderedKeys). The flooded worker runs in a child process
// of its own, so that its resident memory is its own: this process runs
// the embedded Kafka (kfake), a private redis-server, the producer and the
// holder. For each scenario it prints, one figure a line:
//
//	<scenario>_rss_start=... MB        the worker's RSS once started
//	<scenario>_rss_peak_held=... MB    its highest RSS (VmHWM) while the key was held
//	<scenario>_rss_peak=... MB         its highest RSS until the offsets reached the end
//	<scenario>_rss_growth=... MB       peak minus start
//	<scenario>_redis_cmds_per_s=... /s Redis commands a second while the key is held
//	<scenario>_redis_scripts_per_s=... /s of which script calls (claims; the holder's renewals)
//	<scenario>_drain_s=... s           from the holder's end to the offsets at the end
//
// Scenarios (-scenarios): held (-held-n copies of -held-size bytes of one
// held key), small (-small-n copies of -small-size bytes), ordered (-held-n
// records of -held-size bytes behind one ordering key whose first record's
// key is held). -window is how long the key stays held.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/benchkit"
)

const (
	jobType   = "flood.job"
	heldKey   = "flood-held"
	floodTop  = "flood.jobs"
	holderTop = "flood.holder"
)

type params struct {
	scenarios          string
	heldN, heldSize    int
	smallN, smallSize  int
	window             time.Duration
	budgetMiB, records int
}

func main() {
	var p params
	role := flag.String("role", "", "internal: \"worker\" runs the flooded worker")
	flag.StringVar(&p.scenarios, "scenarios", "held,small,ordered", "scenarios to run, comma-separated: held, small, ordered")
	flag.IntVar(&p.heldN, "held-n", 1500, "records of the held and ordered scenarios")
	flag.IntVar(&p.heldSize, "held-size", 100<<10, "bytes of each record of the held and ordered scenarios")
	flag.IntVar(&p.smallN, "small-n", 50000, "records of the small scenario")
	flag.IntVar(&p.smallSize, "small-size", 1<<10, "bytes of each record of the small scenario")
	flag.DurationVar(&p.window, "window", 5*time.Second, "how long the key stays held once the worker started")
	flag.IntVar(&p.budgetMiB, "budget-mib", 0, "the worker's memory budget in MiB (0: the default)")
	flag.IntVar(&p.records, "max-held-records", 0, "the worker's record budget (0: the default)")
	brokers := flag.String("brokers", "", "internal: the worker's brokers")
	redisAddr := flag.String("redis", "", "internal: the worker's Redis")
	prefix := flag.String("prefix", "", "internal: the worker's key prefix")
	ordered := flag.Bool("ordered", false, "internal: the worker orders by record key")
	flag.Parse()
	var err error
	if *role == "worker" {
		err = worker(*brokers, *redisAddr, *prefix, *ordered, p)
	} else {
		err = run(p)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func run(p params) error {
	rs, err := benchkit.StartRedis("")
	if err != nil {
		return err
	}
	defer rs.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer func() { _ = rdb.Close() }()
	fig := benchkit.NewFigures(os.Stdout)
	for _, sc := range strings.Split(p.scenarios, ",") {
		n, size := p.heldN, p.heldSize
		switch sc {
		case "small":
			n, size = p.smallN, p.smallSize
		case "held", "ordered":
		default:
			return fmt.Errorf("unknown scenario %q: want held, small or ordered", sc)
		}
		if err := scenario(sc, n, size, p, rs.Addr(), rdb, fig); err != nil {
			return fmt.Errorf("%s: %w", sc, err)
		}
	}
	return fig.Err()
}

// scenario floods a fresh embedded Kafka with n records of size bytes, holds
// the key with a worker of this process, starts the flooded worker, measures
// it for the window, lets the holder finish and waits for the offsets.
func scenario(name string, n, size int, p params, redisAddr string, rdb *redis.Client, fig *benchkit.Figures) error {
	ctx := context.Background()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, floodTop, floodTop+".dlq", holderTop, holderTop+".dlq"))
	if err != nil {
		return err
	}
	defer kc.Close()
	brokers := kc.ListenAddrs()
	prefix := benchkit.KeyPrefix("flood:")
	release := make(chan struct{})
	payload := bytes.Repeat([]byte("f"), size)
	stopHolder, err := hold(ctx, brokers, rdb, prefix, payload, release)
	if err != nil {
		return err
	}
	defer stopHolder()
	if err := produce(ctx, brokers, name, n, payload); err != nil {
		return err
	}
	args := []string{"-role=worker", "-brokers=" + strings.Join(brokers, ","), "-redis=" + redisAddr, "-prefix=" + prefix,
		"-ordered=" + strconv.FormatBool(name == "ordered"), "-budget-mib=" + strconv.Itoa(p.budgetMiB),
		"-max-held-records=" + strconv.Itoa(p.records)}
	cmd := exec.CommandContext(ctx, os.Args[0], args...) //nolint:gosec // this program, run again as the worker
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		return fmt.Errorf("the worker did not start: %w", err)
	} else if line != "started\n" {
		return fmt.Errorf("the worker did not start: it printed %q", line)
	}
	start, _, err := rss(cmd.Process.Pid)
	if err != nil {
		return err
	}
	cmds0, scripts0, err := redisCalls(ctx, rdb)
	if err != nil {
		return err
	}
	time.Sleep(p.window)
	cmds1, scripts1, err := redisCalls(ctx, rdb)
	if err != nil {
		return err
	}
	_, heldPeak, err := rss(cmd.Process.Pid)
	if err != nil {
		return err
	}
	close(release)
	released := time.Now()
	if err := waitCommitted(ctx, brokers, int64(n)); err != nil {
		return err
	}
	drain := time.Since(released)
	_, peak, err := rss(cmd.Process.Pid)
	if err != nil {
		return err
	}
	secs := p.window.Seconds()
	fig.Float(name+"_rss_start", float64(start)/(1<<20), 1, "MB")
	fig.Float(name+"_rss_peak_held", float64(heldPeak)/(1<<20), 1, "MB")
	fig.Float(name+"_rss_peak", float64(peak)/(1<<20), 1, "MB")
	fig.Float(name+"_rss_growth", float64(peak-start)/(1<<20), 1, "MB")
	fig.Float(name+"_redis_cmds_per_s", float64(cmds1-cmds0)/secs, 1, "/s")
	fig.Float(name+"_redis_scripts_per_s", float64(scripts1-scripts0)/secs, 1, "/s")
	fig.Float(name+"_drain_s", drain.Seconds(), 2, "s")
	return nil
}

// hold runs a worker that takes the held key (with the flood's payload)
// and keeps its job running until release is closed.
func hold(ctx context.Context, brokers []string, rdb *redis.Client, prefix string, payload []byte, release <-chan struct{}) (func(), error) {
	w, err := leasehold.New(rdb, leasehold.WithKafka(kgo.SeedBrokers(brokers...)), leasehold.WithTopics(holderTop),
		leasehold.WithGroup("flood-holder"), leasehold.WithKeyPrefix(prefix), leasehold.WithShutdownTimeout(time.Second),
		leasehold.WithLogger(benchLogger()))
	if err != nil {
		return nil, err
	}
	running := make(chan struct{})
	if err := w.Register(jobType, func(ctx context.Context, _ *leasehold.Job) ([]byte, error) {
		close(running)
		select {
		case <-release:
			return []byte("done"), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}); err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_ = w.Shutdown(sctx)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(holderTop))
	if err != nil {
		stop()
		return nil, err
	}
	defer cl.Close()
	if _, err := leasehold.Enqueue(ctx, cl, leasehold.NewJob{Type: jobType, Key: heldKey, Payload: payload}); err != nil {
		stop()
		return nil, err
	}
	<-running
	return stop, nil
}

// produce writes the flood: copies of the held key (held, small), or records
// behind one ordering key whose first record's key is the held one (ordered).
func produce(ctx context.Context, brokers []string, name string, n int, payload []byte) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(floodTop),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	const chunk = 500
	for i := 0; i < n; i += chunk {
		recs := make([]*kgo.Record, 0, chunk)
		for j := i; j < min(i+chunk, n); j++ {
			job := leasehold.NewJob{Type: jobType, Key: heldKey, Payload: payload}
			if name == "ordered" {
				job.PartitionKey = []byte("one-customer")
				if j > 0 {
					job.Key = fmt.Sprintf("ordered-%d", j)
				}
			}
			r, err := leasehold.KafkaRecord(ctx, job)
			if err != nil {
				return err
			}
			recs = append(recs, r)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
	}
	return nil
}

// worker is the flooded worker (run as a child process): it prints
// "started" once started and runs until killed.
func worker(brokers, redisAddr, prefix string, ordered bool, p params) error {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	w, err := leasehold.New(rdb, leasehold.WithKafka(kgo.SeedBrokers(strings.Split(brokers, ",")...)),
		leasehold.WithTopics(floodTop), leasehold.WithGroup("flood"), leasehold.WithKeyPrefix(prefix),
		leasehold.WithOrderedKeys(ordered), leasehold.WithCommitInterval(200*time.Millisecond),
		leasehold.WithMemoryBudget(int64(p.budgetMiB)<<20, p.records), leasehold.WithLogger(benchLogger()))
	if err != nil {
		return err
	}
	if err := w.Register(jobType, func(context.Context, *leasehold.Job) ([]byte, error) { return nil, nil }); err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	fmt.Println("started")
	select {}
}

// rss reads a process's resident set size and its peak (VmRSS, VmHWM).
func rss(pid int) (now, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			now = v << 10
		case "VmHWM:":
			peak = v << 10
		}
	}
	if now == 0 || peak == 0 {
		return 0, 0, errors.New("no VmRSS or VmHWM in /proc/PID/status")
	}
	return now, peak, nil
}

// redisCalls returns the commands the private Redis processed and, of
// them, the script calls (EVALSHA and EVAL).
func redisCalls(ctx context.Context, rdb *redis.Client) (cmds, scripts int64, err error) {
	info, err := rdb.Info(ctx, "stats", "commandstats").Result()
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		switch {
		case !ok:
		case k == "total_commands_processed":
			cmds, _ = strconv.ParseInt(v, 10, 64)
		case k == "cmdstat_evalsha" || k == "cmdstat_eval":
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			c, _ := strconv.ParseInt(calls, 10, 64)
			scripts += c
		}
	}
	return cmds, scripts, nil
}

// waitCommitted waits until the flooded worker's group committed n records
// (the flood topic's one partition, to its end).
func waitCommitted(ctx context.Context, brokers []string, n int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		offs, err := adm.FetchOffsets(ctx, "flood")
		if err == nil {
			if o, ok := offs.Lookup(floodTop, 0); ok && o.At >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("offsets never reached %d: %w", n, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// benchLogger logs warnings and errors only, on stderr.
func benchLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Command worker measures the worker end to end: an embedded Kafka (kfake)
// and the local Redis (REDIS_URL, default redis://127.0.0.1:6379/0), a topic
// of distinct jobs, and a no-op handler. Every record is claimed in Redis
// (batched per poll), run, completed with a fenced write and committed.
// The same topic is then consumed by plain franz-go (no idempotency, no
// leases) for comparison. It prints one figure a line:
//
//	worker_msgs_per_s=... msg/s
//	raw_msgs_per_s=... msg/s
//	worker_vs_raw_ratio=...
//	worker_allocs_per_job=... objects
//	raw_allocs_per_msg=... objects
//
// The allocation figures are runtime.MemStats.Mallocs over each run divided
// by the records: the whole process, so the embedded broker's allocations
// serving the records are counted in both; their difference is about what
// the library allocates a job. -cpuprofile and -memprofile write profiles of
// the worker's run (the memory profile: allocations, sampled).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/benchkit"
	"github.com/leasehold/leasehold/internal/testkit"
)

func main() {
	n := flag.Int("n", 20000, "records")
	partitions := flag.Int("partitions", 6, "partitions")
	concurrency := flag.Int("concurrency", 64, "handlers per worker")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the worker's run to this file")
	memprofile := flag.String("memprofile", "", "write an allocation profile of the worker's run to this file")
	flag.Parse()
	if *partitions < 1 || *partitions > 1000 || *n < 1 || *concurrency < 1 {
		log.Fatal("want -n >= 1, -partitions 1 to 1000, -concurrency >= 1")
	}
	p := profiles{cpu: *cpuprofile, mem: *memprofile}
	if err := run(*n, int32(*partitions), *concurrency, p); err != nil { //nolint:gosec // bounded above
		log.Fatal(err)
	}
}

// profiles names the files the worker's run is profiled into ("" for none).
type profiles struct{ cpu, mem string }

// start begins the CPU profile; the returned stop ends it and writes the
// allocation profile.
func (p profiles) start() (stop func() error, err error) {
	var cpu *os.File
	if p.mem != "" {
		// Every allocation recorded, not a sample: the profile's counts are
		// then the counts of the run (the run is slower for it).
		runtime.MemProfileRate = 1
	}
	if p.cpu != "" {
		if cpu, err = os.Create(p.cpu); err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			_ = cpu.Close()
			return nil, err
		}
	}
	return func() error {
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				return err
			}
		}
		if p.mem == "" {
			return nil
		}
		f, err := os.Create(p.mem)
		if err != nil {
			return err
		}
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			_ = f.Close()
			return err
		}
		return f.Close()
	}, nil
}

// mallocs returns the heap objects this process has allocated so far.
func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

func run(n int, partitions int32, concurrency int, prof profiles) error {
	ctx := context.Background()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opt)
	defer func() { _ = rdb.Close() }()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s: %w", opt.Addr, err)
	}
	prefix := benchkit.KeyPrefix("bench:")
	defer func() {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_ = testkit.DeletePrefix(ctx, rdb, prefix)
	}()

	const topic = "bench.jobs"
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic, topic+".dlq"))
	if err != nil {
		return err
	}
	defer kc.Close()
	brokers := kc.ListenAddrs()

	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i], err = leasehold.KafkaRecord(ctx, leasehold.NewJob{Type: "bench.noop", Key: fmt.Sprintf("b-%d", i), Payload: []byte(`{}`)})
		if err != nil {
			return err
		}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return err
	}
	prod.Close()

	stop, err := prof.start()
	if err != nil {
		return err
	}
	m0 := mallocs()
	workerRate, err := benchWorker(ctx, rdb, brokers, topic, prefix, n, concurrency)
	workerAllocs := mallocs() - m0
	if err != nil {
		return err
	}
	if err := stop(); err != nil {
		return err
	}
	m0 = mallocs()
	rawRate, err := benchRaw(ctx, brokers, topic, n)
	rawAllocs := mallocs() - m0
	if err != nil {
		return err
	}
	fig := benchkit.NewFigures(os.Stdout)
	fig.Float("worker_msgs_per_s", workerRate, 0, "msg/s")
	fig.Float("raw_msgs_per_s", rawRate, 0, "msg/s")
	fig.Float("worker_vs_raw_ratio", workerRate/rawRate, 3, "")
	fig.Float("worker_allocs_per_job", float64(workerAllocs)/float64(n), 1, "objects")
	fig.Float("raw_allocs_per_msg", float64(rawAllocs)/float64(n), 1, "objects")
	return fig.Err()
}

// benchWorker runs one worker over the topic until every record completed
// and its offset is committed; the clock starts at Start (group join
// included, as for the raw consumer).
func benchWorker(ctx context.Context, rdb redis.UniversalClient, brokers []string, topic, prefix string, n, concurrency int) (float64, error) {
	w, err := leasehold.New(rdb,
		leasehold.WithKafka(kgo.SeedBrokers(brokers...)),
		leasehold.WithTopics(topic),
		leasehold.WithGroup("bench-worker"),
		leasehold.WithKeyPrefix(prefix),
		leasehold.WithRetention(10*time.Minute),
		leasehold.WithConcurrency(concurrency),
		leasehold.WithCommitInterval(200*time.Millisecond),
	)
	if err != nil {
		return 0, err
	}
	if err := w.Register("bench.noop", func(context.Context, *leasehold.Job) ([]byte, error) { return nil, nil }); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := w.Start(ctx); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for w.Stats().Succeeded < int64(n) {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("worker finished %d of %d", w.Stats().Succeeded, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.Shutdown(sctx); err != nil {
		return 0, err
	}
	return float64(n) / elapsed.Seconds(), nil
}

// benchRaw consumes the topic with a plain franz-go group consumer that
// commits what it polled.
func benchRaw(ctx context.Context, brokers []string, topic string, n int) (float64, error) {
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("bench-raw"), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	got := 0
	pctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for got < n {
		fs := cl.PollFetches(pctx)
		if err := pctx.Err(); err != nil {
			return 0, fmt.Errorf("raw consumer got %d of %d: %w", got, n, err)
		}
		fs.EachRecord(func(*kgo.Record) { got++ })
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

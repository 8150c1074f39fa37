package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/leasehold/leasehold/internal/benchkit"
	"github.com/leasehold/leasehold/internal/kafkabroker"
)

// The systems of an Apache Kafka round (-kafka apache), each on a topic of
// its own with the same layout (-partitions partitions, the same records).
var apacheSystems = []string{"leasehold", "bare_consumer", "setnx"}

// apacheKafka is the Apache Kafka broker of a -kafka apache run: one this
// program started (a JVM child, whose CPU getrusage of this process does not
// count) or the one at -kafka-brokers.
type apacheKafka struct {
	addrs  []string
	broker *kafkabroker.Broker // nil with -kafka-brokers
	topics map[string]string   // by system, once seeded
}

// startApache starts a single-node broker from the jars of $KAFKA_LIBS
// (tools/kafka/fetch.sh resolves them when it is unset), or, with addrs,
// uses that broker.
func startApache(ctx context.Context, addrs string) (*apacheKafka, error) {
	if addrs != "" {
		return &apacheKafka{addrs: strings.Split(addrs, ","), topics: map[string]string{}}, nil
	}
	b, err := kafkabroker.Start(ctx, kafkabroker.Config{})
	if err != nil {
		return nil, fmt.Errorf("start Apache Kafka (set KAFKA_LIBS=$(tools/kafka/fetch.sh), or -kafka-brokers): %w", err)
	}
	return &apacheKafka{addrs: []string{b.Addr()}, broker: b, topics: map[string]string{}}, nil
}

// stop deletes the seeded topics and stops a broker this program started.
func (a *apacheKafka) stop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if cl, err := kgo.NewClient(kgo.SeedBrokers(a.addrs...)); err == nil {
		for _, t := range a.topics {
			_, _ = kadm.NewClient(cl).DeleteTopics(ctx, t, t+".dlq")
		}
		cl.Close()
	}
	if a.broker != nil {
		_ = a.broker.Stop(ctx)
	}
}

// seed creates topic (partitions partitions, replication 1) and its
// dead-letter topic, and produces n jobs of type typ into it, keys
// prefix-0 .. prefix-(n-1), as leasehold.Enqueue writes them.
func (a *apacheKafka) seed(ctx context.Context, topic string, partitions, n int, typ, prefix string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.addrs...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	res, err := adm.CreateTopics(ctx, int32(partitions), 1, nil, topic, topic+".dlq") //nolint:gosec // small
	if err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	if err := res.Error(); err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	if err := produceJobs(ctx, cl, n, typ, prefix); err != nil {
		return fmt.Errorf("produce to %s: %w", topic, err)
	}
	return nil
}

// apacheRun runs system in round r on its topic, seeded with n jobs on
// first use and read from its start by a new group each round (Redis is
// flushed between runs, so the same keys are new again).
func apacheRun(ctx context.Context, c config, a *apacheKafka, rdb *redis.Client, system string, r, n, warm int) (window, error) {
	topic, ok := a.topics[system]
	if !ok {
		topic = fmt.Sprintf("compare-apache.%s.%d", system, time.Now().UnixNano())
		if err := a.seed(ctx, topic, c.partitions, n, "bench.noop", system); err != nil {
			return window{}, err
		}
		a.topics[system] = topic
	}
	group := fmt.Sprintf("%s.r%d", topic, r)
	switch system {
	case "leasehold":
		return leaseholdWorker(ctx, rdb, a.addrs, topic, group, n, warm, c.conc)
	case "bare_consumer":
		return consumeRun(ctx, rdb, a.addrs, topic, group, n, warm, 0, nil)
	case "setnx":
		return consumeRun(ctx, rdb, a.addrs, topic, group, n, warm, c.conc, setnxJob(rdb, "consumer-"+group))
	}
	return window{}, fmt.Errorf("unknown system %q", system)
}

// consumeRun is a plain franz-go group consumer of topic (cooperative-sticky,
// like leasehold's worker) that marks each poll's records for commit once
// they are done and commits the marks every 200 ms (leasehold's
// -commit-interval in these runs). With a nil job it does no work a record
// (the bare consumer: the limit of any Kafka worker on this broker); else it
// runs job on a poll's records, conc at a time, and marks them when all are
// done. It measures between warm and n records done.
func consumeRun(ctx context.Context, rdb *redis.Client, addrs []string, topic, group string, n, warm, conc int,
	job func(context.Context, *kgo.Record) error,
) (window, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(200*time.Millisecond))
	if err != nil {
		return window{}, err
	}
	defer cl.Close() // commits the marked offsets
	var finished atomic.Int64
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- consume(cctx, cl, job, conc, &finished) }()
	w, err := steady(ctx, rdb, finished.Load, int64(warm), int64(n), 10*time.Minute)
	cancel()
	if cerr := <-errc; err == nil && cerr != nil && !errors.Is(cerr, context.Canceled) {
		err = cerr
	}
	return w, err
}

func consume(ctx context.Context, cl *kgo.Client, job func(context.Context, *kgo.Record) error, conc int, finished *atomic.Int64) error {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		recs := fs.Records()
		if job != nil {
			var g errgroup.Group
			g.SetLimit(conc)
			for _, r := range recs {
				g.Go(func() error {
					if err := job(ctx, r); err != nil {
						return err
					}
					finished.Add(1)
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				return err
			}
		} else {
			finished.Add(int64(len(recs)))
		}
		cl.MarkCommitRecords(recs...)
	}
	return ctx.Err()
}

// setnxJob is the SET NX pattern of setnxRun for one Kafka record: SET NX
// of a PROCESSING value keyed by the record's key, the no-op job, SET of the
// COMPLETED value.
func setnxJob(rdb *redis.Client, consumer string) func(context.Context, *kgo.Record) error {
	return func(ctx context.Context, r *kgo.Record) error {
		k := "idempotency:v1:" + string(r.Key)
		processing := fmt.Sprintf(`{"status": "PROCESSING", "owner": "%s:%s", "timestamp": %.6f}`,
			consumer, uuid.NewString(), float64(time.Now().UnixNano())/1e9)
		ok, err := rdb.SetNX(ctx, k, processing, 300*time.Second).Result()
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("key %s already set", k)
		}
		return rdb.Set(ctx, k, setnxCompleted, 24*time.Hour).Err()
	}
}

// apacheRound runs leasehold, the bare consumer and the SET NX pattern once
// each on the Apache Kafka broker, starting with a different one each round:
// -n, -bare-n and -setnx-n jobs.
func apacheRound(ctx context.Context, c config, f *figures, rdb *redis.Client, a *apacheKafka, r int) error {
	jobs := map[string]int{"leasehold": c.n, "bare_consumer": c.bareN, "setnx": c.setnxN}
	k := r % len(apacheSystems)
	order := append(apacheSystems[k:len(apacheSystems):len(apacheSystems)], apacheSystems[:k]...)
	rate := make(map[string]float64)
	for _, s := range order {
		if !c.runs(s) {
			continue
		}
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			return err
		}
		n := jobs[s]
		warm := int(c.warm * float64(n))
		w, err := apacheRun(ctx, c, a, rdb, s, r, n, warm)
		if err != nil {
			return fmt.Errorf("%s on Apache Kafka, round %d: %w", s, r+1, err)
		}
		done := n - warm
		rate[s] = float64(done) / w.wall.Seconds()
		proc, red := w.perJob(done)
		name := s + "_apache"
		f.add(name+"_jobs_per_s", rate[s], 0, "jobs/s")
		f.add(name+"_worker_cpu_us_per_job", proc, 1, "us")
		f.add(name+"_worker_allocs_per_job", float64(w.allocs)/float64(done), 1, "objects")
		if s != "bare_consumer" {
			f.add(name+"_redis_cpu_us_per_job", red, 1, "us")
		}
	}
	for _, peer := range []string{"bare_consumer", "setnx"} {
		if lh, p := rate["leasehold"], rate[peer]; lh > 0 && p > 0 {
			f.add("leasehold_vs_"+peer+"_apache", lh/p, 4, "x")
			f.add(peer+"_vs_leasehold_apache", p/lh, 1, "x")
		}
	}
	return nil
}

// runApache is run's -kafka apache path: rounds of leasehold, the bare
// consumer and the SET NX pattern on one Apache Kafka broker and one Redis.
// The asynq, DBOS and long-job scenarios do not read Kafka and stay with the
// default -kafka kfake run.
func runApache(ctx context.Context, c config, rdb *redis.Client) error {
	a, err := startApache(ctx, c.kafkaBrokers)
	if err != nil {
		return err
	}
	defer a.stop(ctx)
	if c.cpuprofile != "" {
		stop, err := startProfile(c.cpuprofile)
		if err != nil {
			return err
		}
		defer stop()
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
	for r := range c.rounds {
		if err := apacheRound(ctx, c, &f, rdb, a, r); err != nil {
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
		return writeApacheTable(c.table, &f, h, os.Args[1:])
	}
	return nil
}

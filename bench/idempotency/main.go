// Command idempotency benchmarks the idempotency layer against a faithful
// reference of the common SET NX pattern, side by side on one Redis, with a
// no-op job, and prints one figure a line (name=value unit):
//
//	setnx_msgs_per_s           the SET NX pattern, one message at a time: SET NX PROCESSING with a TTL, then SET COMPLETED
//	leasehold_msgs_per_s       claim + fenced complete, batched per poll batch (-batch, default 500)
//	speedup_vs_setnx           leasehold_msgs_per_s / setnx_msgs_per_s
//	leasehold_redis_cpu_us_per_msg        Redis main-thread CPU per leasehold message
//	leasehold_redis_cpu_bound_msgs_per_s  the throughput that CPU allows on one fully available core
//	bytes_per_record           used_memory delta per COMPLETED record (random UUID keys, empty result; with
//	                           a history, -history > 0, the default, each record carries its attempt's history
//	                           entry, with a worker identity, a job type and trace and span IDs as a traced
//	                           worker sends them)
//	setnx_bytes_per_record     the same for the pattern's JSON strings under idempotency:v1:<key>
//
// By default it starts a private redis-server (on PATH) so that other clients
// neither disturb the memory figures nor see the keys; -addr uses a running
// server instead (keys under a random prefix, deleted afterwards).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/benchkit"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

func main() {
	addr := flag.String("addr", "", "Redis address to use (default: start a private redis-server)")
	msgs := flag.Int("msgs", 200_000, "messages for the leasehold throughput run")
	setnxMsgs := flag.Int("setnx-msgs", 20_000, "messages for the SET NX reference throughput run")
	batch := flag.Int("batch", 500, "poll batch size (claims and completes per pipeline)")
	conc := flag.Int("concurrency", 4, "poll batches in flight at once (partitions consumed in parallel)")
	records := flag.Int("records", 1_000_000, "completed records for the memory figures (0 skips them)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the leasehold throughput run to this file")
	history := flag.Int("history", idempotency.DefaultHistory, "attempts the store's history keeps per key (idempotency.WithHistory; 0: no history)")
	flag.Parse()

	ctx := context.Background()
	a, stop, err := benchkit.RedisAddr(*addr)
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c := redis.NewClient(&redis.Options{Addr: a, PoolSize: 4 * (*conc + 2)})
	defer func() { _ = c.Close() }()
	if err := c.Ping(ctx).Err(); err != nil {
		log.Fatalf("redis at %s: %v", a, err)
	}
	prefix := benchkit.KeyPrefix("bench:")
	defer func() { _ = testkit.DeletePrefix(context.Background(), c, prefix) }()

	m, err := lease.NewManager(c, lease.WithPrefix(prefix))
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = m.Shutdown(context.Background()) }()
	s, err := idempotency.New(ctx, c, m, idempotency.WithPrefix(prefix), idempotency.WithHistory(*history))
	if err != nil {
		log.Fatal(err)
	}

	setnxRate, err := setnxThroughput(ctx, c, prefix, *setnxMsgs)
	if err != nil {
		log.Fatalf("SET NX reference: %v", err)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
	}
	cpuBefore, err := benchkit.RedisMainCPU(ctx, c)
	if err != nil {
		log.Fatal(err)
	}
	lhRate, err := leaseholdThroughput(ctx, s, *msgs, *batch, *conc)
	pprof.StopCPUProfile()
	cpuAfter, err2 := benchkit.RedisMainCPU(ctx, c)
	if err2 != nil {
		log.Fatal(err2)
	}
	if err != nil {
		log.Fatalf("leasehold: %v", err)
	}
	fig := benchkit.NewFigures(os.Stdout)
	fig.Float("setnx_msgs_per_s", setnxRate, 0, "msgs/s")
	fig.Float("leasehold_msgs_per_s", lhRate, 0, "msgs/s")
	fig.Float("speedup_vs_setnx", lhRate/setnxRate, 1, "x")
	perMsg := (cpuAfter - cpuBefore) * 1e6 / float64(*msgs)
	fig.Float("leasehold_redis_cpu_us_per_msg", perMsg, 1, "us")
	fig.Float("leasehold_redis_cpu_bound_msgs_per_s", 1e6/perMsg, 0, "msgs/s")
	if *records > 0 {
		if err := testkit.DeletePrefix(ctx, c, prefix); err != nil {
			log.Fatal(err)
		}
		lhBytes, err := leaseholdMemory(ctx, c, s, *records, *batch)
		if err != nil {
			log.Fatalf("leasehold memory: %v", err)
		}
		if err := testkit.DeletePrefix(ctx, c, prefix); err != nil {
			log.Fatal(err)
		}
		setnxBytes, err := setnxMemory(ctx, c, *records)
		if err != nil {
			log.Fatalf("SET NX memory: %v", err)
		}
		fig.Float("bytes_per_record", lhBytes, 1, "bytes")
		fig.Float("setnx_bytes_per_record", setnxBytes, 1, "bytes")
		fig.Int("records", int64(*records), "records")
		fig.Int("history_attempts", int64(*history), "attempts")
	}
	if err := fig.Err(); err != nil {
		log.Fatal(err)
	}
}

// setnxCompleted is the SET NX pattern's COMPLETED value for an empty result, as its
// Python json.dumps writes it.
const setnxCompleted = `{"status": "COMPLETED", "result": ""}`

// setnxThroughput runs the SET NX pattern one message at a time: SET
// NX of a PROCESSING JSON value with a 300s TTL, the no-op job, then SET of
// the COMPLETED JSON value with a 24h TTL.
func setnxThroughput(ctx context.Context, c *redis.Client, prefix string, n int) (float64, error) {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + "idempotency:v1:" + uuid.NewString()
	}
	consumer := "consumer-" + strconv.Itoa(os.Getpid())
	start := time.Now()
	for _, k := range keys {
		processing := fmt.Sprintf(`{"status": "PROCESSING", "owner": "%s:%s", "timestamp": %.6f}`,
			consumer, uuid.NewString(), float64(time.Now().UnixNano())/1e9)
		ok, err := c.SetNX(ctx, k, processing, 300*time.Second).Result()
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, fmt.Errorf("key %s already set", k)
		}
		if err := c.Set(ctx, k, setnxCompleted, 24*time.Hour).Err(); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// leaseholdThroughput claims and completes n fresh keys in poll batches of
// batch, conc batches in flight at once.
func leaseholdThroughput(ctx context.Context, s *idempotency.Store, n, batch, conc int) (float64, error) {
	batches := make(chan []idempotency.Request, conc)
	go func() {
		defer close(batches)
		for i := 0; i < n; i += batch {
			reqs := make([]idempotency.Request, 0, batch)
			for j := i; j < min(i+batch, n); j++ {
				reqs = append(reqs, request())
			}
			batches <- reqs
		}
	}()
	// Pre-generate the first batches so that key generation stays out of the
	// measured time as much as a producer would.
	start := time.Now()
	err := benchkit.Each(batches, conc, func(reqs []idempotency.Request) error {
		return benchkit.ClaimComplete(ctx, s, reqs)
	})
	return float64(n) / time.Since(start).Seconds(), err
}

// leaseholdMemory completes n records through the Store and returns the
// used_memory delta per record.
func leaseholdMemory(ctx context.Context, c *redis.Client, s *idempotency.Store, n, batch int) (float64, error) {
	before, err := usedMemory(ctx, c)
	if err != nil {
		return 0, err
	}
	for i := 0; i < n; i += batch {
		reqs := make([]idempotency.Request, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			reqs = append(reqs, request())
		}
		if err := benchkit.ClaimComplete(ctx, s, reqs); err != nil {
			return 0, err
		}
	}
	after, err := usedMemory(ctx, c)
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(n), nil
}

// request is a claim of a new random key as a traced worker sends it.
func request() idempotency.Request {
	return idempotency.Request{Key: uuid.NewString(), Worker: "worker-7f9c8d6b5-x2k4q/12345", Type: "bench.noop",
		TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331"}
}

// setnxMemory writes n COMPLETED records of the SET NX pattern (a JSON string per
// key under idempotency:v1:<uuid>, 24h TTL), returns the used_memory delta per
// record and deletes them.
func setnxMemory(ctx context.Context, c *redis.Client, n int) (float64, error) {
	keys := make([]string, 0, n)
	before, err := usedMemory(ctx, c)
	if err != nil {
		return 0, err
	}
	defer func() {
		for i := 0; i < len(keys); i += 1000 {
			_ = c.Unlink(context.WithoutCancel(ctx), keys[i:min(i+1000, len(keys))]...).Err()
		}
	}()
	const chunk = 1000
	for i := 0; i < n; i += chunk {
		p := c.Pipeline()
		for j := i; j < min(i+chunk, n); j++ {
			k := "idempotency:v1:" + uuid.NewString()
			keys = append(keys, k)
			p.Set(ctx, k, setnxCompleted, 24*time.Hour)
		}
		if _, err := p.Exec(ctx); err != nil {
			return 0, err
		}
	}
	after, err := usedMemory(ctx, c)
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(n), nil
}

func usedMemory(ctx context.Context, c *redis.Client) (int64, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("no used_memory in INFO memory")
}

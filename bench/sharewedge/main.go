// Command sharewedge tries to make a Kafka share-group partition stop
// delivering under faults without leasehold: one Apache Kafka broker
// (internal/kafkabroker, with the share-group floors the chaos run uses), a
// topic of a few partitions, a producer at a steady rate, and several plain
// franz-go share consumers (kgo.ShareGroup with KeepRetryableFetchErrors)
// that accept every record they get, some after a slow hold during which
// they renew its lock, and that poll again only once the last poll's records
// are acknowledged (as leasehold's share mode does). Meanwhile it carries out
// the faults the chaos run makes: the broker killed with SIGKILL and
// restarted, or SIGSTOPped and continued, and consumers cut off (their
// connections dropped and refused, like a process killed with SIGKILL) or
// closed mid-flight, then started again on a new client.
//
//	KAFKA_LIBS=$(tools/kafka/fetch.sh) go run ./bench/sharewedge [-seed N] [-faults 6m] [-drain 3m]
//
// Per partition it tracks the records produced against the records accepted
// (distinct offsets). A partition with records not accepted and no progress
// for -stall while its consumers poll is a stall: the program prints the
// share group's view (start offset, lag, members and their assignments),
// then tries, in order, a fresh client on a new member (-probe) and a restart
// of every consumer, and reports whether each healed it. It prints one figure
// a line, name=value unit: the records produced and accepted, the partitions
// that stalled, the fetch and acknowledgement errors seen by partition and
// error, the faults made, and the broker log's lines about share state.
// Progress and diagnostics go to stderr.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/leasehold/leasehold/internal/kafkabroker"
)

const (
	topic = "sharewedge"
	group = "sharewedge"
)

type settings struct {
	seed            uint64
	partitions      int
	consumers       int
	maxRecords      int
	rate            int
	faults, drain   time.Duration
	stall           time.Duration
	slowFraction    float64
	slowHold        time.Duration
	lock            time.Duration
	session, hb     time.Duration
	brokerEvery     time.Duration
	brokerPause     time.Duration
	consumerEvery   time.Duration
	partitionFor    time.Duration
	pauseFor        time.Duration
	kills, pauses   bool
	probe           bool
	dir             string
	dump            string
	klogDir         string
	pollWait        time.Duration
	releaseFraction float64
	props           propsFlag
}

// propsFlag collects -broker-prop name=value flags.
type propsFlag map[string]string

func (p propsFlag) String() string { return fmt.Sprint(map[string]string(p)) }

func (p propsFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want name=value, got %q", v)
	}
	p[name] = value
	return nil
}

func main() {
	var s settings
	flag.Uint64Var(&s.seed, "seed", uint64(time.Now().UnixNano()), "seed of the fault schedule and of the slow records")
	flag.IntVar(&s.partitions, "partitions", 6, "partitions of the topic (the chaos run's jobs topic has 6)")
	flag.IntVar(&s.consumers, "consumers", 4, "share consumers")
	flag.IntVar(&s.maxRecords, "max-records", 16, "records a poll takes at most (ShareMaxRecords, strict)")
	flag.IntVar(&s.rate, "rate", 40, "records produced per second during the fault phase")
	flag.DurationVar(&s.faults, "faults", 6*time.Minute, "fault phase: records produced and faults made")
	flag.DurationVar(&s.drain, "drain", 4*time.Minute, "after the fault phase, wait at most this long for every record to be accepted")
	flag.DurationVar(&s.stall, "stall", time.Minute, "a partition with records not accepted and no progress for this long is a stall")
	flag.Float64Var(&s.slowFraction, "slow-fraction", 0.05, "fraction of records held -slow-hold before their accept, their lock renewed")
	flag.DurationVar(&s.slowHold, "slow-hold", 2*time.Second, "hold of the slow records")
	flag.DurationVar(&s.lock, "lock", 3*time.Second, "the group's share.record.lock.duration.ms (the chaos run's: lease TTL 2s plus a third, rounded up)")
	flag.DurationVar(&s.session, "session", 6*time.Second, "the group's share.session.timeout.ms (the chaos run's workers': 6s)")
	flag.DurationVar(&s.hb, "heartbeat", 2*time.Second, "the group's share.heartbeat.interval.ms (the chaos run's workers': 2s)")
	flag.DurationVar(&s.brokerEvery, "broker-every", 30*time.Second, "mean interval between broker faults, alternately a kill -9 and a SIGSTOP (0: none)")
	flag.DurationVar(&s.brokerPause, "broker-pause", 13*time.Second, "how long a SIGSTOP lasts (the chaos run's: 2 x session + 1s)")
	flag.DurationVar(&s.consumerEvery, "consumer-every", 5*time.Second, "mean interval between consumer faults, in turn a kill -9 (connections cut), a close, a partition and a pause (0: none)")
	flag.DurationVar(&s.partitionFor, "partition-for", 11*time.Second, "how long a consumer stays cut off from the broker (the chaos run's: 2 x lease TTL + session + 1s)")
	flag.DurationVar(&s.pauseFor, "pause-for", 5*time.Second, "how long a consumer stays frozen (the chaos run's: 2 x lease TTL + 1s)")
	flag.BoolVar(&s.kills, "broker-kills", true, "make broker kills")
	flag.BoolVar(&s.pauses, "broker-pauses", true, "make broker pauses")
	flag.BoolVar(&s.probe, "probe", true, "on a stall, try a fresh client on a new member, then a restart of every consumer")
	flag.StringVar(&s.dir, "dir", "", "the broker's directory (default: a new temporary one, removed at the end)")
	flag.StringVar(&s.dump, "dump", "", "on the first stall, write every goroutine's stack to this file")
	flag.DurationVar(&s.pollWait, "poll-wait", 0, "each poll's deadline (leasehold's dispatcher uses 250ms; 0: none)")
	flag.Float64Var(&s.releaseFraction, "release-fraction", 0, "fraction of first deliveries released (AckRelease) instead of accepted, as a retryable failure without a backoff")
	flag.StringVar(&s.klogDir, "klog-dir", "", "write each client's franz-go debug log to a file of its own in this directory")
	s.props = propsFlag{}
	flag.Var(s.props, "broker-prop", "a server.properties entry for the broker, name=value (repeatable)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, s); err != nil {
		fmt.Fprintln(os.Stderr, "sharewedge:", err)
		os.Exit(1)
	}
}

// tally is what the program knows of the partitions: produced, accepted,
// last progress, and the errors seen.
type tally struct {
	mu        sync.Mutex
	produced  []int64              // per partition: highest acknowledged produce offset + 1
	accepted  []map[int64]struct{} // per partition: distinct offsets accepted
	progress  []time.Time          // per partition: last new accept, or last time nothing was owed
	stalled   []time.Time          // per partition: when the current stall was noticed (zero: none)
	errs      map[string]int       // "fetch p=P err" / "ack p=P err" -> count
	errLogged map[string]time.Time
	stalls    []stallReport
}

type stallReport struct {
	partition   int32
	at          time.Duration // since the start
	lag         int64
	healedBy    string
	healedAfter time.Duration
}

func newTally(parts int) *tally {
	t := &tally{produced: make([]int64, parts), accepted: make([]map[int64]struct{}, parts),
		progress: make([]time.Time, parts), stalled: make([]time.Time, parts),
		errs: map[string]int{}, errLogged: map[string]time.Time{}}
	for i := range t.accepted {
		t.accepted[i] = map[int64]struct{}{}
		t.progress[i] = time.Now()
	}
	return t
}

func (t *tally) produce(p int32, off int64) {
	t.mu.Lock()
	t.produced[p] = max(t.produced[p], off+1)
	t.mu.Unlock()
}

func (t *tally) accept(p int32, off int64) {
	t.mu.Lock()
	if _, ok := t.accepted[p][off]; !ok {
		t.accepted[p][off] = struct{}{}
		t.progress[p] = time.Now()
	}
	t.mu.Unlock()
}

// lag returns produced - accepted for p.
func (t *tally) lag(p int) int64 {
	return t.produced[p] - int64(len(t.accepted[p]))
}

// errSeen counts an error and logs it at most once a minute per kind.
func (t *tally) errSeen(kind string, p int32, err error, who string) {
	key := fmt.Sprintf("%s p=%d %s", kind, p, errName(err))
	t.mu.Lock()
	t.errs[key]++
	n := t.errs[key]
	log := time.Since(t.errLogged[key]) > time.Minute
	if log {
		t.errLogged[key] = time.Now()
	}
	t.mu.Unlock()
	if log {
		slog.Warn(kind+" error", slog.Int("partition", int(p)), slog.String("err", err.Error()),
			slog.String("consumer", who), slog.Int("count", n))
	}
}

func errName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, kgo.ErrClientClosed):
		return "CLOSED"
	case errors.Is(err, context.DeadlineExceeded):
		return "DEADLINE"
	}
	return "OTHER"
}

// slow reports whether the record at p/off is one of the slow ones.
func slow(seed uint64, fraction float64, p int32, off int64) bool {
	r := mrand.New(mrand.NewPCG(seed, uint64(p)<<48^uint64(off))) //nolint:gosec // a draw, not a secret
	return r.Float64() < fraction
}

func run(ctx context.Context, s settings) error {
	start := time.Now()
	b, err := kafkabroker.Start(ctx, kafkabroker.Config{Dir: s.dir, Props: s.props})
	if err != nil {
		return err
	}
	defer func() { //nolint:contextcheck // the broker is stopped after ctx ends too
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = b.Stop(sctx)
	}()
	slog.Info("broker started", slog.String("addr", b.Addr()), slog.String("log", b.LogPath()),
		slog.Duration("took", time.Since(start)))
	if err := setUp(ctx, b.Addr(), s); err != nil {
		return err
	}
	printBrokerConfigs(ctx, b.Addr(), "group.share.partition.max.record.locks", "group.share.delivery.count.limit",
		"group.share.record.lock.duration.ms")
	t := newTally(s.partitions)
	f := &fleet{s: s, addr: b.Addr(), t: t, ctx: ctx}
	for i := range s.consumers {
		f.cs = append(f.cs, &consumer{id: i})
	}
	for _, c := range f.cs {
		f.startConsumer(ctx, c)
	}
	defer f.stopAll()
	pctx, pcancel := context.WithTimeout(ctx, s.faults)
	defer pcancel()
	var wg sync.WaitGroup
	wg.Go(func() { produce(pctx, b.Addr(), s, t) })
	faults := newFaultCounts()
	if s.brokerEvery > 0 && (s.kills || s.pauses) {
		wg.Go(func() { brokerFaults(pctx, b, s, faults) })
	}
	if s.consumerEvery > 0 {
		wg.Go(func() { f.consumerFaults(pctx, faults) })
	}
	mctx, mcancel := context.WithCancel(ctx)
	var mwg sync.WaitGroup
	mwg.Go(func() { f.watch(mctx, start) })
	wg.Wait()
	slog.Info("fault phase over; draining", slog.Duration("drain", s.drain))
	drained, drainTook := f.waitDrained(ctx, s.drain)
	mcancel()
	mwg.Wait()
	report(start, s, t, faults, drained, drainTook, b.LogPath())
	return nil
}

// setUp creates the topic and sets the group's configs.
func setUp(ctx context.Context, addr string, s settings) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	res, err := adm.CreateTopic(ctx, int32(s.partitions), 1, nil, topic) //nolint:gosec // small
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	return alterGroupConfigs(ctx, cl, map[string]string{
		"share.auto.offset.reset":        "earliest",
		"share.renew.acknowledge.enable": "true",
		"share.record.lock.duration.ms":  strconv.FormatInt(s.lock.Milliseconds(), 10),
		"share.session.timeout.ms":       strconv.FormatInt(s.session.Milliseconds(), 10),
		"share.heartbeat.interval.ms":    strconv.FormatInt(s.hb.Milliseconds(), 10),
	})
}

func alterGroupConfigs(ctx context.Context, cl *kgo.Client, configs map[string]string) error {
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	for name, v := range configs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = name, kmsg.IncrementalAlterConfigOpSet, &v
		res.Configs = append(res.Configs, c)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("group configs: %w", err)
		}
	}
	return nil
}

// produce sends s.rate records a second, round robin over the partitions,
// until ctx ends, then flushes what it sent.
func produce(ctx context.Context, addr string, s settings, t *tally) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(topic))
	if err != nil {
		slog.Error("producer", slog.Any("err", err))
		return
	}
	defer cl.Close()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var n, due int
	begin := time.Now()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		due = int(time.Since(begin).Seconds() * float64(s.rate))
		for ; n < due && ctx.Err() == nil; n++ {
			r := &kgo.Record{Partition: int32(n % s.partitions), Value: []byte(strconv.Itoa(n))} //nolint:gosec // small
			cl.Produce(context.WithoutCancel(ctx), r, func(r *kgo.Record, err error) {
				if err == nil {
					t.produce(r.Partition, r.Offset)
				}
			})
		}
	}
	fctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.Flush(fctx); err != nil { //nolint:contextcheck // flushed after the fault phase's ctx ended
		slog.Error("producer flush", slog.Any("err", err))
	}
}

type faultCounts struct {
	brokerKills, brokerPauses atomic.Int64
	consumer                  map[string]*atomic.Int64 // by kind: kill, close, partition, pause
}

func newFaultCounts() *faultCounts {
	n := &faultCounts{consumer: map[string]*atomic.Int64{}}
	for _, k := range []string{"kill", "close", "partition", "pause"} {
		n.consumer[k] = &atomic.Int64{}
	}
	return n
}

// brokerFaults alternates a kill -9 (down 0.5 to 2s) and a SIGSTOP
// (s.brokerPause), every s.brokerEvery on average, as the chaos run does.
func brokerFaults(ctx context.Context, b *kafkabroker.Broker, s settings, n *faultCounts) {
	rng := mrand.New(mrand.NewPCG(s.seed, 0xb20)) //nolint:gosec // a schedule
	kill := rng.IntN(2) == 0
	for {
		wait := s.brokerEvery/2 + time.Duration(rng.Int64N(int64(s.brokerEvery)))
		if !sleep(ctx, wait) {
			return
		}
		if !s.pauses || kill && s.kills {
			down := 500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))
			b.Kill()
			n.brokerKills.Add(1)
			slog.Info("broker killed", slog.Duration("down", down))
			time.Sleep(down)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
			err := b.Restart(rctx)
			cancel()
			slog.Info("broker restarted", slog.Any("err", err))
		} else {
			if err := b.Pause(); err != nil {
				slog.Warn("pause", slog.Any("err", err))
				continue
			}
			n.brokerPauses.Add(1)
			slog.Info("broker paused", slog.Duration("for", s.brokerPause))
			time.Sleep(s.brokerPause)
			if err := b.Resume(); err != nil {
				slog.Warn("resume", slog.Any("err", err))
			}
			slog.Info("broker continued")
		}
		kill = !kill
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// report prints the figures and the broker log's lines about share state.
func report(start time.Time, s settings, t *tally, n *faultCounts, drained bool, drainTook time.Duration, brokerLog string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var produced, accepted int64
	for p := range t.produced {
		produced += t.produced[p]
		accepted += int64(len(t.accepted[p]))
	}
	fmt.Printf("seed=%d seed\n", s.seed)
	fmt.Printf("run_s=%.0f s\n", time.Since(start).Seconds())
	fmt.Printf("records_produced=%d records\n", produced)
	fmt.Printf("records_accepted=%d records\n", accepted)
	for p := range t.produced {
		fmt.Printf("lag_p%d=%d records\n", p, t.lag(p))
	}
	fmt.Printf("drained=%d bool\n", b2i(drained))
	fmt.Printf("drain_s=%.1f s\n", drainTook.Seconds())
	fmt.Printf("broker_kills=%d kills\n", n.brokerKills.Load())
	fmt.Printf("broker_pauses=%d pauses\n", n.brokerPauses.Load())
	for _, k := range []string{"kill", "close", "partition", "pause"} {
		fmt.Printf("consumer_%ss=%d faults\n", k, n.consumer[k].Load())
	}
	fmt.Printf("stalls=%d partitions\n", len(t.stalls))
	for i, r := range t.stalls {
		fmt.Printf("stall%d_partition=%d partition\n", i, r.partition)
		fmt.Printf("stall%d_at_s=%.0f s\n", i, r.at.Seconds())
		fmt.Printf("stall%d_lag=%d records\n", i, r.lag)
		fmt.Printf("stall%d_healed_by_%s=%.0f s\n", i, cmpOr(r.healedBy, "nothing"), r.healedAfter.Seconds())
	}
	keys := make([]string, 0, len(t.errs))
	for k := range t.errs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Printf("%s=%d errors\n", strings.NewReplacer(" p=", "_p", " ", "_").Replace(k), t.errs[k])
	}
	brokerLines(brokerLog)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// brokerLines counts the broker log's WARN and ERROR lines about share
// state and prints the first few of each kind to stderr.
func brokerLines(path string) {
	f, err := os.Open(path) //nolint:gosec // the broker's own log
	if err != nil {
		fmt.Fprintln(os.Stderr, "broker log:", err)
		return
	}
	defer func() { _ = f.Close() }()
	kinds := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "WARN") && !strings.Contains(line, "ERROR") {
			continue
		}
		low := strings.ToLower(line)
		if !strings.Contains(low, "share") {
			continue
		}
		kind := "other"
		switch {
		case strings.Contains(line, "Failed to write the share group state"):
			kind = "write_state_failed"
		case strings.Contains(line, "Failed to initialize the share partition"),
			strings.Contains(line, "initialize"):
			kind = "initialize_failed"
		case strings.Contains(low, "leader epoch"):
			kind = "leader_epoch"
		case strings.Contains(low, "persister"), strings.Contains(low, "read"):
			kind = "read_state"
		}
		kinds[kind]++
		if kinds[kind] <= 3 {
			fmt.Fprintln(os.Stderr, "broker:", line)
		}
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Printf("broker_log_share_%s=%d lines\n", k, kinds[k])
	}
}

// printBrokerConfigs prints the broker's values of names (node 1).
func printBrokerConfigs(ctx context.Context, addr string, names ...string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return
	}
	defer cl.Close()
	rcs, err := kadm.NewClient(cl).DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		slog.Warn("describe broker configs", slog.Any("err", err))
		return
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if slices.Contains(names, c.Key) {
				fmt.Printf("broker_%s=%s value\n", strings.ReplaceAll(c.Key, ".", "_"), c.MaybeValue())
			}
		}
	}
}

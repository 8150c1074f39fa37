package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/devkafka"
	"github.com/leasehold/leasehold/internal/freeport"
	"github.com/leasehold/leasehold/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(testkit.Main(m).Run()) }

// takeoverBound is what docs/worker.md promises with the defaults: a job
// whose worker stops renewing runs again within the lease TTL plus one renew
// interval (TTL/3), here with a margin of 5s for a loaded machine.
const takeoverBound = leasehold.DefaultLeaseTTL + leasehold.DefaultLeaseTTL/3 + 5*time.Second

// TestTakeoverWithinLease runs two `worker run` processes with the default
// lease TTL and Kafka group timeouts, on the embedded broker (kfake with
// devkafka's repair, in this process) or on Apache Kafka (TEST_KAFKA=apache),
// kills -9 (or SIGSTOPs) the one running a long job, and waits for the job to
// run again on the other within takeoverBound: the lease's pace, not
// Kafka's 45s default session (with which it took ~44s). A stopped worker is
// let go on at the end: its job's lease is lost and nothing it does changes
// the record the survivor committed. TAKEOVER_TRIALS=N repeats each case N
// times and logs the takeover times' p50 and p99 (docs/worker.md's figures).
func TestTakeoverWithinLease(t *testing.T) {
	bin := buildWorker(t)
	brokers, kind := startBroker(t)
	trials := 1
	if s := os.Getenv("TAKEOVER_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("TAKEOVER_TRIALS=%q: want a count", s)
		}
		trials = n
	}
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{{"kill", syscall.SIGKILL}, {"stop", syscall.SIGSTOP}} {
		t.Run(tc.name, func(t *testing.T) {
			if trials == 1 {
				t.Parallel() // a measurement runs alone, one trial at a time
			}
			var took, moved []time.Duration
			for range trials {
				tk, mv := takeoverTrial(t, bin, brokers, tc.sig)
				took, moved = append(took, tk), append(moved, mv)
			}
			t.Logf("takeover_p50_%s_%s=%.1f s", tc.name, kind, quantile(took, 0.5))
			t.Logf("takeover_p99_%s_%s=%.1f s", tc.name, kind, quantile(took, 0.99))
			t.Logf("partition_moved_p50_%s_%s=%.1f s", tc.name, kind, quantile(moved, 0.5))
			t.Logf("partition_moved_p99_%s_%s=%.1f s", tc.name, kind, quantile(moved, 0.99))
			t.Logf("takeover_trials_%s_%s=%d", tc.name, kind, len(took))
		})
	}
}

// quantile returns the q quantile of ds in seconds (nearest rank).
func quantile(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)].Seconds()
}

// takeoverTrial runs one job on two fresh workers of a fresh group, signals
// the one running it, and returns how long after the signal the other took
// the job over, and was assigned the job's partition. It fails the test if that is longer than takeoverBound, or
// if the job is not then completed once, by the survivor, with its offset
// committed.
func takeoverTrial(t *testing.T, bin string, brokers []string, sig syscall.Signal) (took, moved time.Duration) {
	t.Helper()
	rdb, prefix := testkit.SharedRedis(t)
	topic := createTopic(t, brokers)
	group := "g-" + topic
	workers := []*workerProc{
		startWorker(t, bin, brokers, rdb, prefix, topic, group),
		startWorker(t, bin, brokers, rdb, prefix, topic, group),
	}
	testkit.Eventually(t, 60*time.Second, "both workers ready and in one stable group", func() bool {
		for _, w := range workers {
			select {
			case <-w.exited:
				t.Fatalf("worker %d exited at start", w.cmd.Process.Pid)
			default:
			}
		}
		return workers[0].ready() && workers[1].ready() && stableMembers(brokers, group) == 2
	})

	key := "takeover-" + topic
	produceJob(t, brokers, topic, key)
	insp := inspect.New(rdb, inspect.WithPrefix(prefix))
	t.Cleanup(func() { _ = insp.Close(context.Background()) })
	readKey := func() leasehold.KeyInfo {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ki, err := insp.Key(ctx, key)
		if err != nil {
			t.Logf("inspect %s: %v", key, err)
		}
		return ki
	}
	var first leasehold.KeyInfo
	testkit.Eventually(t, 30*time.Second, "the job running", func() bool {
		first = readKey()
		return first.Leased
	})
	runner := runnerOf(t, insp, key, first.LeaseFence, workers)
	survivor := workers[0]
	if runner == workers[0] {
		survivor = workers[1]
	}

	runner.signal(t, sig)
	signalled := time.Now()
	testkit.Eventually(t, takeoverBound, fmt.Sprintf("the job taken over within %v of the %v", takeoverBound, sig), func() bool {
		ki := readKey()
		if ki.Leased && ki.LeaseFence > first.LeaseFence || ki.State == idempotency.Completed && ki.Fence > first.LeaseFence {
			took = time.Since(signalled)
			return true
		}
		return false
	})
	moved, _ = survivor.assignedAfter(topic, signalled)
	t.Logf("took over %.1fs after the %v, partition moved after %.1fs (lease TTL %v, fence %d)",
		took.Seconds(), sig, moved.Seconds(), leasehold.DefaultLeaseTTL, first.LeaseFence)

	var done leasehold.KeyInfo
	testkit.Eventually(t, 60*time.Second, "the job completed by the survivor", func() bool {
		done = readKey()
		return done.State == idempotency.Completed
	})
	if done.Fence <= first.LeaseFence {
		t.Fatalf("completed under fence %d, want the survivor's, above the first owner's %d", done.Fence, first.LeaseFence)
	}
	testkit.Eventually(t, 30*time.Second, "the job's offset committed", func() bool {
		return committed(brokers, group, topic) == 1
	})
	if sig == syscall.SIGSTOP {
		// The stalled worker goes on: its job finds its lease lost (its
		// local deadline passed long ago, and Redis names another owner),
		// and the record stays the survivor's.
		runner.signal(t, syscall.SIGCONT)
		testkit.Eventually(t, 30*time.Second, "the resumed worker's lease lost", func() bool {
			return runner.logged(`"msg":"lease lost"`)
		})
		if after := readKey(); after.State != idempotency.Completed || after.Fence != done.Fence || string(after.Result) != string(done.Result) {
			t.Fatalf("after the stalled worker resumed: state %v fence %d result %s, want the survivor's (fence %d, %s)",
				after.State, after.Fence, after.Result, done.Fence, done.Result)
		}
	}
	return took, moved
}

// buildWorker builds this package's binary.
func buildWorker(t *testing.T) string {
	t.Helper()
	testkit.SkipShort(t, "a built worker binary")
	bin := filepath.Join(t.TempDir(), "worker")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startBroker returns the test's brokers and their kind: the embedded
// broker (kfake with devkafka's repair, as `worker dev-broker` and `worker
// run --embedded-kafka` run it) unless the tests go against a real Kafka.
func startBroker(t *testing.T) ([]string, string) {
	t.Helper()
	if !testkit.IsFake() {
		return testkit.StartKafka(t).Brokers(), "apache"
	}
	c, err := devkafka.NewCluster(nil, 0, kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs(), "kfake"
}

func admin(t *testing.T, brokers []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createTopic creates a jobs topic of one partition and its dead-letter
// topic, with a random name.
func createTopic(t *testing.T, brokers []string) string {
	t.Helper()
	return createTopicParts(t, brokers, 1)
}

// createTopicParts creates a jobs topic of parts partitions and its
// dead-letter topic (one partition), with a random name.
func createTopicParts(t *testing.T, brokers []string, parts int32) string {
	t.Helper()
	adm := admin(t, brokers)
	topic := fmt.Sprintf("takeover-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	names := []string{topic, topic + ".dlq"}
	for i, name := range names {
		resp, err := adm.CreateTopic(ctx, []int32{parts, 1}[i], 1, nil, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create topic %s: %v", name, err)
		}
	}
	// A broker may answer the creation before its metadata lists the
	// topics with a leader; the workers check their topics at start.
	testkit.Eventually(t, 30*time.Second, "the topics led", func() bool {
		mctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		md, err := adm.Metadata(mctx, names...)
		if err != nil {
			return false
		}
		for i, name := range names {
			td, ok := md.Topics[name]
			if !ok || td.Err != nil || len(td.Partitions) != int([]int32{parts, 1}[i]) {
				return false
			}
			for _, p := range td.Partitions {
				if p.Leader < 0 || p.Err != nil {
					return false
				}
			}
		}
		return true
	})
	return topic
}

// produceJob enqueues one demo.sleep job of 6s in 6 steps.
func produceJob(t *testing.T, brokers []string, topic, key string) {
	t.Helper()
	payload, _ := json.Marshal(cli.SleepJob{DurationMS: 6000, Steps: 6})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := leasehold.KafkaRecord(ctx, leasehold.NewJob{Type: "demo.sleep", Key: key, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	r.Topic = topic
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// stableMembers returns the group's member count once it is stable, else 0.
func stableMembers(brokers []string, group string) int {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return 0
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	described, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	if err != nil {
		return 0
	}
	g := described[group]
	if g.Err != nil || g.State != "Stable" {
		return 0
	}
	return len(g.Members)
}

// committed returns the group's committed offset of partition 0, or -1.
func committed(brokers []string, group, topic string) int64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return -1
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return -1
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok || o.Err != nil {
		return -1
	}
	return o.At
}

// workerProc is one `worker run` process with the default lease TTL and
// Kafka group timeouts.
type workerProc struct {
	cmd     *exec.Cmd
	http    string
	logPath string
	exited  chan struct{} // closed when the process has exited
}

func startWorker(t *testing.T, bin string, brokers []string, rdb *redis.Client, prefix, topic, group string, extra ...string) *workerProc {
	t.Helper()
	return startWorkerWith(t, bin, brokers, rdb, prefix, topic, group, []string{"OTEL_TRACES_EXPORTER=none"}, extra...)
}

// startWorkerWith starts a `worker run` process as startWorker does, with
// env added to the test's environment and extra flags.
func startWorkerWith(t *testing.T, bin string, brokers []string, rdb *redis.Client, prefix, topic, group string,
	env []string, extra ...string) *workerProc {
	t.Helper()
	hp, err := freeport.Port(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(hp))
	o := rdb.Options()
	w := &workerProc{http: "http://" + addr, logPath: filepath.Join(t.TempDir(), "worker.log"), exited: make(chan struct{})}
	logf, err := os.Create(w.logPath)
	if err != nil {
		t.Fatal(err)
	}
	w.cmd = exec.Command(bin, "run", "--brokers", strings.Join(brokers, ","), //nolint:gosec // the test's own binary
		"--redis", fmt.Sprintf("redis://%s/%d", o.Addr, o.DB), "--prefix", prefix,
		"--topics", topic, "--dlq", topic+".dlq", "--group", group, "--http", addr,
		"--concurrency", "4", "--shutdown-timeout", "5s", "--log-format", "json")
	w.cmd.Args = append(w.cmd.Args, extra...)
	w.cmd.Env = append(os.Environ(), env...)
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.exited) }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.exited:
		case <-time.After(20 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.exited
		}
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(w.logPath)
			t.Logf("worker %d log:\n%s", w.cmd.Process.Pid, tail(string(b), 40))
		}
	})
	return w
}

func (w *workerProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := w.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

func (w *workerProc) get(path string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.http+path, nil)
	if err != nil {
		return "", false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return string(b), err == nil && resp.StatusCode == http.StatusOK
}

func (w *workerProc) ready() bool {
	_, ok := w.get("/readyz")
	return ok
}

var leaseHeldRE = regexp.MustCompile(`(?m)^leasehold_lease_held(?:\{[^}]*\})? (\S+)$`)

// leasesHeld reads the leasehold_lease_held gauge of the worker's /metrics.
func (w *workerProc) leasesHeld() float64 {
	body, ok := w.get("/metrics")
	if !ok {
		return 0
	}
	var n float64
	for _, m := range leaseHeldRE.FindAllStringSubmatch(body, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		n += v
	}
	return n
}

func (w *workerProc) logged(s string) bool {
	b, _ := os.ReadFile(w.logPath)
	return strings.Contains(string(b), s)
}

// assignedAfter returns how long after since the worker logged that it was
// assigned a partition of topic, from the log line's time.
func (w *workerProc) assignedAfter(topic string, since time.Time) (time.Duration, bool) {
	b, _ := os.ReadFile(w.logPath)
	for _, line := range strings.Split(string(b), "\n") {
		var e struct {
			Time       time.Time          `json:"time"`
			Msg        string             `json:"msg"`
			Partitions map[string][]int32 `json:"partitions"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Msg != "partitions assigned" || e.Time.Before(since) {
			continue
		}
		if _, ok := e.Partitions[topic]; ok {
			return e.Time.Sub(since), true
		}
	}
	return 0, false
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

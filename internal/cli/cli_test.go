package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{})
	// `worker run` exports traces as OTEL_* says; no collector runs here.
	_ = os.Setenv("OTEL_TRACES_EXPORTER", "none")
	goleak.VerifyTestMain(testkit.Main(m), goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs the command line with env vars env and returns its exit code and
// output.
func run(ctx context.Context, t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb syncBuffer
	code := Main(ctx, args, &Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
	return result{code, out.String(), errb.String()}
}

// runAs is run in a team's own program named name (workercmd.WithName).
func runAs(ctx context.Context, t *testing.T, name string, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb syncBuffer
	code := Run(ctx, args, &Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}, WithName(name))
	return result{code, out.String(), errb.String()}
}

// wantUsageError checks a failed command: exit code, and one line on stderr.
func wantFailure(t *testing.T, r result, code int, contains string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d (stderr %q)", r.code, code, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(r.stderr, contains) {
		t.Errorf("stderr %q: want one line containing %q", r.stderr, contains)
	}
}

func sharedRedisURL(t *testing.T) (string, string, redis.UniversalClient) {
	t.Helper()
	rdb, prefix := testkit.SharedRedis(t)
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = DefaultRedisURL
	}
	return url, prefix, rdb
}

func TestUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if r := run(ctx, t, nil, "help"); r.code != 0 || !strings.Contains(r.stdout, "dev-broker") {
		t.Errorf("help: %+v", r)
	}
	wantFailure(t, run(ctx, t, nil), 2, "missing command")
	wantFailure(t, run(ctx, t, nil, "frobnicate"), 2, `unknown command "frobnicate"`)
	for name := range commands {
		t.Run(name, func(t *testing.T) {
			r := run(ctx, t, nil, name, "--no-such-flag")
			wantFailure(t, r, 2, "flag provided but not defined: -no-such-flag")
			if r.stdout != "" {
				t.Errorf("a bad flag printed on stdout: %q", r.stdout)
			}
			if r := run(ctx, t, nil, name, "-h"); r.code != 0 || !strings.Contains(r.stdout, "usage: worker "+name) {
				t.Errorf("%s -h: %+v", name, r)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dead := map[string]string{"REDIS_URL": "redis://127.0.0.1:1/0"}
	for _, args := range [][]string{
		{"run", "--brokers", "127.0.0.1:1"},
		{"inspect", "some-key"},
		{"leases"},
		{"expire", "some-key"},
		{"capacity"},
		{"compensations"},
	} {
		t.Run(args[0]+"/unreachable-redis", func(t *testing.T) {
			wantFailure(t, run(ctx, t, dead, args...), 1, "redis at 127.0.0.1:1 does not answer")
		})
	}
	wantFailure(t, run(ctx, t, nil, "inspect", "bad key"), 2, "invalid key")
	wantFailure(t, run(ctx, t, nil, "expire"), 2, "want exactly one argument")
	wantFailure(t, run(ctx, t, nil, "compensations", "retry"), 2, "want no argument")
	wantFailure(t, run(ctx, t, nil, "run", "--brokers", "127.0.0.1:1", "--redis", "http://x"), 2, `scheme "http"`)
	wantFailure(t, run(ctx, t, nil, "run", "--concurrency", "0"), 2, "concurrency 0")
	wantFailure(t, run(ctx, t, nil, "run", "--memory-budget", "0"), 2, "memory budget 0 MiB")
	wantFailure(t, run(ctx, t, map[string]string{"LEASEHOLD_MAX_HELD_RECORDS": "-3"}, "run"), 2, "max held records -3")
	wantFailure(t, run(ctx, t, map[string]string{"LEASEHOLD_LEASE_TTL": "soon"}, "run"), 2, "LEASEHOLD_LEASE_TTL")
	wantFailure(t, run(ctx, t, nil, "run", "extra"), 2, `unexpected argument "extra"`)
	wantFailure(t, run(ctx, t, nil, "enqueue", "--dup", "2"), 2, "dup 2")
	wantFailure(t, run(ctx, t, nil, "enqueue", "--type", "has space"), 2, "invalid job type")
	wantFailure(t, run(ctx, t, nil, "enqueue", "--brokers", "127.0.0.1:1", "--count", "1"), 1, "does not answer")
	wantFailure(t, run(ctx, t, nil, "dev-broker", "--listen", "nonsense"), 2, "listen address")
	wantFailure(t, run(ctx, t, nil, "dev-broker", "--topics", "t:0"), 2, "partitions must be 1 to 10000")
	wantFailure(t, run(ctx, t, nil, "demo", "--jobs", "0"), 2, "jobs 0")
	wantFailure(t, run(ctx, t, nil, "run", "--brokers", "127.0.0.1:1", "--pg", "postgres://127.0.0.1/x"), 2, "needs both --pg and --payment-stub")
	wantFailure(t, run(ctx, t, nil, "run", "--heartbeat-interval", "-1s"), 2, "heartbeat interval -1s: want more than 0, or 0 to derive it")
	wantFailure(t, run(ctx, t, nil, "run", "--heartbeat-interval", "8s"), 2,
		"heartbeat interval 8s: want less than the session timeout 7.5s") // derived from the 15s lease TTL
	wantFailure(t, run(ctx, t, nil, "run", "--session-timeout", "2s", "--heartbeat-interval", "2s"), 2,
		"heartbeat interval 2s: want less than the session timeout 2s")
	wantFailure(t, run(ctx, t, map[string]string{"LEASEHOLD_HEARTBEAT_INTERVAL": "often"}, "run"), 2,
		`LEASEHOLD_HEARTBEAT_INTERVAL="often": not a duration`)
	wantFailure(t, run(ctx, t, nil, "run", "--heartbeat-interval", "often"), 2, `invalid value "often" for flag -heartbeat-interval`)
	wantFailure(t, run(ctx, t, nil, "run", "--fetch-max-wait", "-1ms"), 2, "fetch max wait -1ms: want at least 1ms")
	wantFailure(t, run(ctx, t, map[string]string{"LEASEHOLD_FETCH_MAX_WAIT": "1"}, "run"), 2,
		`LEASEHOLD_FETCH_MAX_WAIT="1": not a duration`)
	wantFailure(t, run(ctx, t, nil, "run", "--sweep-interval", "-30s"), 2, "sweep interval -30s: want at least 100ms")
	wantFailure(t, run(ctx, t, nil, "run", "--session-timeout", "-6s"), 2, "session timeout -6s: want more than 0, or 0 to derive it")
	wantFailure(t, run(ctx, t, nil, "run", "--rebalance-timeout", "0s"), 2, "rebalance timeout 0s: want more than 0")
	wantFailure(t, run(ctx, t, nil, "dev-broker", "--group-min-session-timeout", "-1s"), 2,
		"group min session timeout -1s: want at least 1ms")
	wantFailure(t, run(ctx, t, nil, "dev-broker", "--group-min-session-timeout", "soon"), 2,
		`invalid value "soon" for flag -group-min-session-timeout`)
}

func TestParseRedisURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want string
	}{
		{"redis://alice:s3cret@127.0.0.1:6379/2", "*redis.Client"},
		{"rediss://alice:s3cret@cache.example:6380/0", "*redis.Client"},
		{"redis+cluster://alice:s3cret@10.0.0.1:7000?addr=10.0.0.2:7000&addr=10.0.0.3:7000", "*redis.ClusterClient"},
		{"redis+sentinel://alice:s3cret@10.0.0.1:26379?master_name=mymaster&addr=10.0.0.2:26379", "*redis.Client"},
	} {
		c, err := ParseRedisURL(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if got := fmt.Sprintf("%T", c); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.url, got, tc.want)
		}
		_ = c.Close()
	}
	if c, err := ParseRedisURL("rediss://alice:s3cret@cache.example:6380/0"); err == nil {
		if o := c.(*redis.Client).Options(); o.TLSConfig == nil || o.Username != "alice" || o.Password != "s3cret" {
			t.Errorf("rediss URL: TLS %v user %q", o.TLSConfig != nil, o.Username)
		}
		_ = c.Close()
	}
	if _, err := ParseRedisURL("redis+sentinel://10.0.0.1:26379"); err == nil || !strings.Contains(err.Error(), "master_name") {
		t.Errorf("sentinel without master: %v", err)
	}
	if _, err := ParseRedisURL("redis://u:topsecret@[::1"); err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Errorf("a bad URL's error must not echo the password: %v", err)
	}
}

// waitLine waits for a line matching re on the buffer and returns its
// first submatch.
func waitLine(t *testing.T, b *syncBuffer, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(b.String()); m != nil {
			return m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no line matching %v in %q", re, b.String())
	return ""
}

func TestDevBrokerAndEnqueue(t *testing.T) {
	testkit.SkipShort(t, "an embedded Kafka")
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"dev-broker", "--listen", "127.0.0.1:0", "--topics", "cli.jobs:3",
			"--group-min-session-timeout", "500ms"},
			&Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	}()
	addr := waitLine(t, &out, regexp.MustCompile(`dev-broker listening on (\S+)`))

	r := run(ctx, t, nil, "enqueue", "--brokers", addr, "--topics", "cli.jobs", "--count", "50", "--dup", "0.2",
		"--payload-size", "300", "--key-prefix", "cli", "--rate", "2000")
	if r.code != 0 || !strings.Contains(r.stdout, "enqueued 60 records (50 jobs, 10 duplicates)") {
		t.Fatalf("enqueue: %+v", r)
	}
	if !strings.Contains(r.stderr, "60/60") {
		t.Errorf("no progress on stderr: %q", r.stderr)
	}
	// A group member with a 1s session timeout, below kfake's default
	// minimum of 6s: admitted because of --group-min-session-timeout.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("cli.jobs"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.ConsumerGroup("cli.group"), kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	var fetchErr error
	for n := 0; n < 60 && pctx.Err() == nil && fetchErr == nil; {
		fs := cl.PollFetches(pctx)
		fs.EachError(func(topic string, p int32, err error) {
			if pctx.Err() == nil && fetchErr == nil {
				fetchErr = fmt.Errorf("fetch %s/%d: %w", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			n++
			for _, h := range r.Headers {
				if h.Key == leasehold.HeaderKey {
					keys[string(h.Value)]++
				}
			}
			if len(r.Value) < 300 {
				t.Errorf("payload of %d bytes, want at least 300", len(r.Value))
			}
		})
	}
	pcancel()
	cl.Close()
	if fetchErr != nil {
		t.Errorf("group consumer with a 1s session timeout: %v", fetchErr)
	}
	if len(keys) != 50 {
		t.Errorf("%d distinct keys, want 50", len(keys))
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("dev-broker exit %d: %s", code, errb.String())
	}
}

func TestPaymentStub(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"payment-stub", "--listen", "127.0.0.1:0"},
			&Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	}()
	addr := waitLine(t, &out, regexp.MustCompile(`payment-stub listening on (\S+)`))
	resp, err := http.Get("http://" + addr + "/ledger")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /ledger: %s", resp.Status)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("payment-stub exit %d: %s", code, errb.String())
	}
	wantFailure(t, run(context.Background(), t, nil, "payment-stub", "--listen", addr+"x"), 2, "listen")
}

func TestRunConsumesAndServesHealth(t *testing.T) {
	t.Parallel()
	url, prefix, _ := sharedRedisURL(t)
	k := testkit.StartKafka(t)
	topic := k.Topic(t, "cli-run", 3)
	k.CreateTopic(t, topic+".dlq", 1)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"run", "--brokers", strings.Join(k.Brokers(), ","), "--topics", topic,
			"--group", "g-" + topic, "--prefix", prefix, "--http", "127.0.0.1:0", "--lease-ttl", "2s",
			"--heartbeat-interval", "500ms", "--fetch-max-wait", "250ms"},
			&Env{Stdout: &out, Stderr: &errb, Getenv: func(n string) string { return map[string]string{"REDIS_URL": url}[n] }})
	}()
	addr := waitLine(t, &errb, regexp.MustCompile(`http listening" addr=(\S+)`))
	waitReady := func() int {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(20 * time.Second)
	for waitReady() != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("never ready: %s", errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := run(ctx, t, nil, "enqueue", "--brokers", strings.Join(k.Brokers(), ","), "--topics", topic,
		"--count", "20", "--dup", "0.5", "--sleep", "200ms", "--steps", "2", "--progress=false"); r.code != 0 {
		t.Fatalf("enqueue: %+v", r)
	}
	end := k.EndOffsets(t, topic)
	deadline = time.Now().Add(30 * time.Second)
	for {
		got := k.Committed(t, "g-"+topic, topic)
		all := true
		for p, e := range end {
			all = all && got[p] == e
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("offsets not committed to the end: %v of %v; log:\n%s", got, end, errb.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), "leasehold_claims") {
		t.Errorf("/metrics lacks leasehold_claims:\n%.2000s", body)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exit %d: %s", code, errb.String())
	}
}

func TestOpsCommands(t *testing.T) {
	t.Parallel()
	url, prefix, rdb := sharedRedisURL(t)
	env := map[string]string{"REDIS_URL": url, "LEASEHOLD_PREFIX": prefix}
	ctx := context.Background()

	// Hold the lease of one key as the worker would.
	s := workerStore(t, rdb, prefix)
	fpr, err := idempotency.PayloadFingerprint([]byte("order"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, "order-7", fpr)
	if err != nil || c.Outcome != idempotency.Acquired {
		t.Fatalf("claim: %v %v", c.Outcome, err)
	}
	l := c.Lease
	// Details with a terminal escape: printed escaped, never raw.
	if err := s.SaveDetails(ctx, c, []byte("{\"page\":7}\x1b[2J")); err != nil {
		t.Fatal(err)
	}

	r := run(ctx, t, env, "inspect", "order-7")
	if r.code != 0 || !strings.Contains(r.stdout, "held") || !strings.Contains(r.stdout, fmt.Sprint(l.Fence())) {
		t.Errorf("inspect: %+v", r)
	}
	for _, want := range []string{"PROCESSING", "attempt", `"{\"page\":7}\x1b[2J"`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, leasing.Token(l)) || strings.Contains(r.stdout, "\x1b") {
		t.Errorf("inspect printed the owner token or a raw escape:\n%s", r.stdout)
	}
	r = run(ctx, t, env, "leases")
	if r.code != 0 || !strings.Contains(r.stdout, "order-7") || !strings.Contains(r.stdout, "1 leases held") {
		t.Errorf("leases: %+v", r)
	}
	for _, want := range []string{"STATE", "PROCESSING", `"{\"page\":7}\x1b[2J"`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("leases output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, leasing.Token(l)) || strings.Contains(r.stdout, "\x1b") {
		t.Errorf("leases printed the owner token or a raw escape:\n%s", r.stdout)
	}

	// A finished key and a key never seen.
	done, err := s.Claim(ctx, "order-8", fpr)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, done, []byte("paid")); err != nil {
		t.Fatal(err)
	}
	r = run(ctx, t, env, "inspect", "order-8")
	flat := strings.Join(strings.Fields(r.stdout), " ") // tabwriter pads columns
	for _, want := range []string{"record COMPLETED", "finished at", fmt.Sprintf("result %d bytes", len("paid")), "heartbeat details none"} {
		if r.code != 0 || !strings.Contains(flat, want) {
			t.Errorf("inspect of a completed key lacks %q: %+v", want, r)
		}
	}
	// A failed key: inspect shows its error text, escaped, in text and JSON.
	failed, err := s.Claim(ctx, "order-10", fpr)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Fail(ctx, failed, idempotency.Terminal, errors.New("card declined\x1b[2J")); err != nil {
		t.Fatal(err)
	}
	r = run(ctx, t, env, "inspect", "order-10")
	flat = strings.Join(strings.Fields(r.stdout), " ")
	if r.code != 0 || !strings.Contains(flat, `record FAILED`) || !strings.Contains(flat, `error "card declined\x1b[2J"`) ||
		strings.Contains(r.stdout, "\x1b") {
		t.Errorf("inspect of a failed key does not show its error text, escaped: %+v", r)
	}
	r = run(ctx, t, env, "inspect", "--json", "order-10")
	var ij struct {
		Record struct{ Error string } `json:"record"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ij); err != nil || ij.Record.Error != "card declined\x1b[2J" {
		t.Errorf("inspect --json of a failed key: error %q (%v): %+v", ij.Record.Error, err, r)
	}
	if r := run(ctx, t, env, "inspect", "order-9"); r.code != 0 || !strings.Contains(r.stdout, "ABSENT") {
		t.Errorf("inspect of an unknown key: %+v", r)
	}
	r = run(ctx, t, env, "expire", "order-7")
	if r.code != 0 || !strings.Contains(r.stderr, "lease expired by operator") {
		t.Errorf("expire: %+v", r)
	}
	select {
	case <-l.Done():
	case <-time.After(15 * time.Second):
		t.Error("the holder did not lose the expired lease")
	}
	wantFailure(t, run(ctx, t, env, "expire", "order-7"), 1, `no lease held for key "order-7"`)
	if r := run(ctx, t, env, "inspect", "order-7"); r.code != 0 || !strings.Contains(r.stdout, "none") ||
		!strings.Contains(r.stdout, "PROCESSING") {
		t.Errorf("inspect after expire (the record stays PROCESSING until a takeover): %+v", r)
	}
	// capacity says that it writes into the live Redis before it does.
	if r := run(ctx, t, env, "capacity", "--rate", "200", "--retention", "1h"); r.code != 0 || !strings.Contains(r.stdout, "bytes per record") ||
		!strings.Contains(r.stdout, "bucket expiry") ||
		!strings.HasPrefix(r.stderr, "capacity: writing 20000 sample records under "+prefix+"idem:capacity:") {
		t.Errorf("capacity: %+v", r)
	}
	if r := run(ctx, t, env, "compensations"); r.code != 0 || !strings.Contains(r.stdout, "0 dead-lettered") {
		t.Errorf("compensations: %+v", r)
	}
	wantFailure(t, run(ctx, t, env, "compensations", "retry", "order-7"), 1, "no dead-lettered compensation")
}

func TestDemoEndsByItself(t *testing.T) {
	testkit.SkipShort(t, "an embedded Kafka")
	t.Parallel()
	url, _, _ := sharedRedisURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The totals below count exactly one lost lease (the one the demo
	// expires): the lease TTL is the demo's default, 2s, not a shorter one,
	// so that renewals delayed by a loaded machine (a renewal every TTL/3)
	// do not lose a second lease.
	r := run(ctx, t, map[string]string{"REDIS_URL": url}, "demo", "--jobs", "6", "--dup", "0.5", "--workers", "2",
		"--min-job", "300ms", "--max-job", "800ms", "--lease-ttl", "2s", "--timeout", "60s")
	if r.code != 0 {
		t.Fatalf("demo exit %d: %s\n%s", r.code, r.stderr, r.stdout)
	}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	var totals string
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "totals") {
			totals = sc.Text()
		}
	}
	for _, want := range []string{"6/6 jobs completed", "6 completions", "1 leases lost", "1 takeovers", "2 steps compensated", "1 dead-lettered"} {
		if !strings.Contains(totals, want) {
			t.Errorf("totals %q lack %q", totals, want)
		}
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", r.stdout)
	}
	// Every duplicate is replayed; redelivery after a rebalance may replay more.
	var replayed int
	if m := regexp.MustCompile(`(\d+) duplicates replayed`).FindStringSubmatch(totals); m != nil {
		_, _ = fmt.Sscan(m[1], &replayed)
	}
	if replayed < 3 {
		t.Errorf("totals %q: want at least 3 duplicates replayed", totals)
	}
}

// TestDemoStartsItsOwnRedis: with no REDIS_URL and no local server, the demo
// starts a redis-server on a free port and stops it afterwards.
func TestDemoStartsItsOwnRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, where, stop, err := demoRedis(ctx, "", "redis://127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(where, "redis-server started on 127.0.0.1:") {
		t.Errorf("where = %q", where)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("ping the started server: %v", err)
	}
	_ = c.Close()
	stop()
	c2, err := ParseRedisURL("redis://" + strings.TrimPrefix(where, "redis-server started on ") + "/0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c2.Close() }()
	if err := c2.Ping(ctx).Err(); err == nil {
		t.Error("the demo's redis-server still answers after stop")
	}
}

func TestPrintableDetails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		total int
		n     int
		want  string
	}{
		{"step 3", 6, 40, `"step 3"`},
		{"a\nb\x00", 4, 40, `"a\nb\x00"`},
		{"abcdef", 6, 3, `"abc"... (6 bytes)`},
		{"ab\u00e9", 4, 3, `"ab"... (4 bytes)`}, // é is 2 bytes: not cut in half
		{"abc", 9000, 40, `"abc"... (9000 bytes)`},
	} {
		if got := printable([]byte(tc.in), tc.total, tc.n); got != tc.want {
			t.Errorf("printable(%q, %d, %d) = %s, want %s", tc.in, tc.total, tc.n, got, tc.want)
		}
	}
}

// workerStore returns an idempotency store under prefix whose leases, of a
// 20s TTL, are renewed until the test ends: a worker's view, for tests that
// hold or finish keys for the operator commands to find.
func workerStore(t *testing.T, rdb redis.UniversalClient, prefix string) *idempotency.Store {
	t.Helper()
	m, err := lease.NewManager(rdb, lease.WithPrefix(prefix), lease.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	s, err := idempotency.New(t.Context(), rdb, m, idempotency.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/demo"
	"github.com/leasehold/leasehold/internal/freeport"
	"github.com/leasehold/leasehold/internal/paystub"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/tracing"
	"github.com/leasehold/leasehold/tracing/otelsetup"
)

// storyService is the service name the workers of the fault story trace
// under, and the console's --service-name.
const storyService = "payments"

// TestFaultStory is the fault story of a payments team, read back: a
// demo.transfer saga job, enqueued with a traced producer, runs on one of two
// `worker run` processes exporting traces to a real Jaeger over OTLP; after
// its first saga step (the charge) that worker is killed -9 (or stopped with
// SIGSTOP); the other takes the job over, refunds the lost attempt's charge
// and completes it. In the third variant Redis goes away instead: the
// test's own redis-server is paused (SIGSTOP) for longer than the lease TTL
// and then resumed, as a partition or a frozen primary would; the data
// survives, as it does in such an outage (a restart without persistence
// would lose the record and its history with it: nothing would be left to
// read back). The worker, unable to renew, finds its lease lost on its local
// deadline while Redis is still down and cancels the job's context; the
// held handler returns after the outage, the worker commits nothing (its
// lease is gone), refunds its charge as the lost attempt's owner, and a
// claim after the outage takes the key over under a new fence and completes
// it. Then the story must read back completely from
//   - `worker history KEY --json`: both attempts of type demo.transfer, the
//     first taken over (or, after the outage, lease lost by its owner's own
//     account) with its charge compensated, the second completed, each with
//     its trace ID;
//   - a standalone console (`worker ui --service-name`): its key view shows
//     the same attempts, with trace links, and the job's type (from the
//     history: the console has no registrations);
//   - Jaeger, through the links the console renders (the UI paths mapped to
//     the query API's): the first attempt's trace holds the compensation
//     span of its charge, with the key attribute and the first fence; the
//     second attempt's trace its job span, completed after a takeover; the
//     key's search link finds them.
//
// A kill -9 loses the span of the killed attempt's job (it never ended, so
// it was never exported); its claim and charge-step spans, ended before the
// kill and exported within the batch delay, do arrive, and are logged. A
// stopped worker resumes at the end, and a worker cut off from Redis runs
// on: their job span then ends with the lease lost, and the test asserts it
// reaches the same trace.
func TestFaultStory(t *testing.T) {
	j := testkit.StartJaeger(t)
	bin := buildWorker(t)
	brokers, _ := startBroker(t)
	pgURL := storyDB(t)
	payURL := storyPaystub(t)
	for _, f := range []storyFault{faultKill, faultStop, faultRedis} {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel()
			faultStory(t, j, bin, brokers, pgURL, payURL, f)
		})
	}
}

// storyFault is what befalls the worker running the saga job after its
// charge.
type storyFault string

const (
	faultKill  storyFault = "kill"  // kill -9
	faultStop  storyFault = "stop"  // SIGSTOP, SIGCONT once the job completed elsewhere
	faultRedis storyFault = "redis" // Redis paused for longer than the lease TTL, then resumed
)

func faultStory(t *testing.T, j *testkit.Jaeger, bin string, brokers []string, pgURL, payURL string, fault storyFault) {
	var rdb *redis.Client
	var prefix string
	var srv *testkit.RedisServer
	if fault == faultRedis {
		srv = testkit.StartRedis(t)
		rdb, prefix = srv.Client(t), "fs:"
	} else {
		rdb, prefix = testkit.SharedRedis(t)
	}
	topic := createTopic(t, brokers)
	group := "g-" + topic
	env := j.OTelEnv(storyService)
	extra := []string{"--pg", pgURL, "--payment-stub", payURL}
	workers := []*workerProc{
		startWorkerWith(t, bin, brokers, rdb, prefix, topic, group, env, extra...),
		startWorkerWith(t, bin, brokers, rdb, prefix, topic, group, env, extra...),
	}
	testkit.Eventually(t, 60*time.Second, "both workers ready and in one stable group", func() bool {
		return workers[0].ready() && workers[1].ready() && stableMembers(brokers, group) == 2
	})

	key := "pay-" + topic
	enqueueTransfer(t, j, brokers, topic, key)
	pay := paystub.NewClient(payURL, nil)
	testkit.Eventually(t, 60*time.Second, "the first attempt's charge", func() bool { return len(charges(t, pay, key)) == 1 })
	insp := inspect.New(rdb, inspect.WithPrefix(prefix))
	t.Cleanup(func() { _ = insp.Close(context.Background()) })
	first := readKeyNow(t, insp, key)
	if !first.Leased {
		t.Fatalf("after its charge the job holds no lease: %+v", first)
	}
	runner := runnerOf(t, insp, key, first.LeaseFence, workers)
	switch fault {
	case faultKill:
		runner.signal(t, syscall.SIGKILL)
	case faultStop:
		runner.signal(t, syscall.SIGSTOP)
	case faultRedis:
		redisOutage(t, srv, runner)
	}

	// The fault must have caught the first attempt running: the hold keeps
	// it in its handler for 30s after the charge.
	if k := readKeyNow(t, insp, key); k.State == idempotency.Completed {
		t.Fatalf("the job completed under fence %d before the %s fault reached worker %d", k.Fence, fault, runner.cmd.Process.Pid)
	}
	var done leasehold.KeyInfo
	testkit.Eventually(t, takeoverBound+60*time.Second, "the job completed by the other worker", func() bool {
		done = readKey(t, insp, key)
		return done.State == idempotency.Completed
	})
	if done.Fence <= first.LeaseFence {
		t.Fatalf("completed under fence %d, want the survivor's, above the first owner's %d", done.Fence, first.LeaseFence)
	}
	if cs := charges(t, pay, key); len(cs) != 2 || !cs[0].Refunded || cs[1].Refunded {
		t.Fatalf("charges of %s: %+v: want the first refunded and the second kept", key, cs)
	}
	if fault == faultStop {
		runner.signal(t, syscall.SIGCONT)
		testkit.Eventually(t, 30*time.Second, "the resumed worker's lease lost", func() bool {
			return runner.logged(`"msg":"lease lost"`)
		})
	}
	// Downstream, the transfer is written once. After a kill or a stop the
	// survivor writes it under its fence (a resumed worker's stale write is
	// refused by the fence guard); after the outage the first attempt's
	// held write lands before any newer fence exists, under the first
	// fence, and the second attempt's write finds the row and moves nothing.
	wantFence := done.Fence
	if fault == faultRedis {
		wantFence = first.LeaseFence
	}
	if f, n := storyTransfer(t, pgURL, key); n != 1 || f != wantFence {
		t.Errorf("%d transfer rows of %s, fence %d: want one, under fence %d", n, key, f, wantFence)
	}

	hs := storyHistory(t, bin, rdb, prefix, key, first.LeaseFence, done.Fence, fault)
	ui := startUI(t, bin, rdb, prefix, topic, group, j.QueryURL())
	links := storyConsole(t, ui, key, hs)
	if fault == faultKill && os.Getenv("LEASEHOLD_CONSOLE_SCREENSHOTS") == "1" {
		keyScreenshot(t, ui, key, filepath.Join("..", "..", "docs", "console", "key-history.png"))
	}
	storyTraces(t, j, key, hs, links, fault)
}

// runnerOf returns the worker process running key's attempt under fence, by
// the worker identity (host/pid) the claim wrote into the key's history: a
// gauge of held leases would also count a lease the other worker holds for
// a moment.
func runnerOf(t *testing.T, insp *inspect.Inspector, key string, fence uint64, workers []*workerProc) *workerProc {
	t.Helper()
	var runner *workerProc
	testkit.Eventually(t, 10*time.Second, "the worker that runs the job, from the key's history", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs, err := insp.History(ctx, key)
		if err != nil {
			return false
		}
		for _, a := range hs {
			if a.Fence != fence {
				continue
			}
			for _, w := range workers {
				if strings.HasSuffix(a.Worker, "/"+strconv.Itoa(w.cmd.Process.Pid)) {
					runner = w
					return true
				}
			}
		}
		return false
	})
	return runner
}

// redisOutage pauses the test's redis-server (SIGSTOP: connections stay
// open and nothing answers, as in a partition or a frozen primary; the
// data survives) until the runner found its lease lost on its local
// deadline and the outage outlasted the lease TTL, then resumes it.
func redisOutage(t *testing.T, srv *testkit.RedisServer, runner *workerProc) {
	t.Helper()
	paused := time.Now()
	srv.Pause()
	testkit.Eventually(t, leasehold.DefaultLeaseTTL+60*time.Second, "the runner's lease lost while Redis is down, for longer than the lease TTL", func() bool {
		return runner.logged(`"msg":"lease lost"`) && time.Since(paused) > leasehold.DefaultLeaseTTL
	})
	srv.Resume()
	t.Logf("Redis was down for %v", time.Since(paused).Round(time.Millisecond))
}

// keyScreenshot saves a PNG of the console's key view of key, scrolled to
// its history table (docs/console/key-history.png), from Debian's headless
// Chromium.
func keyScreenshot(t *testing.T, ui, key, path string) {
	t.Helper()
	const chromium = "/usr/bin/chromium"
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("disable-component-update", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(ui+"/#key/"+key)); err != nil {
		t.Fatalf("chromium %s: %v", chromium, err)
	}
	const rows = `document.querySelectorAll("#key-history tr[data-fence]").length`
	for n := 0; n < 2; {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[int](rows))
		if err != nil {
			t.Fatalf("the key view's history: %v", err)
		}
		n = v
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("key-history").scrollIntoView({block: "end"}); true`)); err != nil {
		t.Fatalf("scroll to the history: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // the scroll settles
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// storyAttempt is an attempt as `worker history --json` and the console's
// key view print it.
type storyAttempt struct {
	Attempt       int    `json:"attempt"`
	Fence         string `json:"fence"`
	Type          string `json:"type"`
	End           string `json:"end"`
	TakenOver     bool   `json:"taken_over"`
	TraceID       string `json:"trace_id"`
	SpanID        string `json:"span_id"`
	TraceURL      string `json:"trace_url"`
	Compensations []struct {
		Step    string `json:"step"`
		Outcome string `json:"outcome"`
	} `json:"compensations"`
}

func (a storyAttempt) compensated(step string) bool {
	return slices.ContainsFunc(a.Compensations, func(c struct {
		Step    string `json:"step"`
		Outcome string `json:"outcome"`
	}) bool {
		return c.Step == step && c.Outcome == "compensated"
	})
}

// storyHistory runs `worker history KEY --json` until both attempts read
// back (the compensation's outcome is written just after the refund), and
// checks them.
func storyHistory(t *testing.T, bin string, rdb *redis.Client, prefix, key string, fence1, fence2 uint64, fault storyFault) []storyAttempt {
	t.Helper()
	var out struct {
		Key      string         `json:"key"`
		Attempts []storyAttempt `json:"attempts"`
	}
	var raw []byte
	testkit.Eventually(t, 30*time.Second, "worker history showing both attempts", func() bool {
		o := rdb.Options()
		cmd := exec.Command(bin, "history", "--redis", fmt.Sprintf("redis://%s/%d", o.Addr, o.DB), "--prefix", prefix, "--json", key) //nolint:gosec // the test's own binary
		var err error
		if raw, err = cmd.Output(); err != nil {
			t.Logf("worker history: %v", err)
			return false
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("worker history --json: %v\n%s", err, raw)
		}
		return len(out.Attempts) == 2 && out.Attempts[0].compensated("charge")
	})
	a1, a2 := out.Attempts[0], out.Attempts[1]
	t.Logf("worker history %s --json:\n%s", key, raw)
	switch {
	case a1.Fence != fmt.Sprint(fence1) || a2.Fence != fmt.Sprint(fence2):
		t.Errorf("history fences %s, %s: want %d, %d", a1.Fence, a2.Fence, fence1, fence2)
	case fault == faultRedis && (a1.End != idempotency.EndLeaseLost || a1.TakenOver):
		// Its owner lived through the outage: it wrote its own end once
		// Redis was back, before any claim took the key over.
		t.Errorf("first attempt %+v: want lease_lost by its owner's account, not taken over", a1)
	case fault != faultRedis && !a1.TakenOver:
		t.Errorf("first attempt not marked taken over: %+v", a1)
	case a1.End != idempotency.EndTakenOver && a1.End != idempotency.EndLeaseLost:
		t.Errorf("first attempt ended %q, want %s or %s", a1.End, idempotency.EndTakenOver, idempotency.EndLeaseLost)
	case a2.End != idempotency.EndCompleted || a2.TakenOver || len(a2.Compensations) != 0:
		t.Errorf("second attempt %+v: want completed, nothing compensated", a2)
	case a1.Type != demo.TransferType || a2.Type != demo.TransferType:
		t.Errorf("attempts of types %q, %q: want %s", a1.Type, a2.Type, demo.TransferType)
	case a1.TraceID == "" || a2.TraceID == "":
		t.Errorf("attempts without a trace ID: %+v", out.Attempts)
	}
	return out.Attempts
}

// storyLinks are the trace links the console renders for a key.
type storyLinks struct {
	key      string   // the key's search
	attempts []string // each attempt's trace, oldest first
}

// storyConsole reads the key view of the standalone console and checks that
// it shows the attempts `worker history` printed.
func storyConsole(t *testing.T, ui, key string, hs []storyAttempt) storyLinks {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ui+"/api/key?key="+key, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var v struct {
		State    string         `json:"state"`
		Type     string         `json:"type"`
		TraceURL string         `json:"trace_url"`
		History  []storyAttempt `json:"history"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("console key view: %s, %v", resp.Status, err)
	}
	if v.State != idempotency.Completed.String() || len(v.History) != len(hs) || v.Type != demo.TransferType {
		t.Fatalf("console key view: state %s, type %q, %d attempts: want COMPLETED, %s and the %d of worker history",
			v.State, v.Type, len(v.History), demo.TransferType, len(hs))
	}
	links := storyLinks{key: v.TraceURL}
	for i, a := range v.History {
		h := hs[i]
		if a.Fence != h.Fence || a.Type != h.Type || a.End != h.End || a.TakenOver != h.TakenOver || a.TraceID != h.TraceID ||
			len(a.Compensations) != len(h.Compensations) || a.TraceURL == "" {
			t.Errorf("console attempt %d = %+v, want worker history's %+v with a trace link", i+1, a, h)
		}
		links.attempts = append(links.attempts, a.TraceURL)
	}
	if links.key == "" {
		t.Error("the console's key view has no trace search link")
	}
	return links
}

// storyTraces follows the console's links against Jaeger's query API: each
// UI path (/trace/ID, /search?...) has its API twin (/api/traces/ID,
// /api/traces?...).
func storyTraces(t *testing.T, j *testkit.Jaeger, key string, hs []storyAttempt, links storyLinks, fault storyFault) {
	t.Helper()
	hashed, _ := (*tracing.Tracer)(nil).KeyAttribute(key)
	f1, f2 := hs[0].Fence, hs[1].Fence
	first := func(tr testkit.JaegerTrace) bool {
		// The charge's refund: in the lost attempt's trace, with the key
		// and the lost fence, linked to the lost attempt's span.
		return slices.ContainsFunc(tr.Spans, func(s testkit.JaegerSpan) bool {
			return s.OperationName == tracing.SpanCompensation+" charge" && tag(s, tracing.AttrIdempotencyKey) == hashed &&
				tag(s, tracing.AttrFence) == f1 && tag(s, tracing.AttrOutcome) == tracing.OutcomeCompensated &&
				slices.ContainsFunc(s.References, func(r testkit.JaegerReference) bool { return r.SpanID == hs[0].SpanID })
		})
	}
	if fault == faultStop || fault == faultRedis {
		// The stopped attempt's job span ends when it resumes; the one cut
		// off from Redis when its held handler returns.
		compensated := first
		first = func(tr testkit.JaegerTrace) bool {
			return compensated(tr) && slices.ContainsFunc(tr.Spans, func(s testkit.JaegerSpan) bool {
				return isJob(s, hashed, f1) && tag(s, tracing.AttrOutcome) == tracing.OutcomeLeaseLost
			})
		}
	}
	second := func(tr testkit.JaegerTrace) bool {
		return slices.ContainsFunc(tr.Spans, func(s testkit.JaegerSpan) bool {
			return isJob(s, hashed, f2) && tag(s, tracing.AttrOutcome) == tracing.OutcomeCompleted &&
				slices.ContainsFunc(s.Logs, func(l testkit.JaegerLog) bool { ev, _ := l.Field("event"); return ev == tracing.EventTakeover })
		})
	}
	tr1 := followTrace(t, j, strings.Replace(links.attempts[0], "/trace/", "/api/traces/", 1), "the first attempt's compensation", first)
	followTrace(t, j, strings.Replace(links.attempts[1], "/trace/", "/api/traces/", 1), "the second attempt's completed job span", second)
	followTrace(t, j, strings.Replace(links.key, "/search?", "/api/traces?", 1), "both attempts by the key's search", func(tr testkit.JaegerTrace) bool {
		return first(tr) || second(tr)
	})
	var arrived []string
	for _, s := range tr1.Spans {
		if tag(s, tracing.AttrFence) == f1 {
			arrived = append(arrived, s.OperationName)
		}
	}
	t.Logf("spans of the %s attempt (fence %s) in its trace: %v", fault, f1, arrived)
}

func isJob(s testkit.JaegerSpan, hashed, fence string) bool {
	return strings.HasPrefix(s.OperationName, tracing.SpanProcess+" ") && tag(s, tracing.AttrIdempotencyKey) == hashed &&
		tag(s, tracing.AttrFence) == fence
}

// tag returns the span's tag k as a string; numbers (fences) in full.
func tag(s testkit.JaegerSpan, k string) string {
	for _, kv := range s.Tags {
		if kv.Key != k {
			continue
		}
		if f, ok := kv.Value.(float64); ok {
			return strconv.FormatFloat(f, 'f', -1, 64)
		}
		return fmt.Sprint(kv.Value)
	}
	return ""
}

// followTrace GETs a query API URL until one of the traces it answers
// satisfies ok, and returns that trace.
func followTrace(t *testing.T, j *testkit.Jaeger, u, what string, ok func(testkit.JaegerTrace) bool) testkit.JaegerTrace {
	t.Helper()
	if !strings.HasPrefix(u, j.QueryURL()+"/api/traces") {
		t.Fatalf("console link %s: want one into Jaeger at %s", u, j.QueryURL())
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		traces, err := getTraces(u)
		for _, tr := range traces {
			if ok(tr) {
				return tr
			}
		}
		if time.Now().After(deadline) {
			var seen []string
			for _, tr := range traces {
				for _, s := range tr.Spans {
					seen = append(seen, fmt.Sprintf("%s %s %s{key=%s fence=%s outcome=%s refs=%v}", tr.TraceID, s.SpanID, s.OperationName,
						tag(s, tracing.AttrIdempotencyKey), tag(s, tracing.AttrFence), tag(s, tracing.AttrOutcome), s.References))
				}
			}
			t.Fatalf("%s not found in Jaeger at %s within 60s (error %v); spans there:\n%s", what, u, err, strings.Join(seen, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func getTraces(u string) ([]testkit.JaegerTrace, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		Data []testkit.JaegerTrace `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&out)
	return out.Data, err
}

// startUI runs a standalone console (`worker ui`) over the workers' Redis,
// linking to Jaeger under storyService, and returns its base URL.
func startUI(t *testing.T, bin string, rdb *redis.Client, prefix, topic, group, jaegerURL string) string {
	t.Helper()
	addr := storyAddr(t)
	o := rdb.Options()
	cmd := exec.Command(bin, "ui", "--redis", fmt.Sprintf("redis://%s/%d", o.Addr, o.DB), "--prefix", prefix, //nolint:gosec // the test's own binary
		"--topics", topic, "--group", group, "--listen", addr, "--jaeger-url", jaegerURL, "--service-name", storyService)
	cmd.Env = append(cmd.Environ(), "OTEL_TRACES_EXPORTER=none")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	base := "http://" + addr
	testkit.Eventually(t, 30*time.Second, "the console answering", func() bool {
		resp, err := http.Get(base + "/") //nolint:noctx // a probe
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base
}

func storyAddr(t *testing.T) string {
	t.Helper()
	p, err := freeport.Port(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

// readKey reads key's record for a wait: a failed read is logged and returns
// the zero KeyInfo, so that the wait tries again.
func readKey(t *testing.T, insp *inspect.Inspector, key string) leasehold.KeyInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ki, err := insp.Key(ctx, key)
	if err != nil {
		t.Logf("inspect %s: %v", key, err)
	}
	return ki
}

// readKeyNow reads key's record and fails the test if it cannot: a check
// that a key is not yet completed must not pass on the zero KeyInfo of a
// failed read.
func readKeyNow(t *testing.T, insp *inspect.Inspector, key string) leasehold.KeyInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ki, err := insp.Key(ctx, key)
	if err != nil {
		t.Fatalf("inspect %s: %v", key, err)
	}
	return ki
}

// charges returns the payment stub's charges of key, in charge order.
func charges(t *testing.T, pay *paystub.Client, key string) []paystub.Charge {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := pay.Ledger(ctx)
	if err != nil {
		t.Logf("ledger: %v", err)
		return nil
	}
	var out []paystub.Charge
	for _, c := range l.Charges {
		if strings.HasPrefix(c.ID, key+"/") {
			out = append(out, c)
		}
	}
	return out
}

// storyDB readies demo.transfer's tables and accounts in a fresh schema and
// returns its URL.
func storyDB(t *testing.T) string {
	t.Helper()
	pool := testkit.Postgres(t)
	ctx := context.Background()
	if err := demo.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"alice", "bob"} {
		if err := demo.OpenAccount(ctx, pool, a, 1_000_000); err != nil {
			t.Fatal(err)
		}
	}
	cc := pool.Config().ConnConfig
	if cc.Password != "" {
		t.Fatal("the fault story needs a PostgreSQL without a password (trust authentication)")
	}
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&search_path=%s", cc.User,
		net.JoinHostPort(cc.Host, fmt.Sprint(cc.Port)), cc.Database, cc.RuntimeParams["search_path"])
}

// storyTransfer returns the fence of key's demo_transfers row and how many
// rows it has.
func storyTransfer(t *testing.T, pgURL, key string) (uint64, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var fence int64
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*), coalesce(max(fence), 0) FROM demo_transfers WHERE key = $1`, key).Scan(&n, &fence)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(fence), n //nolint:gosec // fences are positive
}

// storyPaystub serves the payment stub in the test's process.
func storyPaystub(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = paystub.ServeNew(ctx, ln, nil) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String()
}

// enqueueTransfer produces one demo.transfer job that holds its first
// attempt for 30s after its charge, through the library with a tracer
// exporting to Jaeger, as a payments service would: its trace starts at the
// enqueue span.
func enqueueTransfer(t *testing.T, j *testkit.Jaeger, brokers []string, topic, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(j.OTLPHTTPEndpoint()+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tel, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal(), otelsetup.WithSpanExporter(exp),
		otelsetup.WithServiceName(storyService+"-producer"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(ctx) }()
	tr, err := tracing.New(tracing.WithTelemetry(tel))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), tr.KgoOpt())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	payload, _ := json.Marshal(demo.TransferArgs{From: "alice", To: "bob", Amount: 5, HoldMS: 30_000})
	if _, err := leasehold.Enqueue(ctx, cl, leasehold.NewJob{Type: demo.TransferType, Key: key, Payload: payload}); err != nil {
		t.Fatal(err)
	}
}

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/demo"
	"github.com/leasehold/leasehold/internal/freeport"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/tracing"
	"github.com/leasehold/leasehold/tracing/otelsetup"
)

// proc is a worker subprocess whose output is kept for failure messages.
type proc struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.out.String()
	if len(s) > 6000 {
		s = "..." + s[len(s)-6000:]
	}
	return s
}

// stop sends SIGTERM (the worker drains and flushes its spans) and waits.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("%s did not stop within 30s of SIGTERM:\n%s", p.name, p.output())
	}
}

func startProc(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.output())
		}
	})
	return p
}

// runProc runs a worker command to completion.
func runProc(t *testing.T, name, bin string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s (%s): %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func buildWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "worker")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/leasehold/leasehold/cmd/worker").CombinedOutput()
	if err != nil {
		t.Fatalf("go build cmd/worker: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := freeport.Port(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

// waitLine waits until p printed a line containing s.
func waitLine(t *testing.T, p *proc, s string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.output(), s) {
		select {
		case <-p.exited:
			t.Fatalf("%s exited before printing %q:\n%s", p.name, s, p.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q within %v:\n%s", p.name, s, d, p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hashedKey(k string) string {
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// e2eTrace indexes one Jaeger trace.
type e2eTrace struct {
	tr   testkit.JaegerTrace
	byID map[string]testkit.JaegerSpan
}

func newE2ETrace(tr testkit.JaegerTrace) e2eTrace {
	e := e2eTrace{tr: tr, byID: map[string]testkit.JaegerSpan{}}
	for _, s := range tr.Spans {
		e.byID[s.SpanID] = s
	}
	return e
}

// jobOperation is the name of every job span: `process <topic>`, the job
// type being the leasehold.job.type attribute.
const jobOperation = tracing.SpanProcess + " leasehold.jobs"

// jobSpans returns the job spans of the idempotency key (hashed as the worker
// records it by default), oldest first.
func (e e2eTrace) jobSpans(key string) []testkit.JaegerSpan {
	var out []testkit.JaegerSpan
	for _, s := range e.tr.Spans {
		if v, _ := s.Tag(tracing.AttrIdempotencyKey); v == hashedKey(key) && s.OperationName == jobOperation {
			out = append(out, s)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].StartTime < out[j-1].StartTime; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// ancestry lists operation names from s up to the root.
func (e e2eTrace) ancestry(s testkit.JaegerSpan) []string {
	out := []string{s.OperationName}
	for p := s.Parent(); p != ""; {
		ps, ok := e.byID[p]
		if !ok {
			return append(out, "<missing parent>")
		}
		out = append(out, ps.OperationName)
		p = ps.Parent()
	}
	return out
}

// children lists the operation names of s's children.
func (e e2eTrace) children(s testkit.JaegerSpan) []string {
	var out []string
	for _, c := range e.tr.Spans {
		if c.Parent() == s.SpanID {
			out = append(out, c.OperationName)
		}
	}
	return out
}

func events(s testkit.JaegerSpan) []string {
	var out []string
	for _, l := range s.Logs {
		if ev, ok := l.Field("event"); ok {
			out = append(out, ev)
		}
	}
	return out
}

func has(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// waitTraces polls Jaeger until cond holds for the worker's traces.
func waitTraces(t *testing.T, j *testkit.Jaeger, operation, what string, d time.Duration, cond func([]e2eTrace) bool) []e2eTrace {
	t.Helper()
	deadline := time.Now().Add(d)
	var last []e2eTrace
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		raw, err := j.Traces(ctx, "leasehold-worker", operation, 100)
		cancel()
		if err == nil {
			last = last[:0]
			for _, r := range raw {
				last = append(last, newE2ETrace(r))
			}
			if cond(last) {
				return last
			}
		}
		lastErr = err
		if time.Now().After(deadline) {
			var spans []string
			for _, tr := range last {
				for _, s := range tr.tr.Spans {
					k, _ := s.Tag(tracing.AttrIdempotencyKey)
					spans = append(spans, fmt.Sprintf("%s[%s events=%v]", s.OperationName, k, events(s)))
				}
			}
			t.Fatalf("Jaeger: %s not seen within %v (last error %v); worker spans: %v", what, d, lastErr, spans)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func findJob(ts []e2eTrace, key string) (e2eTrace, []testkit.JaegerSpan) {
	for _, tr := range ts {
		if js := tr.jobSpans(key); len(js) > 0 {
			return tr, js
		}
	}
	return e2eTrace{}, nil
}

// TestJaegerEndToEnd runs `worker enqueue` and `worker run` (with an embedded
// broker from `worker dev-broker` and its own redis-server) with OTLP pointed
// at a real Jaeger, then reads the traces back from Jaeger's query API.
func TestJaegerEndToEnd(t *testing.T) {
	j := testkit.StartJaeger(t)
	bin := buildWorker(t)
	rs := testkit.StartRedis(t)
	redisURL := "redis://" + rs.Addr() + "/0"

	brokerAddr := freeAddr(t)
	broker := startProc(t, "dev-broker", bin, nil, "dev-broker", "--listen", brokerAddr)
	waitLine(t, broker, "dev-broker listening on", 30*time.Second)

	// demo.transfer: PostgreSQL (fresh schema), the payment stub.
	pool := testkit.Postgres(t)
	schema := pool.Config().ConnConfig.RuntimeParams["search_path"]
	pgURL := pgURLFor(t, pool, schema)
	if err := demo.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"alice", "bob"} {
		if err := demo.OpenAccount(context.Background(), pool, a, 1000); err != nil {
			t.Fatal(err)
		}
	}
	stall := startStallProxy(t, pgTarget(pool))
	payAddr := freeAddr(t)
	startProc(t, "payment-stub", bin, nil, "payment-stub", "--listen", payAddr)
	waitHTTP(t, "http://"+payAddr+"/ledger")

	workerEnv := append(j.OTelEnv("leasehold-worker"), "LEASEHOLD_PREFIX=e2e:")
	httpAddr := freeAddr(t)
	worker := startProc(t, "worker run", bin, workerEnv, "run",
		"--brokers", brokerAddr, "--redis", redisURL, "--lease-ttl", "1500ms",
		"--pg", strings.Replace(pgURL, pgTarget(pool), stall.addr(), 1), "--payment-stub", "http://"+payAddr,
		"--http", httpAddr, "--log-format", "json", "--log-level", "debug")

	prodEnv := j.OTelEnv("leasehold-producer")
	enqueue := func(args ...string) {
		runProc(t, "worker enqueue", bin, prodEnv, append([]string{"enqueue", "--brokers", brokerAddr, "--progress=false"}, args...)...)
	}
	run := fmt.Sprintf("r%d", time.Now().UnixNano()%1_000_000)

	// 1. A job enqueued by `worker enqueue`: one trace from the CLI's enqueue
	// span through kotel's publish and receive spans to the job span and its
	// claim, handler and commit children.
	okKey := run + "-ok-0"
	enqueue("--count", "1", "--sleep", "300ms", "--steps", "3", "--key-prefix", run+"-ok")
	enqueueRoot := tracing.SpanEnqueue + " demo.sleep"
	ts := waitTraces(t, j, jobOperation, "the job "+okKey+" committed, under its enqueue span", 90*time.Second, func(ts []e2eTrace) bool {
		tr, js := findJob(ts, okKey)
		return len(js) > 0 && has(tr.children(js[0]), tracing.SpanCommit) && has(tr.ancestry(js[0]), enqueueRoot)
	})
	tr, js := findJob(ts, okKey)
	job := js[0]
	wantAnc := []string{job.OperationName, "leasehold.jobs receive", "leasehold.jobs publish", enqueueRoot}
	if got := tr.ancestry(job); strings.Join(got, " < ") != strings.Join(wantAnc, " < ") {
		t.Errorf("CLI-enqueued job span ancestry %v, want %v", got, wantAnc)
	}
	for _, s := range tr.tr.Spans {
		if s.OperationName != enqueueRoot {
			continue
		}
		if k, _ := s.Tag(tracing.AttrIdempotencyKey); k != hashedKey(okKey) {
			t.Errorf("enqueue span key %q, want %q", k, hashedKey(okKey))
		}
		if s.Parent() != "" {
			t.Errorf("enqueue span has a parent %s: want it to be the trace's root", s.Parent())
		}
	}
	kids := tr.children(job)
	for _, want := range []string{tracing.SpanClaim, tracing.SpanHandler, tracing.SpanCommit} {
		if !has(kids, want) {
			t.Errorf("job span children %v lack %q", kids, want)
		}
	}
	for tag, want := range map[string]string{
		tracing.AttrOutcome: tracing.OutcomeCompleted, "messaging.system": "kafka", tracing.AttrJobType: "demo.sleep",
		"messaging.operation.type": "process", "messaging.destination.name": "leasehold.jobs",
		"messaging.consumer.group.name": "leasehold",
	} {
		if got, _ := job.Tag(tag); got != want {
			t.Errorf("job span %s = %q, want %q", tag, got, want)
		}
	}
	if f, _ := job.Tag(tracing.AttrFence); f == "" || f == "0" {
		t.Errorf("job span has no fence")
	}
	if !has(events(job), tracing.EventHeartbeat) {
		t.Errorf("job span events %v: no heartbeat", events(job))
	}

	// 2. A duplicate of the completed job replays its outcome.
	enqueue("--count", "1", "--sleep", "300ms", "--steps", "3", "--key-prefix", run+"-ok")
	ts = waitTraces(t, j, jobOperation, "the duplicate replay of "+okKey, 60*time.Second, func(ts []e2eTrace) bool {
		for _, tr := range ts {
			for _, s := range tr.jobSpans(okKey) {
				if has(events(s), tracing.EventDuplicateReplay) {
					return true
				}
			}
		}
		return false
	})
	for _, tr := range ts {
		for _, s := range tr.jobSpans(okKey) {
			if has(events(s), tracing.EventDuplicateReplay) {
				if got, _ := s.Tag(tracing.AttrOutcome); got != tracing.OutcomeDuplicate {
					t.Errorf("replayed job's outcome %q, want %q", got, tracing.OutcomeDuplicate)
				}
				if has(tr.children(s), tracing.SpanHandler) {
					t.Errorf("the duplicate ran its handler: children %v", tr.children(s))
				}
			}
		}
	}

	// 3. A transfer, enqueued through the library with an enqueue span, whose
	// lease is expired by the operator after its charge while its PostgreSQL
	// write is stalled: one trace runs from the enqueue span to the job, the
	// job span carries the lease-lost event, and the charge is refunded by
	// the compensation.
	lostKey := run + "-lost"
	stall.hold()
	enqueueTransfer(t, j, brokerAddr, lostKey)
	waitCharge(t, "http://"+payAddr, lostKey)
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command(bin, "expire", "--redis", redisURL, "--prefix", "e2e:", lostKey).CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker expire %s: %v\n%s", lostKey, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts = waitTraces(t, j, jobOperation, "the lease-lost event of "+lostKey, 60*time.Second, func(ts []e2eTrace) bool {
		_, js := findJob(ts, lostKey)
		for _, s := range js {
			if has(events(s), tracing.EventLeaseLost) {
				return true
			}
		}
		return false
	})
	tr, js = findJob(ts, lostKey)
	for _, s := range js {
		for _, l := range s.Logs {
			if ev, _ := l.Field("event"); ev == tracing.EventLeaseLost {
				if c, _ := l.Field(tracing.AttrCause); c != "expired" {
					t.Errorf("lease lost cause %q, want expired (worker expire)", c)
				}
			}
		}
		want := []string{s.OperationName, "leasehold.jobs receive", "leasehold.jobs publish", tracing.SpanEnqueue + " " + demo.TransferType}
		if got := tr.ancestry(s); strings.Join(got, " < ") != strings.Join(want, " < ") {
			t.Errorf("transfer job span ancestry %v, want %v", got, want)
		}
	}
	// The charge was refunded by the compensation, and counted.
	waitRefund(t, "http://"+payAddr, lostKey)
	// The refund ran under a `compensate <step>` span in the job's trace.
	compensated := func(tr e2eTrace) []testkit.JaegerSpan {
		var out []testkit.JaegerSpan
		for _, s := range tr.tr.Spans {
			if o, _ := s.Tag(tracing.AttrOutcome); strings.HasPrefix(s.OperationName, tracing.SpanCompensation+" ") && o == tracing.OutcomeCompensated {
				out = append(out, s)
			}
		}
		return out
	}
	ts = waitTraces(t, j, jobOperation, "the compensate span of "+lostKey, 60*time.Second, func(ts []e2eTrace) bool {
		tr, js := findJob(ts, lostKey)
		return len(js) > 0 && len(compensated(tr)) > 0
	})
	tr, _ = findJob(ts, lostKey)
	for _, s := range compensated(tr) {
		if anc := tr.ancestry(s); !has(anc, jobOperation) || anc[len(anc)-1] != tracing.SpanEnqueue+" "+demo.TransferType {
			t.Errorf("compensate span ancestry %v: want it under the transfer's job span, in the enqueued trace", anc)
		}
		if st, _ := s.Tag(tracing.AttrStep); st == "" {
			t.Errorf("compensate span %s has no %s", s.OperationName, tracing.AttrStep)
		}
		if f, _ := s.Tag(tracing.AttrFence); f == "" || f == "0" {
			t.Errorf("compensate span %s has no fence", s.OperationName)
		}
	}
	if got := grepLines(scrape(t, "http://"+httpAddr+"/metrics"), "leasehold_compensations_total{"); !strings.Contains(got, `outcome="compensated"`) {
		t.Errorf("worker /metrics has no compensated step: %q", got)
	}

	// With PostgreSQL back, the next attempt takes the record over (a higher
	// fence) and completes, in the same trace.
	stall.release()
	ts = waitTraces(t, j, jobOperation, "the takeover and completion of "+lostKey, 60*time.Second, func(ts []e2eTrace) bool {
		for _, tr := range ts {
			for _, s := range tr.jobSpans(lostKey) {
				o, _ := s.Tag(tracing.AttrOutcome)
				if has(events(s), tracing.EventTakeover) && o == tracing.OutcomeCompleted && has(tr.children(s), tracing.SpanCommit) {
					return true
				}
			}
		}
		return false
	})
	// Both attempts are in the trace of the one enqueued record.
	tr, js = findJob(ts, lostKey)
	var lostSeen, takeoverSeen bool
	for _, s := range js {
		lostSeen = lostSeen || has(events(s), tracing.EventLeaseLost)
		takeoverSeen = takeoverSeen || has(events(s), tracing.EventTakeover)
	}
	if !lostSeen || !takeoverSeen || len(js) < 2 {
		t.Errorf("trace %s: %d job spans, lease lost %v, takeover %v: want both attempts in one trace", tr.tr.TraceID, len(js), lostSeen, takeoverSeen)
	}

	worker.stop(t)
}

func pgTarget(pool *pgxpool.Pool) string {
	cc := pool.Config().ConnConfig
	return net.JoinHostPort(cc.Host, fmt.Sprint(cc.Port))
}

// pgURLFor is a URL of the pool's server and database with search_path set
// to the test's schema.
func pgURLFor(t *testing.T, pool *pgxpool.Pool, schema string) string {
	t.Helper()
	cc := pool.Config().ConnConfig
	user := cc.User
	if cc.Password != "" {
		t.Fatal("the e2e test needs a PostgreSQL without a password (trust authentication)")
	}
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&search_path=%s", user, pgTarget(pool), cc.Database, schema)
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// enqueueTransfer produces one demo.transfer job through the library, traced
// to Jaeger like `worker enqueue` (which only makes demo.sleep payloads).
func enqueueTransfer(t *testing.T, j *testkit.Jaeger, broker, key string) {
	t.Helper()
	for _, kv := range j.OTelEnv("leasehold-producer") {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tel, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(ctx) }()
	tr, err := tracing.New(tracing.WithTelemetry(tel))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic(leasehold.DefaultTopic), tr.KgoOpt())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	payload, _ := json.Marshal(demo.TransferArgs{From: "alice", To: "bob", Amount: 5})
	// Enqueue makes the trace's root span, `enqueue <type>`, with the
	// tracer of the client's hooks.
	_, err = leasehold.Enqueue(ctx, cl, leasehold.NewJob{Type: demo.TransferType, Key: key, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
}

// waitCharge waits until the payment stub has a charge for key.
func waitCharge(t *testing.T, base, key string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/ledger")
		if err == nil {
			var l struct {
				Charges []struct {
					ID string `json:"id"`
				} `json:"charges"`
			}
			err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&l)
			_ = resp.Body.Close()
			for _, c := range l.Charges {
				if strings.HasPrefix(c.ID, key+"/") {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no charge for %s in the payment stub's ledger within 60s (%v)", key, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stallProxy forwards TCP to a server; while held, it forwards nothing in
// either direction but keeps every connection open, so that a client's
// query hangs until its context gives up.
type stallProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	gate   chan struct{} // closed while not held
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target, gate: make(chan struct{})}
	close(p.gate)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		p.release()
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

func (p *stallProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

func (p *stallProxy) wait() {
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	<-g
}

func (p *stallProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

func (p *stallProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() { _ = dst.Close() }()
	r := bufio.NewReader(src)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// waitRefund waits until the payment stub refunded a charge of key.
func waitRefund(t *testing.T, base, key string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/ledger")
		if err == nil {
			var l struct {
				Charges []struct {
					ID       string `json:"id"`
					Refunded bool   `json:"refunded"`
				} `json:"charges"`
			}
			err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&l)
			_ = resp.Body.Close()
			for _, c := range l.Charges {
				if strings.HasPrefix(c.ID, key+"/") && c.Refunded {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the charge of %s was not refunded within 60s (%v)", key, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// jaegerConfig is an all-in-one Jaeger v2 configuration: OTLP receivers,
// in-memory storage and the query API, all on loopback ports, with the
// collector's own telemetry off so that it opens no other port.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// Jaeger is a Jaeger v2 all-in-one process with in-memory storage, started
// for one test on free loopback ports. The test's cleanup stops it.
type Jaeger struct {
	t                                       testing.TB
	queryPort, grpcPort, otlpGRPC, otlpHTTP int
	cmd                                     *exec.Cmd
	log                                     *jaegerOutput
	exited                                  chan struct{}
}

var (
	jaegerBuildOnce sync.Once
	jaegerBuildPath string
	jaegerBuildErr  error
)

// JaegerBinary returns the path of the Jaeger binary: $JAEGER_BIN if set
// (make test sets it), else the one tools/jaeger/build.sh builds into the user
// cache (minutes the first time, then cached per version). It fails the test
// if the binary cannot be found or built: a trace test without Jaeger must
// not pass.
func JaegerBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("JAEGER_BIN"); p != "" {
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 { //nolint:gosec // JAEGER_BIN names the binary to run on purpose
			t.Fatalf("testkit: JAEGER_BIN=%s is not an executable file (build it with `make jaeger`): %v", p, err)
		}
		return p
	}
	jaegerBuildOnce.Do(func() { jaegerBuildPath, jaegerBuildErr = buildJaeger() })
	if jaegerBuildErr != nil {
		t.Fatalf("testkit: cannot build Jaeger (run `make jaeger` to see why, or set JAEGER_BIN): %v", jaegerBuildErr)
	}
	return jaegerBuildPath
}

func buildJaeger() (string, error) {
	script, err := jaegerFindUp("tools/jaeger/build.sh")
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(context.Background(), "sh", script) //nolint:gosec // the repository's own build script
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", script, err, jaegerTail(stderr.String(), 4000))
	}
	p := strings.TrimSpace(string(out))
	if p == "" {
		return "", fmt.Errorf("%s printed no path", script)
	}
	return p, nil
}

// jaegerFindUp looks for rel in the working directory and its parents.
func jaegerFindUp(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found above the working directory", rel)
		}
		dir = parent
	}
}

// StartJaeger starts Jaeger (see [JaegerBinary]) and waits until its query
// API and OTLP receivers answer. It fails the test if Jaeger does not start.
func StartJaeger(t testing.TB) *Jaeger {
	t.Helper()
	SkipShort(t, "Jaeger")
	bin := JaegerBinary(t)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		j, err := startJaeger(t, bin)
		if err == nil {
			return j
		}
		lastErr = err // most likely a port taken between freePort and bind
	}
	t.Fatalf("testkit: Jaeger (%s) did not start: %v", bin, lastErr)
	return nil
}

func startJaeger(t testing.TB, bin string) (*Jaeger, error) {
	j := &Jaeger{t: t, log: &jaegerOutput{}, exited: make(chan struct{})}
	for _, p := range []*int{&j.queryPort, &j.grpcPort, &j.otlpGRPC, &j.otlpHTTP} {
		var err error
		if *p, err = freePort(); err != nil {
			return nil, err
		}
	}
	cfg := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, j.queryPort, j.grpcPort, j.otlpGRPC, j.otlpHTTP), 0o600); err != nil {
		return nil, err
	}
	j.cmd = exec.CommandContext(context.Background(), bin, "--config", "file:"+cfg) //nolint:gosec // the Jaeger binary the test was given
	j.cmd.Stdout, j.cmd.Stderr = j.log, j.log
	if err := j.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = j.cmd.Wait(); close(j.exited) }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-j.exited:
			return nil, fmt.Errorf("exited: %s\n%s", j.cmd.ProcessState, jaegerTail(j.log.String(), 4000))
		default:
		}
		if j.ready() {
			t.Cleanup(j.stop)
			return j, nil
		}
		if time.Now().After(deadline) {
			j.stop()
			return nil, fmt.Errorf("not ready after 60s\n%s", jaegerTail(j.log.String(), 4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (j *Jaeger) ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var d net.Dialer
	for _, p := range []int{j.otlpGRPC, j.otlpHTTP} {
		c, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return false
		}
		_ = c.Close()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.QueryURL()+"/api/services", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (j *Jaeger) stop() {
	if j.cmd.Process == nil {
		return
	}
	_ = j.cmd.Process.Kill()
	<-j.exited
}

// QueryURL is the base URL of the query API and UI, e.g. http://127.0.0.1:16686.
func (j *Jaeger) QueryURL() string { return "http://127.0.0.1:" + strconv.Itoa(j.queryPort) }

// OTLPHTTPEndpoint is the OTLP/HTTP receiver's base URL, the value for
// OTEL_EXPORTER_OTLP_ENDPOINT.
func (j *Jaeger) OTLPHTTPEndpoint() string { return "http://127.0.0.1:" + strconv.Itoa(j.otlpHTTP) }

// OTLPGRPCEndpoint is the OTLP/gRPC receiver's URL, the value for
// OTEL_EXPORTER_OTLP_ENDPOINT with OTEL_EXPORTER_OTLP_PROTOCOL=grpc.
func (j *Jaeger) OTLPGRPCEndpoint() string { return "http://127.0.0.1:" + strconv.Itoa(j.otlpGRPC) }

// OTelEnv returns the environment (KEY=value) that points an OpenTelemetry
// SDK at this Jaeger over OTLP/HTTP with a short batch delay and every trace
// sampled.
func (j *Jaeger) OTelEnv(service string) []string {
	return []string{
		"OTEL_SERVICE_NAME=" + service,
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + j.OTLPHTTPEndpoint(),
		"OTEL_TRACES_SAMPLER=always_on",
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}
}

// Log returns what Jaeger printed so far.
func (j *Jaeger) Log() string { return j.log.String() }

// JaegerTrace is one trace from the query API (/api/traces), in Jaeger's
// JSON model.
type JaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []JaegerSpan             `json:"spans"`
	Processes map[string]JaegerProcess `json:"processes"`
}

// JaegerSpan is a span of a [JaegerTrace].
type JaegerSpan struct {
	TraceID       string            `json:"traceID"`
	SpanID        string            `json:"spanID"`
	OperationName string            `json:"operationName"`
	References    []JaegerReference `json:"references"`
	StartTime     int64             `json:"startTime"` // microseconds since the epoch
	Duration      int64             `json:"duration"`  // microseconds
	Tags          []JaegerKeyValue  `json:"tags"`
	Logs          []JaegerLog       `json:"logs"`
	ProcessID     string            `json:"processID"`
}

// JaegerReference links a span to its parent (CHILD_OF) or another span (FOLLOWS_FROM).
type JaegerReference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// JaegerKeyValue is a tag or log field.
type JaegerKeyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// JaegerLog is a span event.
type JaegerLog struct {
	Timestamp int64            `json:"timestamp"`
	Fields    []JaegerKeyValue `json:"fields"`
}

// JaegerProcess names the service that emitted spans.
type JaegerProcess struct {
	ServiceName string           `json:"serviceName"`
	Tags        []JaegerKeyValue `json:"tags"`
}

// Tag returns the value of the span's tag key as a string, and whether it
// is present.
func (s JaegerSpan) Tag(key string) (string, bool) { return kvString(s.Tags, key) }

// Field returns the value of the log field key as a string, and whether it
// is present. A span event's name is the field "event".
func (l JaegerLog) Field(key string) (string, bool) { return kvString(l.Fields, key) }

func kvString(kvs []JaegerKeyValue, key string) (string, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			return fmt.Sprint(kv.Value), true
		}
	}
	return "", false
}

// Parent returns the span ID of the span's parent, "" for a root.
func (s JaegerSpan) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Services lists the services Jaeger has spans from.
func (j *Jaeger) Services(ctx context.Context) ([]string, error) {
	var out struct {
		Data []string `json:"data"`
	}
	err := j.get(ctx, "/api/services", &out)
	return out.Data, err
}

// Traces returns up to limit traces of service from the last hour that
// hold a span named operation ("" for any).
func (j *Jaeger) Traces(ctx context.Context, service, operation string, limit int) ([]JaegerTrace, error) {
	q := url.Values{"service": {service}, "limit": {strconv.Itoa(limit)}, "lookback": {"1h"}}
	if operation != "" {
		q.Set("operation", operation)
	}
	var out struct {
		Data []JaegerTrace `json:"data"`
	}
	err := j.get(ctx, "/api/traces?"+q.Encode(), &out)
	return out.Data, err
}

// Trace returns one trace by its hex ID.
func (j *Jaeger) Trace(ctx context.Context, traceID string) (JaegerTrace, error) {
	var out struct {
		Data []JaegerTrace `json:"data"`
	}
	if err := j.get(ctx, "/api/traces/"+url.PathEscape(traceID), &out); err != nil {
		return JaegerTrace{}, err
	}
	if len(out.Data) != 1 {
		return JaegerTrace{}, fmt.Errorf("testkit: jaeger: %d traces for ID %s", len(out.Data), traceID)
	}
	return out.Data[0], nil
}

func (j *Jaeger) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.QueryURL()+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("testkit: jaeger GET %s: %s: %s", path, resp.Status, jaegerTail(string(body), 500))
	}
	return json.Unmarshal(body, v)
}

// jaegerOutput collects a process's output.
type jaegerOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *jaegerOutput) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 { // keep the last part only
		rest := append([]byte(nil), l.b.Bytes()[l.b.Len()-(512<<10):]...)
		l.b.Reset()
		l.b.Write(rest)
	}
	return l.b.Write(p)
}

func (l *jaegerOutput) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func jaegerTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

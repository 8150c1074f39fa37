package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/tracing"
)

//go:embed static
var staticFS embed.FS

// Console is the console's HTTP handler. Build it with [New], mount it
// anywhere (under a prefix with http.StripPrefix), and [Console.Close] it
// when done.
type Console struct {
	cfg   Config
	mux   *http.ServeMux
	view  *leasehold.Worker // cfg.Worker, or a worker that never starts, for its Redis and Kafka reads
	auth  *sessions
	hosts hostSet
	// throttle bounds sign-in attempts per client address and overall.
	throttle *throttle
	index    *template.Template
	log      *slog.Logger

	in *inspect.Inspector // every read and action on Redis

	// dlqScans holds a token while a request reads the dead-letter topic
	// (deadletters.go): one read at a time.
	dlqScans chan struct{}

	mu     sync.Mutex
	closed bool
	kcl    *kgo.Client // built at first use from cfg.Kafka
	kclErr error

	// warnInsecureCookie logs once that a sign-in came from an https page
	// over plain HTTP without Config.SecureCookie.
	warnInsecureCookie sync.Once

	snap   snapshots
	series fleetSeries // fleet.go
	seen   seenFences
}

// New returns a console for cfg. It checks cfg and touches no server: Redis
// and Kafka are reached at the first request that needs them.
func New(cfg Config) (*Console, error) {
	if cfg.Redis == nil {
		return nil, ErrNoRedis
	}
	cfg.defaults()
	a := cfg.Auth
	if (a.User == "") != (a.Password == "") || (a.Token != "" && a.User != "") {
		return nil, ErrBadAuth
	}
	if cfg.Actions && !a.set() {
		return nil, ErrActionsNeedAuth
	}
	if cfg.JaegerURL != "" {
		u, err := url.Parse(cfg.JaegerURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("console: Jaeger URL %q: want http://host:port", cfg.JaegerURL)
		}
	}
	view := cfg.Worker
	if view == nil {
		opts := []leasehold.Opt{leasehold.WithKeyPrefix(cfg.KeyPrefix), leasehold.WithTopics(cfg.Topics...),
			leasehold.WithDeadLetterTopic(cfg.DLQ), leasehold.WithGroup(cfg.Group), leasehold.WithLogger(cfg.Logger),
			leasehold.WithKafka(cfg.Kafka...), leasehold.WithIdempotencyOptions(cfg.StoreOptions...)}
		if cfg.Tracer != nil {
			opts = append(opts, leasehold.WithTracing(cfg.Tracer))
		}
		w, err := leasehold.New(cfg.Redis, opts...)
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		view = w
	}
	idx, err := template.ParseFS(staticFS, "static/index.html")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	c := &Console{cfg: cfg, view: view, in: newInspector(cfg, view), auth: newSessions(a), hosts: newHostSet(cfg.AllowedHosts), throttle: newThrottle(), index: idx, log: cfg.Logger,
		dlqScans: make(chan struct{}, maxDeadLetterScans)}
	c.routes()
	return c, nil
}

// ServeHTTP serves the page, its assets and its JSON API, to requests for
// an allowed host (Config.AllowedHosts).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if !c.hosts.allows(r.Host) {
		c.misdirected(w, r)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// Close releases what the console opened: its lease manager (it holds no
// lease) and its Kafka client. The handler answers 503 afterwards.
func (c *Console) Close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	err := c.in.Close(ctx)
	if c.kcl != nil {
		c.kcl.Close()
		c.kcl = nil
	}
	return err
}

func (c *Console) routes() {
	m := http.NewServeMux()
	sub, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(sub)))
	m.HandleFunc("GET /{$}", c.serveIndex)
	m.HandleFunc("GET /api/session", c.serveSession)
	m.HandleFunc("GET /api/overview", c.serveOverview)
	m.HandleFunc("GET /api/jobs", c.serveJobs)
	m.HandleFunc("GET /api/key", c.serveKey)
	m.HandleFunc("GET /api/compensations", c.serveCompensations)
	m.HandleFunc("GET /api/deadletters", c.serveDeadLetters)
	m.HandleFunc("POST /api/login", c.serveLogin)
	m.HandleFunc("POST /api/logout", c.serveLogout)
	m.HandleFunc("POST /api/actions/{action}", c.serveAction)
	c.mux = m
}

func (c *Console) serveIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	data := struct {
		PollMS     int64
		Standalone bool
	}{c.cfg.PollInterval.Milliseconds(), c.cfg.Worker == nil}
	if err := c.index.Execute(w, data); err != nil {
		c.log.Error("console: render the page", slog.Any("err", err))
	}
}

// newInspector returns the Inspector the console presents, over cfg's
// Redis with the workers' prefix and store options, reading the dead-letter
// topic through view.
func newInspector(cfg Config, view *leasehold.Worker) *inspect.Inspector {
	opts := []inspect.Opt{inspect.WithPrefix(cfg.KeyPrefix), inspect.WithLogger(cfg.Logger), inspect.WithDeadLetters(view.DeadLetterSource()),
		inspect.WithStoreOptions(append([]idempotency.Opt{idempotency.WithMaxKeyLen(leasehold.MaxKeyLen)}, cfg.StoreOptions...)...)}
	if cfg.Compensations != nil {
		opts = append(opts, inspect.WithCompensations(cfg.Compensations))
	}
	if cfg.Tracer != nil {
		opts = append(opts, inspect.WithTracer(cfg.Tracer))
	}
	return inspect.New(cfg.Redis, opts...)
}

var errClosed = errors.New("console: closed")

// kafka returns a Kafka client for admin reads, or nil when the console has
// none (no Config.Kafka, and no started Worker).
func (c *Console) kafka() (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	if len(c.cfg.Kafka) == 0 {
		if c.cfg.Worker != nil {
			return c.cfg.Worker.Client(), nil
		}
		return nil, nil
	}
	if c.kcl == nil && c.kclErr == nil {
		c.kcl, c.kclErr = kgo.NewClient(c.cfg.Kafka...)
	}
	return c.kcl, c.kclErr
}

// traceURL links to a search of Jaeger for the spans of key: by the key
// attribute in the form the workers' spans record it (hashed by default:
// Config.Tracer's redaction), under Config.JaegerService; or "".
func (c *Console) traceURL(key string) string {
	if c.cfg.JaegerURL == "" || key == "" {
		return ""
	}
	v, ok := c.cfg.Tracer.KeyAttribute(key)
	if !ok {
		return "" // the spans carry no key
	}
	tags, _ := json.Marshal(map[string]string{tracing.AttrIdempotencyKey: v})
	q := url.Values{"service": {c.cfg.JaegerService}, "tags": {string(tags)}, "lookback": {"2d"}, "limit": {"20"}}
	return strings.TrimRight(c.cfg.JaegerURL, "/") + "/search?" + q.Encode()
}

// attemptTraceURL links to one trace in Jaeger by its ID, or "".
func (c *Console) attemptTraceURL(traceID string) string {
	if c.cfg.JaegerURL == "" || traceID == "" {
		return ""
	}
	return strings.TrimRight(c.cfg.JaegerURL, "/") + "/trace/" + url.PathEscape(traceID)
}

// writeJSON answers v as JSON (escaped for HTML: <, > and & as \u003c...).
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError is every error answer: {"error": "..."}.
func (c *Console) fail(w http.ResponseWriter, status int, msg string, err error) {
	if err != nil {
		c.log.Debug("console: request failed", slog.String("msg", msg), slog.Any("err", err))
		msg = msg + ": " + oneLine(err)
	}
	writeJSON(w, status, map[string]string{"error": msg})
}

func oneLine(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// timeout bounds one request's reads.
const timeout = 10 * time.Second

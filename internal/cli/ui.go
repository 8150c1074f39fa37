package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/console"
	"github.com/leasehold/leasehold/internal/httpserve"
	"github.com/leasehold/leasehold/tracing"
)

// cmdUI serves the web console (package console) on its own: what Redis
// and Kafka show, read-only unless --actions.
func cmdUI(ctx context.Context, e *Env, args []string) error {
	f := newFlags(e, "ui", "")
	var o opsFlags
	o.define(f)
	app := e.application()
	app.defineFlags(f)
	listen := f.str("listen", "LEASEHOLD_UI_LISTEN", "127.0.0.1:8090", "HTTP listen address of the console")
	allowed := f.str("allowed-hosts", "LEASEHOLD_UI_ALLOWED_HOSTS", "", "other names the console answers for, comma-separated host or host:port, "+
		"e.g. the name you browse it by when it listens beyond loopback; requests for other hosts get 421 (DNS rebinding); "+
		"the listen address and localhost always work; * turns the check off")
	var actions bool
	f.boolVar(&actions, "actions", "LEASEHOLD_UI_ACTIONS", false, "offer expire, reset, compensation retry and dead-letter replay, "+
		"to those who sign in with LEASEHOLD_UI_TOKEN, or LEASEHOLD_UI_USER and LEASEHOLD_UI_PASSWORD")
	var secureCookie bool
	f.boolVar(&secureCookie, "secure-cookie", "LEASEHOLD_UI_SECURE_COOKIE", false, "mark the session cookie Secure on every sign-in: "+
		"set it when the console is reached through a TLS-terminating proxy (over TLS it is Secure anyway)")
	brokers := f.str("brokers", "LEASEHOLD_BROKERS", "", "Kafka seed brokers, host:port comma-separated, for commit lag and dead letters; empty: no Kafka views")
	topics := f.str("topics", "LEASEHOLD_TOPICS", leasehold.DefaultTopic, "the workers' topics")
	dlq := f.str("dlq", "LEASEHOLD_DLQ", "", "dead-letter topic (default: first topic + .dlq)")
	group := f.str("group", "LEASEHOLD_GROUP", leasehold.DefaultGroup, "the workers' consumer group")
	jaeger := f.str("jaeger-url", "LEASEHOLD_JAEGER_URL", "", "Jaeger UI base URL for trace links, e.g. http://127.0.0.1:16686")
	service := f.str("service-name", "OTEL_SERVICE_NAME", tracing.DefaultServiceName, "the service name the workers trace under, for the trace links")
	var poll time.Duration
	f.durationVar(&poll, "poll", "LEASEHOLD_UI_POLL", console.DefaultPollInterval, "how often an open page reads fresh data, at least 500ms")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	ts := splitList(*topics)
	switch {
	case len(ts) == 0 || *group == "" || o.prefix == "":
		return usagef("want --topics, --group and --prefix, the workers' own")
	case poll < 500*time.Millisecond:
		return usagef("poll %v: want at least 500ms", poll)
	}
	auth := console.AuthFromEnv(e.Getenv)
	if actions && auth.Token == "" && auth.User == "" {
		return usagef("--actions needs authentication: set LEASEHOLD_UI_TOKEN, or LEASEHOLD_UI_USER and LEASEHOLD_UI_PASSWORD")
	}
	policy, err := policyOpts(*o.policy)
	if err != nil {
		return err
	}
	log, err := newLogger(e.Stderr, "info", "text")
	if err != nil {
		return err
	}
	rdb, err := openRedis(ctx, o.redisURL)
	if err != nil {
		return err
	}
	defer func() { _ = rdb.Close() }()
	_, tracer, stopTracing, err := startTracing(ctx, "leasehold-worker", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	// The program's own compensation handlers, so that a retry from the
	// console runs them.
	reg := compensation.NewRegistry()
	setup := &Setup{Log: log, Command: "ui"}
	defer setup.close()
	if err := app.registerCompensations(ctx, reg, setup); err != nil {
		return err
	}
	cfg := console.Config{Redis: rdb, KeyPrefix: o.prefix, Topics: ts, DLQ: *dlq, Group: *group, JaegerURL: *jaeger,
		JaegerService: *service, Actions: actions, Auth: auth, SecureCookie: secureCookie, Compensations: reg, StoreOptions: policy, Logger: log, Tracer: tracer, PollInterval: poll}
	if bs := splitList(*brokers); len(bs) > 0 {
		cfg.Kafka = []kgo.Opt{kgo.SeedBrokers(bs...)}
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	defer func() { _ = ln.Close() }()
	cfg.AllowedHosts = listenHosts(*listen, ln.Addr(), splitList(*allowed))
	c, err := console.New(cfg)
	if err != nil {
		return &usageError{err}
	}
	defer func() { _ = c.Close(context.WithoutCancel(ctx)) }()
	srv := httpserve.New(c, httpserve.WithBaseContext(ctx))
	_, _ = fmt.Fprintf(e.Stdout, "console on http://%s/ (%s; Redis prefix %s)\n", ln.Addr(), uiMode(actions), o.prefix)
	return serveUntilDone(ctx, srv, ln)
}

// uiMode says what the console offers, for its start line.
func uiMode(actions bool) string {
	if actions {
		return "actions on, for signed-in users"
	}
	return "read-only"
}

// serveUntilDone serves on ln until ctx ends, then shuts srv down within
// 5s.
func serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// listenHosts is what the console answers for: the listen address as given
// (its host with the port bound) and as bound, and the allowed hosts.
func listenHosts(listen string, bound net.Addr, allowed []string) []string {
	out := append([]string{bound.String()}, allowed...)
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" {
		if _, port, err := net.SplitHostPort(bound.String()); err == nil {
			out = append(out, net.JoinHostPort(h, port))
		}
	}
	return out
}

package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
)

// A handler is unit-tested without Redis or Kafka: leaseholdtest runs it
// as one attempt and tells how the worker would settle it.
func Example_handlerTest() {
	send := func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
		n, err := strconv.Atoi(string(job.Payload))
		if err != nil {
			return nil, leasehold.Permanent(err) // no retry can fix the payload
		}
		if err := job.Heartbeat(ctx, []byte("sent")); err != nil {
			return nil, err // the lease is lost: stop
		}
		return []byte(fmt.Sprint("sent ", n, " mails")), nil
	}
	ctx := context.Background()
	ok := leaseholdtest.New(leaseholdtest.WithPayload([]byte("3"))).Run(ctx, send)
	fmt.Println(ok.Outcome(), string(ok.Result), string(ok.LastHeartbeat()))
	bad := leaseholdtest.New(leaseholdtest.WithPayload([]byte("three"))).Run(ctx, send)
	fmt.Println(bad.Outcome(), errors.Is(bad.Err, leasehold.ErrPermanent))
	// Output:
	// completed sent 3 mails sent
	// failed true
}

// errRateLimited is a downstream's answer that a later try may pass.
var errRateLimited = errors.New("rate limited")

// Errors are retried unless they wrap ErrPermanent or the job type's
// classifier calls them terminal; a retry waits the job type's backoff.
func ExamplePermanent() {
	charge := func(_ context.Context, job *leasehold.Job) ([]byte, error) {
		switch string(job.Payload) {
		case "card-declined":
			return nil, leasehold.Permanent(errors.New("card declined"))
		case "busy":
			return nil, fmt.Errorf("charge: %w", errRateLimited)
		}
		return []byte("charged"), nil
	}
	for _, p := range []string{"ok", "busy", "card-declined"} {
		a := leaseholdtest.New(leaseholdtest.WithPayload([]byte(p))).Run(context.Background(), charge)
		fmt.Printf("%s: %s\n", p, a.Outcome())
	}
	// Registered with a backoff and a classifier: rate limits are retried
	// after 1s, 2s, 4s ... up to 1m, anything else unknown is terminal.
	_ = leasehold.WithBackoff(time.Second, time.Minute)
	_ = leasehold.WithRetryClassifier(func(err error) bool { return errors.Is(err, errRateLimited) })
	// Output:
	// ok: completed
	// busy: retry
	// card-declined: failed
}

// Hooks report what the worker decides: here a held key (another worker
// runs it; not a retry) and a retry are counted apart.
func ExampleHooks() {
	var held, retries int
	hooks := leasehold.Hooks{
		OnHeld: func(_ context.Context, info leasehold.ClaimInfo, delay time.Duration) {
			held++ // info.Key is running elsewhere; claimed again after delay
		},
		OnRetry: func(_ context.Context, info leasehold.ClaimInfo, delay time.Duration, err error) {
			retries++
			slog.Info("retry", slog.String("key", info.Key), slog.Duration("in", delay), slog.Any("err", err))
		},
		OnDeadLetter: func(_ context.Context, info leasehold.ClaimInfo, reason string, err error) {
			slog.Warn("dead-lettered", slog.String("key", info.Key), slog.String("reason", reason), slog.Any("err", err))
		},
	}
	w, err := leasehold.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}), leasehold.WithHooks(hooks))
	if err != nil {
		log.Fatal(err)
	}
	_ = w
}

// A service embeds the worker beside its HTTP server: its logger, tracer and
// meter providers are given once; /readyz tells "not started yet" from
// "broken"; SIGTERM stops both within the host's own shutdown deadline.
func ExampleWorker_Shutdown() {
	var (
		logger = slog.Default()
		tp     trace.TracerProvider // the host's, e.g. from its own OpenTelemetry SDK setup
		mp     metric.MeterProvider
	)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	w, err := leasehold.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}),
		leasehold.WithKafka(kgo.SeedBrokers("127.0.0.1:9092")),
		leasehold.WithLogger(logger), leasehold.WithTracerProvider(tp), leasehold.WithMeterProvider(mp),
		leasehold.WithPropagator(propagation.TraceContext{}))
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Register("report.build", func(context.Context, *leasehold.Job) ([]byte, error) { return nil, nil }); err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, r *http.Request) {
		switch err := w.Ready(r.Context()); {
		case errors.Is(err, leasehold.ErrNotStarted):
			http.Error(rw, "starting", http.StatusServiceUnavailable)
		case err != nil:
			http.Error(rw, err.Error(), http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("POST /reports/{id}", func(rw http.ResponseWriter, r *http.Request) {
		// Enqueue on the worker's client: its producer span is a child of the request's.
		_, err := leasehold.Enqueue(r.Context(), w.Client(), leasehold.NewJob{Type: "report.build", Key: r.PathValue("id")})
		if err != nil {
			http.Error(rw, err.Error(), http.StatusServiceUnavailable)
		}
	})
	srv := &http.Server{Addr: ":8080", Handler: mux, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() { _ = srv.ListenAndServe() }()
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-ctx.Done()

	// The host's budget for stopping: running jobs are cancelled (and their
	// steps compensated) when it runs out.
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := w.Shutdown(sctx); err != nil {
		logger.Error("worker shutdown", slog.Any("err", err))
	}
}

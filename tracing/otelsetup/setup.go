package otelsetup

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/leasehold/leasehold/internal/buildinfo"
	"github.com/leasehold/leasehold/tracing"
)

// Telemetry holds the providers built by [Setup]. Pass them to the worker,
// the lease manager and franz-go (tracing.New(tracing.WithTelemetry(tel)))
// rather than relying on the OpenTelemetry globals.
type Telemetry struct {
	// TracerProvider exports spans through the exporter chosen by the
	// OTEL_* environment (or [WithSpanExporter]).
	TracerProvider trace.TracerProvider
	// MeterProvider feeds the Prometheus registry served by MetricsHandler.
	MeterProvider metric.MeterProvider
	// Propagator is W3C tracecontext + baggage.
	Propagator propagation.TextMapPropagator
	// MetricsHandler serves the Prometheus text exposition of every
	// instrument created through MeterProvider (mount it at /metrics).
	MetricsHandler http.Handler
	// Resource describes this process: service.name, service.version, host.
	Resource *resource.Resource
}

// OTelProviders returns the tracer provider, meter provider and propagator,
// so that tel can be given to tracing.WithTelemetry.
func (t *Telemetry) OTelProviders() (trace.TracerProvider, metric.MeterProvider, propagation.TextMapPropagator) {
	return t.TracerProvider, t.MeterProvider, t.Propagator
}

var _ tracing.Providers = (*Telemetry)(nil)

// SetupOpt configures [Setup].
type SetupOpt interface{ applySetup(*setupCfg) }

type setupOptFunc func(*setupCfg)

func (f setupOptFunc) applySetup(c *setupCfg) { f(c) }

type setupCfg struct {
	serviceName    string
	serviceVersion string
	exporter       sdktrace.SpanExporter
	sampler        sdktrace.Sampler
	registry       *prometheus.Registry
	noGlobal       bool
	logger         *slog.Logger
	attrs          []attribute.KeyValue
}

// WithServiceName sets service.name. Default: tracing.DefaultServiceName.
// OTEL_SERVICE_NAME and service.name in OTEL_RESOURCE_ATTRIBUTES take
// precedence, as the OpenTelemetry specification requires.
func WithServiceName(name string) SetupOpt {
	return setupOptFunc(func(c *setupCfg) { c.serviceName = name })
}

// WithServiceVersion sets service.version. Default: the main module's version
// from the binary's build information ("devel" when built from a work tree).
func WithServiceVersion(v string) SetupOpt {
	return setupOptFunc(func(c *setupCfg) { c.serviceVersion = v })
}

// WithResourceAttributes adds attributes to the resource. Default: none beyond
// service.*, host.*, process.pid, process.runtime.* and telemetry.sdk.*.
// Process command-line arguments are never recorded: they may hold secrets.
func WithResourceAttributes(kv ...attribute.KeyValue) SetupOpt {
	return setupOptFunc(func(c *setupCfg) { c.attrs = append(c.attrs, kv...) })
}

// WithSpanExporter exports spans to e instead of the exporter chosen by
// OTEL_TRACES_EXPORTER (default there: OTLP over HTTP/protobuf, or gRPC with
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc, endpoint and headers from
// OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_HEADERS and their
// _TRACES_ variants).
func WithSpanExporter(e sdktrace.SpanExporter) SetupOpt {
	return setupOptFunc(func(c *setupCfg) { c.exporter = e })
}

// WithSampler samples with s. Default: OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG, else parentbased_always_on.
func WithSampler(s sdktrace.Sampler) SetupOpt {
	return setupOptFunc(func(c *setupCfg) { c.sampler = s })
}

// WithPrometheusRegistry registers the metrics on r. Default: a fresh
// registry holding the Go runtime and process collectors.
func WithPrometheusRegistry(r *prometheus.Registry) SetupOpt {
	return setupOptFunc(func(c *setupCfg) { c.registry = r })
}

// WithoutGlobal leaves the OpenTelemetry globals (tracer provider, meter
// provider, propagator, error handler) alone. Default: Setup installs its
// providers as the globals, which is what a main package wants.
func WithoutGlobal() SetupOpt {
	return setupOptFunc(func(c *setupCfg) { c.noGlobal = true })
}

// WithSetupLogger logs OpenTelemetry's internal errors (failed exports) to l
// when Setup installs the globals: the first at warning level, repeats within
// an hour at debug level. Default: slog.Default().
func WithSetupLogger(l *slog.Logger) SetupOpt {
	return setupOptFunc(func(c *setupCfg) { c.logger = l })
}

// samplers lists the OTEL_TRACES_SAMPLER values that the SDK understands. The
// SDK falls back silently on anything else; Setup refuses instead.
var samplers = map[string]bool{
	"always_on": true, "always_off": true, "traceidratio": true,
	"parentbased_always_on": true, "parentbased_always_off": true, "parentbased_traceidratio": true,
}

// Setup builds the tracer provider, meter provider and propagator from the
// standard OTEL_* environment variables:
//
//   - OTEL_SDK_DISABLED=true: no-op tracer and meter providers.
//   - OTEL_TRACES_EXPORTER: otlp, console or none. Unset, spans are exported
//     over OTLP only when OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL
//     or their _TRACES_ variants are set, and not at all otherwise
//     (spans are still made, so trace context propagates and log lines
//     carry trace IDs).
//   - OTEL_EXPORTER_OTLP_PROTOCOL / _TRACES_PROTOCOL: http/protobuf (default) or grpc.
//   - OTEL_EXPORTER_OTLP_ENDPOINT / _TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS / _TRACES_HEADERS.
//   - OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on).
//   - OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES.
//   - OTEL_BSP_* for the batch span processor.
//
// Metrics go to a Prometheus registry served by Telemetry.MetricsHandler,
// without otel_scope_* labels. OpenTelemetry's internal errors (a collector
// that cannot be reached) are logged once at warning level, then at debug
// level for an hour, when Setup installs the globals.
// The returned shutdown function flushes buffered spans and stops both
// providers; it is safe to call more than once.
func Setup(ctx context.Context, opts ...SetupOpt) (*Telemetry, func(context.Context) error, error) {
	var c setupCfg
	for _, o := range opts {
		o.applySetup(&c)
	}
	c.serviceName = cmp.Or(c.serviceName, tracing.DefaultServiceName)
	c.serviceVersion = cmp.Or(c.serviceVersion, buildinfo.Version())
	c.logger = cmp.Or(c.logger, slog.Default())

	reg := c.registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	tel := &Telemetry{
		Propagator:     propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		MetricsHandler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
	}

	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		tel.TracerProvider = tracenoop.NewTracerProvider()
		tel.MeterProvider = metricnoop.NewMeterProvider()
		tel.Resource = resource.Empty()
		c.install(tel)
		return tel, func(context.Context) error { return nil }, nil
	}

	res, err := newResource(ctx, &c)
	if err != nil {
		return nil, nil, err
	}
	tel.Resource = res

	if s := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER"))); c.sampler == nil && s != "" && !samplers[s] {
		return nil, nil, &tracing.ConfigError{Setting: "OTEL_TRACES_SAMPLER", Value: s}
	}
	exp := c.exporter
	if exp == nil && tracesRequested() {
		exp, err = autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, nil, &tracing.ConfigError{Setting: "OTEL_TRACES_EXPORTER / OTEL_EXPORTER_OTLP_PROTOCOL", Err: err}
		}
	}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if exp != nil {
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
	}
	// Without WithSampler, the SDK reads OTEL_TRACES_SAMPLER(_ARG) itself.
	if c.sampler != nil {
		tpOpts = append(tpOpts, sdktrace.WithSampler(c.sampler))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)

	promExp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		// Every series would carry otel_scope_name, otel_scope_version and
		// otel_scope_schema_url labels: noise in PromQL, and leasehold's
		// metric names are unique across its meters already.
		otelprom.WithoutScopeInfo(),
	)
	if err != nil {
		_ = tp.Shutdown(ctx)
		return nil, nil, &tracing.ConfigError{Setting: "prometheus exporter", Err: err}
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(promExp))
	tel.TracerProvider, tel.MeterProvider = tp, mp
	c.install(tel)

	var (
		once    sync.Once
		downErr error
	)
	shutdown := func(ctx context.Context) error {
		once.Do(func() { downErr = errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx)) })
		return downErr
	}
	return tel, shutdown, nil
}

func (c *setupCfg) install(tel *Telemetry) {
	if c.noGlobal {
		return
	}
	otel.SetTracerProvider(tel.TracerProvider)
	otel.SetMeterProvider(tel.MeterProvider)
	otel.SetTextMapPropagator(tel.Propagator)
	otel.SetErrorHandler(newErrorLogger(c.logger, time.Now))
}

// tracesRequested reports whether the environment asks for spans to be
// exported: OTEL_TRACES_EXPORTER names an exporter (none included), or an
// OTLP endpoint or protocol is configured (a protocol alone means a local
// collector on the default port). Without any there is no collector to send
// to, and an OTLP exporter aimed at its default localhost:4318 would only
// fail every few seconds.
func tracesRequested() bool {
	for _, k := range []string{
		"OTEL_TRACES_EXPORTER",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	} {
		if strings.TrimSpace(os.Getenv(k)) != "" {
			return true
		}
	}
	return false
}

func newResource(ctx context.Context, c *setupCfg) (*resource.Resource, error) {
	attrs := append([]attribute.KeyValue{
		attribute.String("service.name", c.serviceName),
		attribute.String("service.version", c.serviceVersion),
	}, c.attrs...)
	res, err := resource.New(ctx,
		resource.WithAttributes(attrs...),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithProcessPID(),
		resource.WithProcessRuntimeName(),
		resource.WithProcessRuntimeVersion(),
		// Last, so that OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, &tracing.ConfigError{Setting: "OTEL_RESOURCE_ATTRIBUTES", Err: err}
	}
	return res, nil
}

// Package otelsetup builds a program's OpenTelemetry SDK from the standard
// OTEL_* environment variables: a tracer provider exporting over OTLP (HTTP or
// gRPC) or to the console, a resource naming the service and host, W3C
// tracecontext and baggage propagators, and a meter provider whose instruments
// are served in the Prometheus text format by Telemetry.MetricsHandler.
//
// It is for main packages (cmd/worker, workercmd, a team's own binary). The
// library packages (leasehold, lease, idempotency, compensation, fence and
// tracing) import only the OpenTelemetry API, so importing them does not pull
// in the SDK, the exporters, gRPC or the Prometheus client:
//
//	tel, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithServiceName("billing-worker"))
//	...
//	defer shutdown(ctx)
//	tr, err := tracing.New(tracing.WithTelemetry(tel))
//	mux.Handle("GET /metrics", tel.MetricsHandler)
package otelsetup

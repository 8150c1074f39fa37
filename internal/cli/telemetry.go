package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/tracing"
	"github.com/leasehold/leasehold/tracing/otelsetup"
)

// startTracing sets a command's OpenTelemetry up as the OTEL_* environment
// says (service is its service name; log, when not nil, hears the exporter's
// troubles) and returns the telemetry, a tracer built on it with opts, and a
// stop that flushes what is pending within 5s. Call stop once, when the
// command ends.
func startTracing(ctx context.Context, service string, log *slog.Logger, opts ...tracing.Opt) (*otelsetup.Telemetry, *tracing.Tracer, func(), error) {
	setup := []otelsetup.SetupOpt{otelsetup.WithServiceName(service)}
	if log != nil {
		setup = append(setup, otelsetup.WithSetupLogger(log))
	}
	tel, shutdown, err := otelsetup.Setup(ctx, setup...)
	if err != nil {
		return nil, nil, nil, err
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = shutdown(sctx)
	}
	tr, err := tracing.New(append([]tracing.Opt{tracing.WithTelemetry(tel)}, opts...)...)
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return tel, tr, stop, nil
}

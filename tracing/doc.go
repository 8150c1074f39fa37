// Package tracing makes every leasehold job visible in Jaeger and the worker
// measurable in Prometheus.
//
// The package imports only the OpenTelemetry API: the providers come from
// the program. Package tracing/otelsetup builds them, for a main package, from
// the standard OTEL_* environment variables (OTLP over HTTP or gRPC, endpoint,
// headers, sampler), with a meter provider served in the Prometheus text
// format; give them to [New] with [WithTelemetry], or pass any
// TracerProvider and MeterProvider with [WithTracerProvider] and
// [WithMeterProvider]. Without either, [New] uses the OpenTelemetry globals.
//
// [New] returns a [Tracer] that wires franz-go's kotel plugin into Kafka
// clients ([Tracer.KgoOpt]): kotel creates the publish and receive spans and
// carries the trace context in record headers. Under kotel's receive span,
// the worker (given the Tracer with leasehold.WithTracing, or the providers
// with leasehold.WithTracerProvider, ...) makes the job's span `process <topic>` (the OpenTelemetry
// messaging conventions' consumer span; the job type is an attribute), whose
// children are the claim, the handler, the fenced commit and each
// compensation step, and whose events mark heartbeats (throttled), a lost
// lease (with its cause), a takeover (with the previous fence), a duplicate
// replay and dead-lettering:
//
//	enqueue video.transcode            (producer, StartEnqueue)
//	└─ jobs publish                    (kotel)
//	   └─ jobs receive                 (kotel)
//	      └─ process jobs              (the worker; leasehold.job.type=video.transcode)
//	         ├─ claim                  outcome=acquired fence=...
//	         ├─ handler                events: heartbeat, lease lost
//	         ├─ compensate refund      outcome=compensated
//	         └─ commit                 outcome=committed
//
// The job span carries the messaging.* attributes of semantic conventions
// 1.43 (messaging.operation.type, messaging.destination.name,
// messaging.consumer.group.name, ...). Leasehold's spans also carry the job
// type, the idempotency key (hashed by default; see [Redaction]), the fence, the attempt
// and the outcome. They never carry payloads, results, heartbeat details or
// credentials; error messages are truncated and have the raw key replaced by
// its redacted form.
//
// [NewLogHandler] puts the trace_id and span_id of the span in a log call's
// context on the line (logger.InfoContext(ctx, ...)).
//
// The span, event, attribute and metric names are constants here, and every
// outcome they carry is a name of package outcome. The worker's own use of
// the Tracer (job spans, metric instruments) is internal to the module.
//
// [Catalog] lists every leasehold
// metric with its unit and Prometheus name, including the lease metrics that
// package lease records through the MeterProvider given to its Manager.
package tracing

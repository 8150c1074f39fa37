// Package tracing makes every leasehold job visible in Jaeger and the worker
// measurable in Prometheus.
//
// [Setup] builds an OpenTelemetry tracer provider from the standard OTEL_*
// environment variables (OTLP over HTTP or gRPC, endpoint, headers, sampler),
// a resource naming the service and host, W3C tracecontext and baggage
// propagators, and a meter provider whose instruments are served in the
// Prometheus text format by Telemetry.MetricsHandler.
//
// [New] returns a [Tracer] that wires franz-go's kotel plugin into Kafka
// clients ([Tracer.KgoOpt]): kotel creates the publish, receive and process
// spans and carries the trace context in record headers. On top of kotel's
// process span, [Tracer.StartJob] makes the span `job <type>`, whose children
// are the claim, the handler, the fenced commit and each compensation step, and
// whose events mark heartbeats (throttled), a lost lease (with its cause), a
// takeover (with the previous fence), a duplicate replay and dead-lettering:
//
//	enqueue video.transcode            (producer, StartEnqueue)
//	└─ jobs publish                    (kotel)
//	   └─ jobs receive                 (kotel)
//	      └─ job video.transcode       (kotel's process span, StartJob)
//	         ├─ claim                  outcome=acquired fence=...
//	         ├─ handler                events: heartbeat, lease lost
//	         ├─ compensate refund      outcome=compensated
//	         └─ commit                 outcome=committed
//
// Spans carry the messaging.* attributes kotel sets, the job type, the
// idempotency key (hashed by default; see [Redaction]), the fence, the attempt
// and the outcome. They never carry payloads, results, heartbeat details or
// credentials; error messages are truncated and have the raw key replaced by
// its redacted form.
//
// [Metrics] holds the worker's instruments; [Catalog] lists every leasehold
// metric with its unit and Prometheus name, including the lease metrics that
// package lease records through the MeterProvider given to its Manager.
package tracing

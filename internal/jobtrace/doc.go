// Package jobtrace is the worker's use of OpenTelemetry: the job span and
// its children (claim, handler, commit, compensation steps), the enqueue and
// operator spans, and the metric instruments. Package tracing is its public
// face: the options of [New], the Tracer's KgoOpt and providers, the span,
// attribute and metric names, key redaction and the log handler. What only
// the worker calls (StartJob, Job, Metrics, the compensation spans) lives
// here, so that it can change without breaking programs.
package jobtrace

package jobtrace

import "github.com/leasehold/leasehold/outcome"

// Span names. A job span is named "process <topic>" (the OpenTelemetry
// messaging conventions' "{operation} {destination}"; its job type is the
// leasehold.job.type attribute), an enqueue span "enqueue <job type>", a
// compensation span "compensate <step>".
const (
	SpanEnqueue      = "enqueue"
	SpanProcess      = "process"
	SpanClaim        = "claim"
	SpanHandler      = "handler"
	SpanCommit       = "commit"
	SpanCompensation = "compensate"
)

// Event names on the job span.
const (
	EventHeartbeat       = "heartbeat"
	EventLeaseLost       = "lease lost"
	EventTakeover        = "takeover"
	EventDuplicateReplay = "duplicate replay"
	EventDeadLettered    = "dead-lettered"
)

// Span and event attribute keys. A job span's messaging.* attributes are
// the OpenTelemetry semantic conventions' (go.opentelemetry.io/otel/semconv);
// kotel's publish and receive spans carry kotel's own (older) ones. No attribute ever holds a job's payload, its result, heartbeat
// details or credentials.
const (
	AttrJobType          = "leasehold.job.type"
	AttrIdempotencyKey   = "leasehold.idempotency.key"
	AttrFence            = "leasehold.fence"
	AttrAttempt          = "leasehold.attempt"
	AttrOutcome          = "leasehold.outcome"
	AttrPreviousFence    = "leasehold.previous_fence"
	AttrCause            = "leasehold.cause"
	AttrReason           = "leasehold.reason"
	AttrStep             = "leasehold.compensation.step"
	AttrHeartbeatSkipped = "leasehold.heartbeat.skipped"
	AttrErrorType        = "error.type"
	AttrErrorMessage     = "exception.message"
)

// Outcomes as strings, for the tests and callers that end spans with a
// string: the names of package outcome.
const (
	OutcomeCompleted    = string(outcome.Completed)
	OutcomeFailed       = string(outcome.Failed)
	OutcomeRetry        = string(outcome.Retry)
	OutcomeLeaseLost    = string(outcome.LeaseLost)
	OutcomeDuplicate    = string(outcome.Duplicate)
	OutcomeHeld         = string(outcome.Held)
	OutcomeDeadLettered = string(outcome.DeadLettered)
	OutcomeCommitted    = string(outcome.Committed)
	OutcomeCompensated  = string(outcome.Compensated)
	OutcomeError        = string(outcome.Error)
)

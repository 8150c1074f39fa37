package tracing

// Span names. Job and enqueue spans are named "<name> <job type>", a
// compensation span "compensate <step>".
const (
	SpanEnqueue      = "enqueue"
	SpanJob          = "job"
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

// Span and event attribute keys. Kafka attributes (messaging.*) come from
// kotel. No attribute ever holds a job's payload, its result, heartbeat
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

// Outcomes recorded by the worker. Claim outcomes are those of the
// idempotency store (acquired, held, duplicate, takeover, mismatch).
const (
	OutcomeCompleted    = "completed"
	OutcomeFailed       = "failed"
	OutcomeRetry        = "retry"
	OutcomeLeaseLost    = "lease_lost"
	OutcomeDuplicate    = "duplicate"
	OutcomeHeld         = "held"
	OutcomeDeadLettered = "dead_lettered"
	OutcomeCommitted    = "committed"
	OutcomeCompensated  = "compensated"
	OutcomeError        = "error"
)

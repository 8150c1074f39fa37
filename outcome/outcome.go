// Package outcome is leasehold's one vocabulary of how things end: the
// value of the leasehold.outcome span attribute, of the outcome label of
// every leasehold metric, of a key's history entries ("how it ended"), of
// the claim outcomes that Hooks and Stats report (leasehold.Outcome's
// String), and of the `worker audit` report. Each name is spelled once,
// here; docs/observability.md lists them with what they mean.
//
// The names fall in groups by what they describe (a claim, an attempt, a
// compensation step, an operation inside an attempt, an operator action),
// and a name shared by two groups means the same thing in both: "held"
// is a key another worker holds whether a claim or a lease acquire saw it,
// "dead_lettered" a thing that ended on the dead-letter topic.
package outcome

// Name is an outcome's name as spans, metrics and histories spell it:
// lower case, words joined by an underscore.
type Name string

// Claim outcomes: the answer to claiming a record's idempotency key (the
// claim span, leasehold.claims, Stats.Claimed, ClaimInfo.Outcome). Acquired
// and Held are also the outcomes of a lease acquire
// (leasehold.lease.acquire).
const (
	// Acquired: the key was free; this worker holds its lease and runs the job.
	Acquired Name = "acquired"
	// Takeover: the previous owner's lease expired; this worker runs the job
	// with a newer fence after compensating the previous attempt's steps.
	Takeover Name = "takeover"
	// Held: another worker's live lease covers the key; the record waits,
	// uncommitted, and is claimed again later.
	Held Name = "held"
	// Duplicate: the key already completed (or failed for good); its cached
	// outcome is replayed and the record committed without running the job.
	Duplicate Name = "duplicate"
	// Mismatch: the key completed with another payload: the key was reused;
	// the record is dead-lettered.
	Mismatch Name = "mismatch"
	// Undecodable: the payload could not be fingerprinted; the record is
	// dead-lettered without a claim.
	Undecodable Name = "undecodable"
	// Error: the operation could not be carried out (Redis unreachable, a
	// broker error); it is tried again.
	Error Name = "error"
)

// Attempt outcomes: how one attempt at a record ended (the job span,
// leasehold.job.duration and the key's history entry).
const (
	// Completed: the handler succeeded and its fenced commit landed.
	Completed Name = "completed"
	// Retry: the handler failed with a retryable error; its steps were
	// compensated, the lease released and the record parked for another
	// attempt. A compensation step that failed and will be tried again
	// after a backoff ends with Retry too.
	Retry Name = "retry"
	// Failed: the handler failed for good (ErrPermanent, or attempts
	// exhausted); the failure is recorded and the record dead-lettered.
	Failed Name = "failed"
	// LeaseLost: the lease expired, was taken, or was not renewed in time;
	// the steps were compensated and the key is claimed again.
	LeaseLost Name = "lease_lost"
	// CommitRefused: Redis refused the fenced commit (another owner's fence
	// is newer) before the worker saw its lease lost; handled as LeaseLost.
	CommitRefused Name = "commit_refused"
	// TakenOver: another worker took the key over before this attempt
	// recorded its end (written by the new owner into the history).
	TakenOver Name = "taken_over"
	// Cancelled: the worker shut down while the attempt ran (its steps were
	// compensated and the key is claimed again by the next worker), or an
	// operator cancelled it with worker cancel (compensated, and the key
	// recorded as failed until worker reset).
	Cancelled Name = "cancelled"
	// DeadLettered: the record went to the dead-letter topic (rejected, or
	// failed for good); for a compensation step, it failed on its last
	// attempt and its journal is dead-lettered for an operator.
	DeadLettered Name = "dead_lettered"
	// Unrecorded: the attempt's end could not be written to Redis; its
	// lease lapses and the key is claimed again.
	Unrecorded Name = "unrecorded"
	// Revoked: the record's partition was revoked or lost while it waited
	// (parked, or queued behind its key), or the worker shut down while it
	// waited; the partition's next owner handles it.
	Revoked Name = "revoked"
)

// Compensation step outcomes (leasehold.compensations, the compensate
// span, the compensation entries of a key's history), besides Retry and
// DeadLettered.
const (
	// Compensated: the step's undo handler succeeded.
	Compensated Name = "compensated"
	// Superseded: the step was reopened meanwhile (its effect landed late)
	// or the compensating worker lost its lease; another run undoes it.
	Superseded Name = "superseded"
)

// Operation outcomes: the child spans of an attempt and the producer span,
// and a lease renewal (leasehold.lease.renew.duration), besides Error.
const (
	// OK: the operation (a handler, a renewal round trip) succeeded.
	OK Name = "ok"
	// Committed: the fenced commit landed (the commit span).
	Committed Name = "committed"
	// Rejected: the fenced commit was refused (the commit span).
	Rejected Name = "rejected"
	// Enqueued: the broker acknowledged an enqueued record (the enqueue span).
	Enqueued Name = "enqueued"
	// Produced: `worker enqueue` produced a record (its producer span).
	Produced Name = "produced"
)

// Operator action outcomes: the spans of the Inspector's and the console's
// actions, besides Compensated and Error.
const (
	// Reset: a key's record was removed (`worker reset`).
	Reset Name = "reset"
	// Expired: a lease was expired by an operator, so its holder loses it.
	// In the audit report: a record with no Redis record, older than the
	// retention, whose record may have lapsed.
	Expired Name = "expired"
	// Refused: the action was refused for a reason the operator can act on
	// (no lease, the lease changed, nothing to do).
	Refused Name = "refused"
	// None: the action found nothing to act on.
	None Name = "none"
)

// Audit outcomes: what `worker audit` found a record came to, besides
// Completed, Duplicate, DeadLettered, Failed, Cancelled (a key an operator
// cancelled) and Expired.
const (
	// Running: a record whose key is running or waiting for its next attempt.
	Running Name = "running"
	// Pending: a record not consumed yet (at or past the committed offset).
	Pending Name = "pending"
	// Unaccounted: a record whose fate the audit could not establish.
	Unaccounted Name = "unaccounted"
)

// Claims lists the claim outcomes, in the order the worker counts them,
// then Error.
func Claims() []Name {
	return []Name{Acquired, Takeover, Held, Duplicate, Mismatch, Undecodable, Error}
}

// Attempts lists the attempt outcomes.
func Attempts() []Name {
	return []Name{Completed, Duplicate, Retry, Failed, LeaseLost, CommitRefused, TakenOver, Cancelled,
		DeadLettered, Unrecorded, Revoked}
}

// CompensationSteps lists the compensation step outcomes.
func CompensationSteps() []Name {
	return []Name{Compensated, Retry, DeadLettered, Superseded}
}

// All lists every outcome once.
func All() []Name {
	return []Name{Acquired, Takeover, Held, Duplicate, Mismatch, Undecodable, Error,
		Completed, Retry, Failed, LeaseLost, CommitRefused, TakenOver, Cancelled, DeadLettered, Unrecorded, Revoked,
		Compensated, Superseded,
		OK, Committed, Rejected, Enqueued, Produced,
		Reset, Expired, Refused, None,
		Running, Pending, Unaccounted}
}

// Known reports whether s is the name of an outcome in [All].
func Known(s string) bool {
	_, ok := known[Name(s)]
	return ok
}

var known = func() map[Name]struct{} {
	m := make(map[Name]struct{})
	for _, n := range All() {
		m[n] = struct{}{}
	}
	return m
}()

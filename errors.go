package leasehold

import (
	"fmt"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/resulterr"
	"github.com/leasehold/leasehold/lease"
)

var (
	// ErrLeaseLost is the cause with which a job's context is cancelled when
	// the worker no longer holds the job's lease (it expired, was taken over,
	// or renewals failed until the local deadline), and the error that
	// completing such a job returns. A handler that sees it must stop: another
	// worker may already be running the job with a newer fence. It is
	// lease.ErrLost (and idempotency.ErrLeaseLost), so errors.Is matches the
	// errors of every package of the module.
	ErrLeaseLost = lease.ErrLost

	// ErrUnavailable reports that Redis could not be reached. The worker
	// fails closed on it: it pauses fetching, runs no handler and moves no
	// offset until Redis answers again. It is lease.ErrUnavailable (and
	// idempotency.ErrUnavailable, compensation.ErrUnavailable), so errors.Is
	// matches the errors of every package of the module.
	ErrUnavailable = lease.ErrUnavailable

	// ErrTopicMissing is returned by [Worker.Start] when a topic the worker
	// consumes, or its dead-letter topic, does not exist on the brokers. The
	// worker never creates topics (a production cluster usually refuses
	// auto-creation, and a dead-letter produce to a missing topic would
	// block its partition); create them first.
	ErrTopicMissing = leasing.NewError("leasehold: topic does not exist", leasing.ClassTerminal)

	// ErrInvalidKey reports an idempotency key that is empty, too long, or
	// holds control characters or whitespace. It is idempotency.ErrInvalidKey.
	ErrInvalidKey = idempotency.ErrInvalidKey

	// ErrInvalidJobType reports a job type that is empty, too long, or holds
	// control characters or whitespace.
	ErrInvalidJobType = leasing.NewError("leasehold: invalid job type", leasing.ClassTerminal)

	// ErrDuplicateType is returned by [Worker.Register] when a handler is
	// already registered for the job type.
	ErrDuplicateType = leasing.NewError("leasehold: job type already registered", leasing.ClassTerminal)

	// ErrInvalidLeaseTTL is returned by [Worker.Register] for a
	// [WithJobLeaseTTL] that is negative, or not longer than the worker's
	// renew interval plus the drift margin: renewals would come too late and
	// the job's lease would run out while it runs. It is
	// idempotency.ErrInvalidTTL.
	ErrInvalidLeaseTTL = idempotency.ErrInvalidTTL

	// ErrConflictingOptions is returned by [New] when two options set one
	// setting to different values: the lease TTL ([WithLeaseTTL] and
	// lease.WithTTL in [WithLeaseOptions]), the retention ([WithRetention]
	// and idempotency.WithRetention), the key prefix ([WithKeyPrefix] and
	// the prefix options of package lease, idempotency and compensation),
	// the providers ([WithTracerProvider], [WithMeterProvider],
	// [WithPropagator], [WithTracing]'s Tracer and the lease options), or a
	// Kafka consumer-group option the worker sets itself given with
	// [WithKafka]. The error names both options and the one to keep. Equal
	// values given twice are accepted.
	ErrConflictingOptions = leasing.NewError("leasehold: conflicting options", leasing.ClassTerminal)

	// ErrUnknownType is the dead-letter cause for a record whose job type has
	// no registered handler.
	ErrUnknownType = leasing.NewError("leasehold: no handler for job type", leasing.ClassTerminal)

	// ErrPayloadTooLarge reports a payload above the configured maximum
	// ([WithMaxPayload]).
	ErrPayloadTooLarge = leasing.NewError("leasehold: payload too large", leasing.ClassTerminal)

	// ErrFingerprintMismatch is the dead-letter cause for a record whose
	// payload differs from the payload first processed under the same key.
	ErrFingerprintMismatch = leasing.NewError("leasehold: payload differs from the one first processed under this key", leasing.ClassTerminal)

	// ErrCancelled is matched by the cancellation cause (context.Cause) of a
	// job that an operator cancelled (worker cancel, inspect's
	// Inspector.Cancel): the handler must stop; its saga steps are
	// compensated and the key ends terminally as cancelled until it is
	// reset. The cause is a [*CancelledError].
	ErrCancelled = leasing.NewError("leasehold: cancelled", leasing.ClassTerminal)

	// ErrPermanent marks a handler error as terminal: the job is not retried,
	// its failure is recorded and the record goes to the dead-letter topic.
	// Wrap errors with [Permanent] rather than returning it bare.
	ErrPermanent = leasing.NewError("leasehold: permanent failure", leasing.ClassTerminal)

	// ErrUndecodable marks a handler error as a payload that does not decode
	// ([Typed] wraps its decoding errors in it): like [ErrPermanent], the job
	// is not retried; the record is dead-lettered with reason undecodable.
	ErrUndecodable = leasing.NewError("leasehold: payload does not decode", leasing.ClassTerminal)

	// ErrCorruptRecord is the dead-letter cause for a record whose key's
	// stored idempotency record cannot be decoded (damaged outside the
	// library): the key cannot be claimed, so retrying would block its
	// partition's commits for ever. It is idempotency.ErrCorrupt.
	ErrCorruptRecord = idempotency.ErrCorrupt

	// ErrAttemptsExhausted is the dead-letter cause for a job that failed with
	// retryable errors as many times as its [WithMaxAttempts] allows.
	ErrAttemptsExhausted = leasing.NewError("leasehold: attempts exhausted", leasing.ClassTerminal)

	// ErrResultTooLarge is the terminal failure of a job whose handler
	// returned a result over the idempotency store's bound (64 KiB unless
	// raised with idempotency.WithMaxResult through
	// [WithIdempotencyOptions]). It is permanent, never an outage: the job
	// is not retried, the failure is recorded under its key and the record
	// is dead-lettered with reason [ReasonResultTooLarge].
	ErrResultTooLarge = resulterr.ErrTooLarge

	// ErrShutdown is the cause with which running jobs' contexts are
	// cancelled when a graceful shutdown's drain timeout passes; it wraps
	// [ErrLeaseLost], because the worker gives their leases up.
	ErrShutdown = leasing.NewSentinel("leasehold: worker shut down before the job finished", ErrLeaseLost)

	// ErrNotStarted is returned by [Worker.Ready] before the worker has
	// started (also while Start is under way, and after a failed Start): a
	// readiness probe may wait, while any other error of Ready reports a
	// started worker that cannot make progress.
	ErrNotStarted = leasing.NewError("leasehold: worker not started", leasing.ClassTerminal)

	// ErrClosed is returned by methods called on a worker that has shut down.
	ErrClosed = leasing.NewError("leasehold: worker closed", leasing.ClassTerminal)

	// ErrNoCompensation is returned by [StepWith] and [Job.Step] when the
	// worker was built without [WithCompensation].
	ErrNoCompensation = leasing.NewError("leasehold: saga steps need WithCompensation", leasing.ClassTerminal)

	// ErrNoWorker is returned by [Job.Heartbeat] on a Job that no worker
	// runs: one built by hand. Build a handler's test job with package
	// leaseholdtest, which records heartbeats and saga steps.
	ErrNoWorker = leasing.NewError("leasehold: the job is not run by a worker; build test jobs with package leaseholdtest", leasing.ClassTerminal)

	// ErrNoHandlers is returned by [Worker.Start] when no job type is
	// registered.
	ErrNoHandlers = leasing.NewError("leasehold: no job types registered", leasing.ClassTerminal)

	// ErrRetryAfter matches the error of [RetryAfter]: a handler's answer
	// that its job and its limit group wait a time before running again
	// (retried, not terminal).
	ErrRetryAfter = leasing.NewError("leasehold: retry after", leasing.ClassRetry)
)

// Permanent wraps err so that the worker treats it as terminal: no retry,
// the failure is cached under the job's key and the record is dead-lettered.
// errors.Is(Permanent(err), ErrPermanent) and errors.Is(Permanent(err), err)
// both hold.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// PermanentError is a handler error that must not be retried. Build one with
// [Permanent].
type PermanentError struct {
	Err error
}

// Error implements error.
func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// Is reports ErrPermanent as matching.
func (e *PermanentError) Is(target error) bool { return target == ErrPermanent }

// LeaseLostError is the cancellation cause of a job whose lease was lost. It
// matches [ErrLeaseLost] and unwraps to the lease package's reason (expired,
// stolen, renew deadline passed).
type LeaseLostError struct {
	Key   string
	Fence uint64
	Err   error
}

// Error implements error.
func (e *LeaseLostError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("leasehold: lease lost for key %q (fence %d)", e.Key, e.Fence)
	}
	return fmt.Sprintf("leasehold: lease lost for key %q (fence %d): %v", e.Key, e.Fence, e.Err)
}

// Unwrap returns the lease-level reason.
func (e *LeaseLostError) Unwrap() error { return e.Err }

// Is reports ErrLeaseLost as matching.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// DeadLetterError describes why a record went to the dead-letter topic.
type DeadLetterError struct {
	Reason string // one of the Reason* constants
	Err    error
}

// Error implements error.
func (e *DeadLetterError) Error() string {
	if e.Err == nil {
		return "leasehold: dead-lettered: " + e.Reason
	}
	return "leasehold: dead-lettered (" + e.Reason + "): " + e.Err.Error()
}

// Unwrap returns the underlying cause.
func (e *DeadLetterError) Unwrap() error { return e.Err }

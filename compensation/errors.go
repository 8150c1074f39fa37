package compensation

import (
	"fmt"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/lease"
)

var (
	// ErrUnknownHandler means no compensation handler is registered under the name.
	ErrUnknownHandler = leasing.NewError("compensation: unknown handler", leasing.ClassTerminal)

	// ErrDuplicateHandler means [Register] was called twice with one name.
	ErrDuplicateHandler = leasing.NewError("compensation: handler registered twice", leasing.ClassTerminal)

	// ErrInvalid reports a bad argument: an empty or oversized name, arguments
	// that do not encode, or encode beyond the configured bound.
	ErrInvalid = leasing.NewError("compensation: invalid argument", leasing.ClassTerminal)

	// ErrNotOpen is returned by [Journal.Step] and [Journal.Seal] when the
	// journal no longer accepts steps: its compensation or commit has begun.
	ErrNotOpen = leasing.NewError("compensation: journal no longer open", leasing.ClassLeaseLost)

	// ErrTooManySteps means the journal already holds the configured maximum.
	ErrTooManySteps = leasing.NewError("compensation: too many steps in one journal", leasing.ClassTerminal)

	// ErrLateEffect is returned by [Journal.Step] when the step's effect
	// completed after another process had begun compensating it as an
	// in-doubt step. The step is reopened so that it is compensated again;
	// the caller has lost its lease and should compensate (see
	// [Journal.Compensate]). The error is a [*LateEffectError].
	ErrLateEffect = leasing.NewError("compensation: step completed after its compensation began", leasing.ClassTerminal)

	// ErrDeadLettered means a step's compensation failed on every attempt; the
	// journal waits in the dead-letter list for [Runner.Retry]. The error is a
	// [*DeadLetterError].
	ErrDeadLettered = leasing.NewError("compensation: dead-lettered", leasing.ClassTerminal)

	// ErrBusy means another process holds the journal's compensation lease.
	ErrBusy = leasing.NewError("compensation: journal being compensated elsewhere", leasing.ClassRetry)

	// ErrUnavailable wraps failures to reach Redis. It is lease.ErrUnavailable
	// (and leasehold.ErrUnavailable): one error across the packages.
	ErrUnavailable = lease.ErrUnavailable

	// ErrClosed means the Runner was shut down.
	ErrClosed = leasing.NewError("compensation: runner closed", leasing.ClassOutage)

	// ErrCommitUnknown is returned (possibly wrapped) by a [WithCommitted]
	// function that cannot tell, now or later, whether a sealed journal's
	// commit landed (the record that would tell may have expired). The sweep
	// leaves the journal sealed, as it does without WithCommitted, and counts
	// it in [SweepReport.Sealed] rather than as a failure.
	ErrCommitUnknown = leasing.NewError("compensation: commit outcome unknown", leasing.ClassOutage)
)

// DeadLetterError is the detail of [ErrDeadLettered]: the journal and the
// step whose compensation kept failing.
type DeadLetterError struct {
	Ref      Ref
	Step     int
	StepName string
	Attempts int
	Err      error // the last attempt's error
}

// Error implements error.
func (e *DeadLetterError) Error() string {
	return fmt.Sprintf("compensation: %s step %d (%s) dead-lettered after %d attempts: %v",
		e.Ref, e.Step, e.StepName, e.Attempts, e.Err)
}

// Unwrap returns [ErrDeadLettered] and the last attempt's error.
func (e *DeadLetterError) Unwrap() []error { return []error{ErrDeadLettered, e.Err} }

// LateEffectError is the detail of [ErrLateEffect].
type LateEffectError struct {
	Ref      Ref
	Step     int
	StepName string
}

// Error implements error.
func (e *LateEffectError) Error() string {
	return fmt.Sprintf("compensation: %s step %d (%s) completed after its compensation began", e.Ref, e.Step, e.StepName)
}

// Unwrap returns [ErrLateEffect].
func (e *LateEffectError) Unwrap() error { return ErrLateEffect }

// HandlerError wraps an error returned (or a panic raised) by a compensation
// handler.
type HandlerError struct {
	Handler string
	Err     error
}

// Error implements error.
func (e *HandlerError) Error() string {
	return fmt.Sprintf("compensation: handler %q: %v", e.Handler, e.Err)
}

// Unwrap returns the handler's error.
func (e *HandlerError) Unwrap() error { return e.Err }

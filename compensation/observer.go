package compensation

import (
	"context"
	"strconv"

	"github.com/leasehold/leasehold/outcome"
)

// Outcome is how one compensation attempt ended: a name of leasehold's one
// outcome vocabulary (package outcome).
type Outcome = outcome.Name

// Outcomes of a compensation attempt (outcome.CompensationSteps).
const (
	OutcomeCompensated  = outcome.Compensated  // the handler succeeded
	OutcomeRetry        = outcome.Retry        // it failed and will be tried again after a backoff
	OutcomeDeadLettered = outcome.DeadLettered // it failed on its last attempt
	OutcomeSuperseded   = outcome.Superseded   // the step was reopened meanwhile (late effect) or the lease lost
)

// StepInfo describes the step a compensation handler is undoing. Handlers
// read it with [StepFromContext].
type StepInfo struct {
	Ref        Ref
	Step       int    // 1-based position in the journal
	Name       string // the step's name
	Handler    string
	Attempt    int  // 1-based, counted across processes
	Generation int  // 1, or more when the step's effect came late and it was reopened
	InDoubt    bool // the step's effect was never confirmed: it may not have happened
}

// IdempotencyKey identifies this compensation of this step, stable across
// attempts and processes: pass it to the system the handler calls so that
// a compensation repeated after a crash takes effect once.
func (s StepInfo) IdempotencyKey() string {
	return s.Ref.String() + "/" + strconv.Itoa(s.Step) + "/" + strconv.Itoa(s.Generation)
}

type stepKey struct{}

// StepFromContext returns the step a compensation handler runs for.
func StepFromContext(ctx context.Context) (StepInfo, bool) {
	s, ok := ctx.Value(stepKey{}).(StepInfo)
	return s, ok
}

// Observer receives every compensation attempt: StepStart before the handler
// runs (its returned context is the handler's, so a span started there is the
// handler's parent) and StepEnd after. Implementations must be safe for
// concurrent use and must not block.
type Observer interface {
	StepStart(ctx context.Context, s StepInfo) context.Context
	StepEnd(ctx context.Context, s StepInfo, o Outcome, err error)
}

// ObserverFuncs adapts two functions to an [Observer]; nil fields are skipped.
type ObserverFuncs struct {
	Start func(ctx context.Context, s StepInfo) context.Context
	End   func(ctx context.Context, s StepInfo, o Outcome, err error)
}

// StepStart implements [Observer].
func (f ObserverFuncs) StepStart(ctx context.Context, s StepInfo) context.Context {
	if f.Start == nil {
		return ctx
	}
	return f.Start(ctx, s)
}

// StepEnd implements [Observer].
func (f ObserverFuncs) StepEnd(ctx context.Context, s StepInfo, o Outcome, err error) {
	if f.End != nil {
		f.End(ctx, s, o, err)
	}
}

package leasehold

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/leasehold/leasehold/compensation"
)

// StepWith runs one saga step of job (requires [WithCompensation]) whose
// compensation is undo, the handle that registering the handler returned
// (compensation.RegisterUndo or compensation.MustRegister): args are the
// handler's argument type, checked at compile time, and undo must come from
// the registry given to WithCompensation. It journals the intent (the
// handler's name and args as JSON) while the job's lease is held, runs do,
// then marks the step done; if the attempt later fails, loses its lease or
// has its commit rejected, the worker runs the compensations of its steps in
// reverse order, each once, and a takeover of the key compensates the steps
// of older fences before the job runs again. If the intent cannot be
// journaled (the lease is lost) do does not run. Undo handlers must accept
// steps whose effect never happened (in doubt) and be idempotent (see
// compensation.StepInfo.IdempotencyKey).
//
// Go methods cannot have type parameters, so this is a function rather than
// a method of Job.
func StepWith[T any](ctx context.Context, job *Job, name string, do func(context.Context) error,
	undo compensation.Undo[T], args T,
) error {
	reg := job.compensations()
	if reg == nil {
		return ErrNoCompensation
	}
	if !undo.RegisteredIn(reg) {
		if undo.Name() == "" {
			return fmt.Errorf("%w: the zero Undo; use the handle compensation.RegisterUndo returned",
				compensation.ErrUnknownHandler)
		}
		return fmt.Errorf("%w: %q is registered in another registry than the one given to WithCompensation; "+
			"register it there", compensation.ErrUnknownHandler, undo.Name())
	}
	return job.step(ctx, name, do, undo.Name(), args)
}

// compensations returns the registry that the job's saga steps may name, or
// nil when steps are refused.
func (j *Job) compensations() *compensation.Registry {
	switch {
	case j.env != nil:
		return j.env.Registry()
	case j.w != nil && j.w.comp != nil:
		return j.w.comp.Registry()
	}
	return nil
}

// RecordHeartbeat records v, encoded as JSON, as job's heartbeat details
// (see [Job.Heartbeat]: throttled, the latest wins, flushed when the handler
// fails). The next attempt reads it back with [LastHeartbeatAs].
func RecordHeartbeat[T any](ctx context.Context, job *Job, v T) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("leasehold: encode heartbeat details of %s: %w", job.Type, err)
	}
	return job.Heartbeat(ctx, b)
}

// LastHeartbeatAs decodes the details the previous attempt recorded (with
// [RecordHeartbeat], or JSON given to [Job.Heartbeat]) into a T. ok is false
// on a first attempt and whenever no attempt heartbeated; err reports
// details that do not decode into a T (recorded by an older version of the
// handler, say), with ok true.
func LastHeartbeatAs[T any](job *Job) (v T, ok bool, err error) {
	last := job.LastHeartbeat()
	if last == nil {
		return v, false, nil
	}
	if err := json.Unmarshal(last, &v); err != nil {
		var zero T
		return zero, true, fmt.Errorf("leasehold: decode the last heartbeat details of %s: %w", job.Type, err)
	}
	return v, true, nil
}

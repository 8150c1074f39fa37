package leaseholdtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/jobenv"
	"github.com/leasehold/leasehold/internal/resulterr"
	"github.com/leasehold/leasehold/outcome"
)

// maxArgs is the bound on a step's encoded arguments, the compensation
// runner's default (compensation.WithMaxArgs).
const maxArgs = 64 << 10

// Outcome is how a worker would settle an attempt.
type Outcome int

const (
	// Completed means the handler returned no error; the worker commits the
	// result.
	Completed Outcome = iota + 1
	// Retry means a retryable error; the worker compensates the attempt's steps and
	// runs the job again after a backoff, while attempts are left.
	Retry
	// Failed means an error wrapping leasehold.ErrPermanent,
	// leasehold.ErrUndecodable (a payload that leasehold.Typed cannot
	// decode) or leasehold.ErrResultTooLarge (a result over the bound,
	// [WithMaxResult]); the worker compensates the steps, records the
	// failure and dead-letters the record.
	Failed
	// LeaseLost means the lease was lost ([Env.LoseLease]) or the handler returned
	// an error matching leasehold.ErrLeaseLost; the worker compensates the
	// steps and another attempt takes the key over.
	LeaseLost
)

// String returns the outcome's name, as the worker's span, metric and
// history name such an attempt (package outcome: completed, retry, failed,
// lease_lost).
func (o Outcome) String() string {
	switch o {
	case Completed:
		return string(outcome.Completed)
	case Retry:
		return string(outcome.Retry)
	case Failed:
		return string(outcome.Failed)
	case LeaseLost:
		return string(outcome.LeaseLost)
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Step is one saga step an attempt ran.
type Step struct {
	Name    string
	Handler string          // the undo handler's name
	Args    json.RawMessage // the undo's arguments, as a journal stores them
	// Done is true when the step's do returned nil; a step whose do failed
	// is in doubt and is compensated too.
	Done bool
	// Compensated is true once [Attempt.Compensate] ran its undo handler
	// successfully.
	Compensated bool
}

// Attempt is one run of a handler by [Env.Run].
type Attempt struct {
	// Result and Err are what the handler returned; Err matches
	// leasehold.ErrResultTooLarge when the handler succeeded with a result
	// over the bound ([WithMaxResult]), which the worker refuses to commit.
	Result []byte
	Err    error

	env    *Env
	job    *leasehold.Job
	cancel context.CancelCauseFunc
	cause  error // the job context's cause when the handler returned

	mu         sync.Mutex
	heartbeats [][]byte
	steps      []Step
}

// Job returns the job the handler ran on.
func (a *Attempt) Job() *leasehold.Job { return a.job }

// Outcome tells how a worker would settle the attempt, before its retry
// policy: a job type's WithRetryClassifier and WithMaxAttempts can turn Retry into
// Failed.
func (a *Attempt) Outcome() Outcome {
	switch {
	case errors.Is(a.cause, leasehold.ErrLeaseLost) || errors.Is(a.Err, leasehold.ErrLeaseLost):
		return LeaseLost
	case a.Err == nil:
		return Completed
	case errors.Is(a.Err, leasehold.ErrPermanent), errors.Is(a.Err, leasehold.ErrUndecodable),
		errors.Is(a.Err, leasehold.ErrResultTooLarge):
		return Failed // terminal for the worker, as its classify reads them
	}
	return Retry
}

func (a *Attempt) finish(jctx context.Context, res []byte, err error) {
	if limit := a.env.cfg.maxRes; err == nil && len(res) > limit {
		err = &resulterr.Error{Err: &idempotency.TooLargeError{What: "result", Size: len(res), Limit: limit}}
	}
	a.Result, a.Err, a.cause = res, err, context.Cause(jctx)
	a.cancel(nil)
}

// Heartbeats returns the details of every heartbeat the attempt recorded, in
// order (a worker throttles them; here none is dropped).
func (a *Attempt) Heartbeats() [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([][]byte(nil), a.heartbeats...)
}

// LastHeartbeat returns the last details the attempt recorded, or nil: what
// the next attempt reads with Job.LastHeartbeat.
func (a *Attempt) LastHeartbeat() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.heartbeats) == 0 {
		return nil
	}
	return a.heartbeats[len(a.heartbeats)-1]
}

// HeartbeatsAs decodes the attempt's heartbeats (JSON, as
// leasehold.RecordHeartbeat writes them) into values of T.
func HeartbeatsAs[T any](a *Attempt) ([]T, error) {
	hbs := a.Heartbeats()
	out := make([]T, len(hbs))
	for i, d := range hbs {
		if err := json.Unmarshal(d, &out[i]); err != nil {
			return nil, fmt.Errorf("leaseholdtest: heartbeat %d: %w", i+1, err)
		}
	}
	return out, nil
}

// Steps returns the saga steps the attempt ran, in order.
func (a *Attempt) Steps() []Step {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Step(nil), a.steps...)
}

// Compensate runs the undo handlers of the attempt's steps in reverse order,
// in-doubt steps included, as a worker does when the attempt loses its lease
// or fails: each handler gets its step's compensation.StepInfo in its
// context (the journal's Ref is the job's key and fence) and the arguments
// decoded from the JSON the step journaled. It stops at the first handler
// that fails and returns its error (a worker retries it with backoff); a
// step already compensated is not undone again.
func (a *Attempt) Compensate(ctx context.Context) error {
	reg := a.env.cfg.reg
	steps := a.Steps()
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		if s.Compensated {
			continue
		}
		info := compensation.StepInfo{
			Ref:  compensation.Ref{Name: a.job.Key, Fence: a.job.Fence()},
			Step: i + 1, Name: s.Name, Handler: s.Handler, Attempt: 1, Generation: 1, InDoubt: !s.Done,
		}
		if err := reg.Invoke(ctx, info, s.Args); err != nil {
			return err
		}
		a.mu.Lock()
		a.steps[i].Compensated = true
		a.mu.Unlock()
	}
	return nil
}

// attemptEnv is the jobenv.Env of an attempt's job.
type attemptEnv Attempt

var _ jobenv.Env = (*attemptEnv)(nil)

func (e *attemptEnv) Heartbeat(_ context.Context, details []byte) error {
	a := (*Attempt)(e)
	a.mu.Lock()
	a.heartbeats = append(a.heartbeats, details)
	a.mu.Unlock()
	for _, fn := range a.env.heartbeatListeners() {
		fn(a, details)
	}
	return a.lost() //nolint:contextcheck // the job's own context carries the lease-lost cause
}

// lost returns the cause of a lost lease, or nil.
func (a *Attempt) lost() error {
	if cause := context.Cause(a.job.Context()); errors.Is(cause, leasehold.ErrLeaseLost) {
		return cause
	}
	return nil
}

func (e *attemptEnv) Registry() *compensation.Registry { return e.env.cfg.reg }

func (e *attemptEnv) Step(ctx context.Context, name string, do func(context.Context) error, undo string, args any) error {
	a := (*Attempt)(e)
	if name == "" || len(name) > compensation.MaxHandlerNameLen || do == nil {
		return fmt.Errorf("%w: step name must be 1 to %d bytes and do non-nil", compensation.ErrInvalid, compensation.MaxHandlerNameLen)
	}
	if !e.env.cfg.reg.Has(undo) {
		return fmt.Errorf("%w: %q (register it before the step runs)", compensation.ErrUnknownHandler, undo)
	}
	enc, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("%w: encode arguments of step %q: %w", compensation.ErrInvalid, name, err)
	}
	if len(enc) > maxArgs {
		return fmt.Errorf("%w: arguments of step %q are %d bytes, limit %d", compensation.ErrInvalid, name, len(enc), maxArgs)
	}
	if err := a.lost(); err != nil { //nolint:contextcheck // the job's own context carries the lease-lost cause
		return err // the intent cannot be journaled: do does not run
	}
	a.mu.Lock()
	i := len(a.steps)
	a.steps = append(a.steps, Step{Name: name, Handler: undo, Args: enc})
	a.mu.Unlock()
	if err := do(ctx); err != nil {
		return err
	}
	a.mu.Lock()
	a.steps[i].Done = true
	a.mu.Unlock()
	return nil
}

func (e *attemptEnv) Logger() *slog.Logger {
	j := e.job
	return e.env.cfg.log.With(slog.String("job_type", j.Type), slog.String("key", j.Key),
		slog.Uint64("fence", j.Fence()), slog.Int("attempt", j.Attempt))
}

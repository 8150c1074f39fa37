package leasehold

import (
	"context"
	"time"
)

// The observation channel. The worker emits every event once, from one
// place, to its observers; counting (Stats), logging, tracing and metrics,
// and the user's Hooks are each an observer. An observer implements the
// one-method interfaces of the events it wants (franz-go's hook shape:
// pkg/kgo/hooks.go), and newObservers sorts them once, when the worker is
// built. Observers run synchronously on the worker's goroutines and must not
// block.
//
// The events of a record, in order:
//
//	claiming -> claimed -> [started -> heartbeat* -> (leaseLost | cancelled)? -> compensated?] -> ended -> parked?
//	claimed or accepted -> deadLetterDecided -> deadLettered (once the broker acknowledged the copy)

// Each event is one interface with one method; see the emitting methods of
// observers below for what the arguments mean.
type (
	claimingObserver interface {
		observeClaiming(d *delivery)
	}
	claimObserver interface {
		observeClaim(ctx context.Context, d *delivery, c *claim, start time.Time)
	}
	startObserver interface {
		observeStart(ctx context.Context, j *Job)
	}
	heartbeatObserver interface {
		observeHeartbeat(ctx context.Context, j *Job, details []byte)
	}
	leaseLostObserver interface {
		observeLeaseLost(ctx context.Context, d *delivery, j *Job, cause error)
	}
	cancelObserver interface {
		observeCancel(ctx context.Context, d *delivery, j *Job, cause error)
	}
	compensatedObserver interface {
		observeCompensated(ctx context.Context, j *Job, err error)
	}
	endObserver interface {
		observeEnd(ctx context.Context, d *delivery, e attemptEnd)
	}
	parkObserver interface {
		observePark(ctx context.Context, info ClaimInfo, delay time.Duration, err error)
	}
	deadLetterDecidedObserver interface {
		observeDeadLetterDecided(ctx context.Context, d *delivery, reason string, err error) context.Context
	}
	deadLetteredObserver interface {
		observeDeadLettered(ctx context.Context, d *delivery, dl deadLettered)
	}
	pauseObserver  interface{ observePause(cause error) }
	resumeObserver interface{ observeResume(paused time.Duration) }
)

// deadLettered describes a dead-letter copy the broker acknowledged.
type deadLettered struct {
	reason    string
	cause     error
	truncated bool   // the stand-in copy (HeaderDLQTruncated) was written
	dlqTopic  string // where it was written
}

// observers fans each event out to the observers that implement it.
type observers struct {
	onClaiming          []claimingObserver
	onClaim             []claimObserver
	onStart             []startObserver
	onHeartbeat         []heartbeatObserver
	onLeaseLost         []leaseLostObserver
	onCompensated       []compensatedObserver
	onCancel            []cancelObserver
	onEnd               []endObserver
	onPark              []parkObserver
	onDeadLetterDecided []deadLetterDecidedObserver
	onDeadLettered      []deadLetteredObserver
	onPause             []pauseObserver
	onResume            []resumeObserver
}

// newObservers sorts os by the events each implements; an observer that
// implements none is ignored.
func newObservers(os ...any) *observers {
	var o observers
	for _, x := range os {
		addTo(&o.onClaiming, x)
		addTo(&o.onClaim, x)
		addTo(&o.onStart, x)
		addTo(&o.onHeartbeat, x)
		addTo(&o.onLeaseLost, x)
		addTo(&o.onCompensated, x)
		addTo(&o.onCancel, x)
		addTo(&o.onEnd, x)
		addTo(&o.onPark, x)
		addTo(&o.onDeadLetterDecided, x)
		addTo(&o.onDeadLettered, x)
		addTo(&o.onPause, x)
		addTo(&o.onResume, x)
	}
	return &o
}

func addTo[T any](list *[]T, x any) {
	if t, ok := x.(T); ok {
		*list = append(*list, t)
	}
}

// claiming: d is about to be claimed (the tracer starts its attempt's span
// here, so that the claim can write the span into the key's history).
func (o *observers) claiming(d *delivery) {
	for _, x := range o.onClaiming {
		x.observeClaiming(d)
	}
}

// claimed: the claim of d was decided (c.Err set when it failed); start is
// when the batch's claim began.
func (o *observers) claimed(ctx context.Context, d *delivery, c *claim, start time.Time) {
	for _, x := range o.onClaim {
		x.observeClaim(ctx, d, c, start)
	}
}

// started: j's handler is about to run.
func (o *observers) started(ctx context.Context, j *Job) {
	for _, x := range o.onStart {
		x.observeStart(ctx, j)
	}
}

// heartbeated: j's heartbeat details were stored.
func (o *observers) heartbeated(ctx context.Context, j *Job, details []byte) {
	for _, x := range o.onHeartbeat {
		x.observeHeartbeat(ctx, j, details)
	}
}

// lostLease: j's lease was lost (cause matches ErrLeaseLost); its saga steps
// are compensated next.
func (o *observers) lostLease(ctx context.Context, d *delivery, j *Job, cause error) {
	for _, x := range o.onLeaseLost {
		x.observeLeaseLost(ctx, d, j, cause)
	}
}

// compensated: the saga steps of j's attempt were compensated (err nil) or
// their compensation failed.
func (o *observers) compensated(ctx context.Context, j *Job, err error) {
	for _, x := range o.onCompensated {
		x.observeCompensated(ctx, j, err)
	}
}

// ended: the attempt at d ended as e says; the record is finished, parked or
// dropped next.
func (o *observers) ended(ctx context.Context, d *delivery, e attemptEnd) {
	for _, x := range o.onEnd {
		x.observeEnd(ctx, d, e)
	}
}

// parked: the record of info waits delay before its next claim; err is why
// (nil for a key held by another worker).
func (o *observers) parked(ctx context.Context, info ClaimInfo, delay time.Duration, err error) {
	for _, x := range o.onPark {
		x.observePark(ctx, info, delay, err)
	}
}

// deadLetterDecided: d is to be dead-lettered for reason. Observers may put
// what they track into the returned context (the tracer: d's span), which
// the dead-lettering runs under.
func (o *observers) deadLetterDecided(ctx context.Context, d *delivery, reason string, err error) context.Context {
	for _, x := range o.onDeadLetterDecided {
		ctx = x.observeDeadLetterDecided(ctx, d, reason, err)
	}
	return ctx
}

// deadLetterWritten: this worker wrote d's dead-letter copy and the broker
// acknowledged it (a copy found from an earlier delivery is not reported).
func (o *observers) deadLetterWritten(ctx context.Context, d *delivery, dl deadLettered) {
	for _, x := range o.onDeadLettered {
		x.observeDeadLettered(ctx, d, dl)
	}
}

// paused: fetching paused because Redis cannot be reached.
func (o *observers) paused(cause error) {
	for _, x := range o.onPause {
		x.observePause(cause)
	}
}

// resumed: fetching resumed after paused.
func (o *observers) resumed(paused time.Duration) {
	for _, x := range o.onResume {
		x.observeResume(paused)
	}
}

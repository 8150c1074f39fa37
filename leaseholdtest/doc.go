// Package leaseholdtest unit-tests leasehold job handlers without Redis or
// Kafka, as Temporal's testsuite does for activities.
//
// An [Env] describes one job (key, payload, fence, attempt, the previous
// attempt's heartbeat details) and runs a handler on it ([Env.Run]). The
// [Attempt] it returns holds the handler's result and error (a result over
// the store's bound, [WithMaxResult], fails as the worker's commit refuses
// it), how a worker would settle it ([Attempt.Outcome]: completed, retried,
// failed for good, lease lost), the heartbeats the handler recorded and the saga steps it ran.
// [Attempt.Compensate] runs the steps' registered undo handlers in reverse
// order, as a worker does when an attempt loses its lease or fails. The next
// [Env.Run] is the next attempt: one more attempt, a higher fence, and the
// last heartbeat recorded so far as its [leasehold.Job.LastHeartbeat], so a
// handler's resume from its checkpoint is tested the way it runs.
//
//	env := leaseholdtest.New(leaseholdtest.WithKey("order-42"), leaseholdtest.WithCompensation(reg))
//	a := env.Run(ctx, handler)
//	if a.Outcome() != leaseholdtest.Completed { ... }
//
// [Env.OnHeartbeat] sees every heartbeat as it is recorded, and
// [Env.LoseLease] takes the lease away from the running attempt: its context
// is cancelled with a cause matching leasehold.ErrLeaseLost and its next
// heartbeat and step are refused, as under a worker.
//
// What is not modelled: heartbeat throttling (every call is recorded),
// leases and their renewals, the idempotency record (a duplicate is not
// replayed), Kafka, the worker's retry policy per job type (WithRetryClassifier,
// WithMaxAttempts) and the compensation runner's retries and dead letters.
// Whole-worker tests run a real Worker against Redis and an in-process Kafka
// (franz-go's kfake): see docs/testing.md.
package leaseholdtest

// Package compensation runs sagas that survive lost leases and crashes.
//
// A job's side effects that no database rollback can take back (a card
// charged, an email sent) are run as steps of a [Journal]:
//
//	refund := compensation.MustRegister(reg, "pay.refund", func(ctx context.Context, a RefundArgs) error { ... })
//	j := runner.Journal(l) // l: the job's *lease.Lease
//	err := compensation.StepWith(ctx, j, "charge", func(ctx context.Context) error {
//		return pay.Charge(ctx, chargeID, account, amount)
//	}, refund, RefundArgs{ChargeID: chargeID})
//
// The intent (handler name and JSON-encoded arguments, never a closure) is
// journaled in Redis before the effect runs, by a script fenced by the job's
// lease, and the step is marked done after. The journal lives beside the
// job's lease key, in the same Redis Cluster slot (it takes the lease name's
// hash tag), keyed by (lease name, fence).
//
// Compensation handlers are registered by name in a [Registry] in every
// process ([RegisterUndo], [MustRegister]), so that any process can
// compensate any journal. Registering returns a typed handle, an [Undo], that
// steps take with arguments of the handler's type ([StepWith]), checked at
// compile time. Any process compensates:
//
//   - the job's own triggers: its lease was lost, its fenced commit was
//     rejected, it failed terminally ([Journal.Compensate]);
//   - takeover: a new owner compensates the journals of older fences before
//     running the job again ([Runner.CompensatePrevious]);
//   - recovery: a sweep finishes journals whose compensating process died and
//     compensates open journals whose owner's lease has expired
//     ([Runner.Sweep], periodic after [Runner.Start]);
//   - an operator's retry of a dead-lettered journal ([Runner.List],
//     [Runner.Retry]).
//
// Steps are undone in reverse order, each at most once per (key, fence,
// step) even when a zombie and a new owner race: a journal is compensated
// under its own lease, and each step's claim and outcome are Lua scripts
// fenced by that lease. Handlers run on a context detached from the job's
// (which is usually cancelled by then), bounded by a per-attempt timeout, and
// are retried with exponential backoff; after the configured attempts the
// journal is dead-lettered and waits for [Runner.Retry].
//
// # What handlers must accept
//
// A step whose intent is journaled but not marked done is in doubt: the
// process may have died before, during or after the effect. In-doubt steps
// are compensated too ([StepInfo.InDoubt] tells), so a handler must treat
// "nothing to undo" as success. A process that dies in the middle of a
// handler leaves the step claimed; the sweep runs it again, so a handler
// must be idempotent: pass [StepInfo.IdempotencyKey] to the system it calls.
//
// A zombie's effect can also land after the new owner compensated the step
// as in doubt: the late "done" reopens the step under a new generation (a new
// idempotency key), [Journal.Step] returns [ErrLateEffect], and the step is
// compensated again. An effect that lands after its process's last write to
// Redis cannot be seen by anyone; fence such effects downstream (package
// fence) where the system allows it.
//
// # Committing
//
// Before its fenced commit the job calls [Journal.Seal], after it
// [Journal.Close]. The sweep never compensates a sealed journal on its own
// (the commit may have landed); a takeover, which proves it did not, does,
// and so does the sweep when [WithCommitted] tells it the commit is missing.
package compensation

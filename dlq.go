package leasehold

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/deadletter"
	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/lease"
)

// Record headers leasehold reads and writes.
const (
	// HeaderKey carries the idempotency key.
	HeaderKey = deadletter.HeaderKey
	// HeaderType carries the job type.
	HeaderType = deadletter.HeaderType

	// HeaderDLQReason names why a record was dead-lettered (a Reason* value).
	HeaderDLQReason = deadletter.HeaderReason
	// HeaderDLQError carries the error text, truncated to 1 KiB.
	HeaderDLQError = deadletter.HeaderError
	// HeaderDLQTopic, HeaderDLQPartition and HeaderDLQOffset locate the
	// original record.
	HeaderDLQTopic     = deadletter.HeaderTopic
	HeaderDLQPartition = deadletter.HeaderPartition
	HeaderDLQOffset    = deadletter.HeaderOffset
	// HeaderDLQCluster and HeaderDLQTopicID carry the original's cluster ID
	// and topic ID (base64 URL without padding, as Kafka's tools print it):
	// with them the coordinates name one record across a cluster replaced
	// or a topic created again.
	HeaderDLQCluster = deadletter.HeaderCluster
	HeaderDLQTopicID = deadletter.HeaderTopicID
	// HeaderDLQTruncated marks a stand-in copy: the dead-letter topic refused
	// the whole copy as too large, so the stand-in carries no value and the
	// original's headers cut short; its value says why and how large the
	// original was.
	HeaderDLQTruncated = deadletter.HeaderTruncated
)

// Dead-letter reasons (values of the HeaderDLQReason header).
const (
	ReasonMissingKey       = deadletter.ReasonMissingKey
	ReasonInvalidKey       = deadletter.ReasonInvalidKey
	ReasonInvalidType      = deadletter.ReasonInvalidType
	ReasonUnknownType      = deadletter.ReasonUnknownType
	ReasonPayloadTooLarge  = deadletter.ReasonPayloadTooLarge
	ReasonMismatch         = deadletter.ReasonMismatch
	ReasonUndecodable      = deadletter.ReasonUndecodable
	ReasonPermanent        = deadletter.ReasonPermanent
	ReasonAttemptsExceeded = deadletter.ReasonAttemptsExceeded
	ReasonCorruptRecord    = deadletter.ReasonCorruptRecord
	// ReasonResultTooLarge is the reason of a job whose result exceeded the
	// store's bound ([ErrResultTooLarge]).
	ReasonResultTooLarge = deadletter.ReasonResultTooLarge
	// ReasonDeliveryLimit is the reason of a share-mode record that its
	// worker held without an outcome (parked, not yet dispatched, or its
	// job still running past the drain) at its last delivery (the group's
	// share.delivery.count.limit) when it stopped: closing the client would
	// release it and the broker archive it ([WithShareGroup]).
	ReasonDeliveryLimit = deadletter.ReasonDeliveryLimit
)

// defaultBroker is the worker's seed broker unless WithKafka sets one.
const defaultBroker = "127.0.0.1:9092"

// newDeadLetterWriter builds the worker's dead-letter writer over its Kafka
// client cl and the lease manager leases, which takes the per-record locks.
func (w *Worker) newDeadLetterWriter(cl *kgo.Client, leases *lease.Manager) (*deadletter.Writer, error) {
	return deadletter.New(deadletter.Config{
		Topic:     w.cfg.dlqTopic,
		Client:    cl,
		ConnOpts:  w.connOpts(),
		Redis:     w.rdb,
		Locks:     leasing.Fencer{Manager: leases},
		Origins:   &w.origins,
		KeyPrefix: w.cfg.keyPrefix,
		Retention: w.cfg.retention,
		Logger:    w.log,
		HeldMin:   w.cfg.heldMin,
		HeldMax:   w.cfg.heldMax,
		RetryMin:  w.cfg.probeMin,
		RetryMax:  w.cfg.probeMax,
	})
}

// deadLetterWriter writes a record's dead-letter copy exactly once: a
// *deadletter.Writer, or a fake in tests.
type deadLetterWriter interface {
	Write(ctx context.Context, orig *kgo.Record, reason string, cause error) (deadletter.Result, error)
}

// deadLetter writes d's copy to the dead-letter topic once (see package
// deadletter), retrying until the copy exists or the worker stops, then
// marks d done. Only the worker whose produce was acknowledged counts (in
// Stats and leasehold.dead_lettered), logs and reports the dead letter; a
// copy found already written is not reported again.
func (w *Worker) deadLetter(d *delivery, reason string, cause error) {
	w.deadLetterThen(d, reason, cause, nil)
}

// deadLetterThen is deadLetter with then, if not nil, run once the copy
// exists (written now, or found from an earlier delivery) and before the
// record is finished; when then reports false the record is not finished
// (then has arranged what happens to it).
func (w *Worker) deadLetterThen(d *delivery, reason string, cause error, then func() bool) {
	w.deadLetterUntil(w.stopCtx, d, reason, cause, then)
}

// deadLetterUntil is deadLetterThen with its retries ending when until
// ends: the worker's stop, or for the records shutdown dead-letters in share
// mode (shareEndHeld) a bound of shutdown's own. In share mode the decision
// is kept on d, for shutdown to write the copy should the worker stop first.
func (w *Worker) deadLetterUntil(until context.Context, d *delivery, reason string, cause error, then func() bool) {
	w.shareDecided(d, reason, cause)
	// The trace, and a produce under way, outlive the worker's stop; the
	// retries do not.
	base := w.obs.deadLetterDecided(context.WithoutCancel(w.stopCtx), d, reason, cause)
	w.aux.Add(1)
	go func() {
		defer w.aux.Done()
		ctx, cancel := context.WithCancel(base)
		defer cancel()
		defer context.AfterFunc(until, cancel)() //nolint:contextcheck // retries end with until
		res, err := w.dlq.Write(ctx, d.rec, reason, cause)
		if err != nil {
			return // not finished: the record is consumed again by the next owner
		}
		if then != nil && !then() {
			return
		}
		if res != deadletter.AlreadyWritten {
			w.obs.deadLetterWritten(base, d, deadLettered{reason: reason, cause: cause,
				truncated: res == deadletter.WrittenTruncated, dlqTopic: w.cfg.dlqTopic})
		}
		w.finish(d)
	}()
}

// onAssignedRefresh forgets the assigned topics' origins (a topic created
// again is read anew), then runs onAssigned.
func (w *Worker) onAssignedRefresh(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	w.origins.Forget(assigned)
	w.onAssigned(ctx, cl, assigned)
}

package idempotency

import (
	"fmt"

	"github.com/leasehold/leasehold/outcome"
)

// Outcome is the answer to a claim. It is the module's one claim outcome:
// leasehold.Outcome is this type, and its constants are these.
type Outcome uint8

// Claim outcomes, in the order the worker counts them.
const (
	// Acquired: the key was free (never seen, released for retry, or its
	// record expired); the caller holds its lease and runs the job.
	Acquired Outcome = iota + 1
	// Takeover: the previous attempt's lease expired while it was PROCESSING
	// (its owner crashed or stalled). The caller holds a new lease with a
	// higher fence and must first compensate what PrevFence did.
	Takeover
	// Held: another owner's lease (or a keep hold) covers the key. Do not run
	// the job and do not acknowledge the message: retry later.
	Held
	// Duplicate: the key has an outcome (COMPLETED, or FAILED terminally);
	// replay it and acknowledge the message.
	Duplicate
	// Mismatch: the key has a record with another payload fingerprint: the key
	// was reused for a different request. The claim's Err is a *MismatchError.
	Mismatch
	// Undecodable: the payload could not be fingerprinted (the Store's
	// fingerprinter refused it), so the key was not claimed. The Store never
	// answers it; the worker uses it for such a record.
	Undecodable
)

// String returns the outcome's name ([Outcome.Name]), or "outcome(n)" for
// a value out of range.
func (o Outcome) String() string {
	if n := o.Name(); n != "" {
		return string(n)
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Name returns the outcome's name in leasehold's one outcome vocabulary
// (package outcome): outcome.Error for the zero Outcome of a claim that
// could not be made, "" for a value out of range.
func (o Outcome) Name() outcome.Name {
	if int(o) < len(claimNames) {
		return claimNames[o]
	}
	return ""
}

var claimNames = [...]outcome.Name{0: outcome.Error, Acquired: outcome.Acquired, Takeover: outcome.Takeover,
	Held: outcome.Held, Duplicate: outcome.Duplicate, Mismatch: outcome.Mismatch, Undecodable: outcome.Undecodable}

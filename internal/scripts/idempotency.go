package scripts

// Idempotency scripts, used by package idempotency. Every key a script touches
// carries the record's Cluster hash tag. Their status codes are the Idem*
// constants below.
var (
	// IdemClaim checks the record of each idempotency key it is given,
	// compares the payload fingerprint and, when the key may run, creates its
	// lease and writes the PROCESSING record (idem_claim.lua).
	IdemClaim = PlainWith("idem_claim.lua", "entry_prelude.lua")
	// IdemComplete writes a COMPLETED or FAILED record and deletes the lease,
	// for the lease holder only (idem_complete.lua). It checks the lease
	// itself (the prelude's check and status), so that a resend whose first
	// answer was lost finds its own record and answers written.
	IdemComplete = Plain("idem_complete.lua")
	// IdemCompleteBatch is IdemComplete for many attempts in one call, each
	// with its own fence check (idem_complete_batch.lua).
	IdemCompleteBatch = Plain("idem_complete_batch.lua")
	// IdemRelease ends an attempt without an outcome (retryable failure, or a
	// hold), keeping the attempt count, for the lease holder only
	// (idem_release.lua). Like IdemComplete it checks the lease itself and
	// answers released to a resend of its own release.
	IdemRelease = Plain("idem_release.lua")
	// IdemDetails saves an attempt's heartbeat details, for the lease holder
	// only (idem_details.lua).
	IdemDetails = Fenced("idem_details.lua")
	// IdemDetailsBatch is IdemDetails for many attempts in one call, each
	// with its own fence check (idem_details_batch.lua): coalesced details
	// flushed with the lease renewals.
	IdemDetailsBatch = Plain("idem_details_batch.lua")
)

// Status codes of IdemClaim (first element of each entry's reply).
const (
	// IdemAcquired: the key was free; the caller now holds its lease.
	IdemAcquired = 1
	// IdemTakeover: the previous attempt's lease expired while it was
	// PROCESSING; the caller now holds a new lease with a higher fence.
	IdemTakeover = 2
	// IdemHeld: a live lease (or a hold) keeps the key; the caller must not run it.
	IdemHeld = 3
	// IdemDuplicate: the key has a COMPLETED or FAILED record with the same fingerprint.
	IdemDuplicate = 4
	// IdemMismatch: the key has a record with another payload fingerprint.
	IdemMismatch = 5
	// IdemSkew: the windows passed by the caller do not cover Redis time; the
	// caller re-reads the server time and retries.
	IdemSkew = 6
	// IdemCorrupt: the key's stored record is shorter than its 18-byte
	// header, or has an unknown state or flag or a fence above 2^53;
	// nothing was written.
	IdemCorrupt = 7
	// IdemClaimFull: the entry of a short call (the keys that the claim of a
	// new or a finished key needs) found a record that needs the other keys
	// (a retry or a takeover would run); nothing was written: claim it again
	// in a full call.
	IdemClaimFull = 8
)

// Status codes of IdemComplete, IdemCompleteBatch (per entry), IdemRelease,
// IdemDetails and IdemDetailsBatch (per entry).
const (
	// IdemOK: the record was written.
	IdemOK = 1
	// IdemWindowSkew: the windows passed by the caller do not cover Redis
	// time (IdemComplete, IdemCompleteBatch and IdemRelease); nothing was
	// written.
	IdemWindowSkew = -2
	// IdemOtherOutcome: the record already holds an outcome of the caller's
	// fence other than the one asked for (IdemComplete and
	// IdemCompleteBatch): an earlier send wrote it; nothing was written.
	IdemOtherOutcome = -3
	// IdemCompleteFull: the entry of a short IdemCompleteBatch call (two
	// keys) needs the full keys (its lease is not held, the window moved on,
	// or it has another key to write); nothing was written: send it again in
	// a full call.
	IdemCompleteFull = -4
)

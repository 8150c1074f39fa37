package scripts

// IdemReset forgets the record of one idempotency key for an operator's
// reset, refused while a lease is live unless forced, and while Redis time is
// not past the key's fence (idem_reset.lua). Used by package idempotency.
var IdemReset = PlainWith("idem_reset.lua", "entry_prelude.lua")

// Status codes of IdemReset (first element of its reply).
const (
	// IdemResetDone: the record, details and external result are gone (and
	// the lease, when forced).
	IdemResetDone = 1
	// IdemResetHeld: a lease on the key is live and the reset was not
	// forced; nothing was written.
	IdemResetHeld = 2
	// IdemResetClock: Redis time is not past the key's fence, so a claim
	// after the reset could get a lower fence; nothing was written.
	IdemResetClock = 3
)

package scripts

// Redlock scripts, used by package lease/redlock on each independent master.
// Their status codes are the Redlock* constants below.
var (
	// RedlockAcquire is one master's SET NX of a Redlock acquisition, refused
	// while the master is quarantined after losing its data
	// (redlock_acquire.lua).
	RedlockAcquire = Plain("redlock_acquire.lua")
	// RedlockEpoch reads or starts a master's epoch, the age of its data
	// (redlock_epoch.lua).
	RedlockEpoch = Plain("redlock_epoch.lua")
	// RedlockFenceNext proposes and stores the next fence of a name on one
	// master (redlock_fence_next.lua).
	RedlockFenceNext = Plain("redlock_fence_next.lua")
	// RedlockFenceRaise writes the chosen fence back to one master
	// (redlock_fence_raise.lua).
	RedlockFenceRaise = Plain("redlock_fence_raise.lua")
)

// Status codes of RedlockAcquire.
const (
	// RedlockTaken: another token holds the lock on this master.
	RedlockTaken = 0
	// RedlockLocked: this master now holds the lock for the caller's token.
	RedlockLocked = 1
	// RedlockQuarantined: the master lost its data less than the quarantine
	// ago and takes no locks yet; the reply's second element is the time left
	// in milliseconds.
	RedlockQuarantined = -2
)

package scripts

// LeaseCancel stores an operator's request to cancel the attempt holding a
// lease, for one fence (lease_cancel.lua); the holder's next renewal answers
// [LeaseCancelled].
var LeaseCancel = Plain("lease_cancel.lua")

// Status codes of LeaseCancel, and the renew status of a cancelled attempt.
const (
	// LeaseCancelStored: the request is stored for the fence asked.
	LeaseCancelStored = 1
	// LeaseCancelled: LeaseRenew renewed the lease, and an operator asked
	// to cancel its attempt.
	LeaseCancelled = 3
)

package scripts

// Fleet-wide limits of a limit group (internal/limit): running slots, a
// rate and a hold-until, all keys of one group in one Cluster slot.
var (
	// LimitAcquire takes a running slot of a group after checking its hold
	// and its rate (limit_acquire.lua).
	LimitAcquire = Plain("limit_acquire.lua")
	// LimitRenew moves the deadlines of the slots one worker holds in a
	// group (limit_renew.lua).
	LimitRenew = Plain("limit_renew.lua")
	// LimitHold holds a group until a time (limit_hold.lua).
	LimitHold = Plain("limit_hold.lua")
	// LimitPrune removes from the registry of groups those no worker
	// registered since a cutoff (limit_prune.lua).
	LimitPrune = Plain("limit_prune.lua")
)

// Status codes of LimitAcquire (the first element of its answer).
const (
	// LimitAcquired: the slot is taken.
	LimitAcquired = 1
	// LimitFull: the group runs as many jobs as its limit allows.
	LimitFull = 2
	// LimitHeld: the group is held until a time (a Retry-After).
	LimitHeld = 3
	// LimitRated: the group's rate allows no job yet.
	LimitRated = 4
)

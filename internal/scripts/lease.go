package scripts

// Lease scripts, used by package lease's Redis backend. Their status codes are
// the Lease* constants below.
var (
	// LeaseAcquire takes a free lease and computes its fence (lease_acquire.lua).
	LeaseAcquire = Plain("lease_acquire.lua")
	// LeaseRenew extends leases still held by the caller, one or many in one
	// call (lease_renew.lua).
	LeaseRenew = Plain("lease_renew.lua")
	// LeaseRelease deletes a lease, only for its owner (lease_release.lua).
	LeaseRelease = Plain("lease_release.lua")
	// LeaseExpire ends a lease now, only while it holds the value read
	// (lease_expire.lua): LeaseOK expired, LeaseNoOwner changed or gone.
	LeaseExpire = Plain("lease_expire.lua")
)

// Status codes of the lease scripts.
const (
	// LeaseNoOwner: the lease key is gone (expired or released), or has no owner.
	LeaseNoOwner = 0
	// LeaseOK: the script did what was asked (acquired, renewed, released).
	LeaseOK = 1
	// LeaseOtherOwner: the lease is held with another token or fence.
	LeaseOtherOwner = 2
)

package jobtrace

import (
	"errors"

	"github.com/leasehold/leasehold/lease"
)

// leaseLostCause classifies why a lease was lost, with the same codes as the
// cause label of leasehold.lease.lost: "stolen" (another owner holds it),
// "expired" (it ran out in Redis), "renew_deadline" (renewals failed until the
// local deadline), "fenced" (a fenced write found it gone) or "other".
func leaseLostCause(err error) string {
	switch {
	case err == nil:
		return "other"
	case errors.Is(err, lease.ErrStolen):
		return "stolen"
	case errors.Is(err, lease.ErrExpired):
		return "expired"
	case errors.Is(err, lease.ErrRenewDeadline):
		return "renew_deadline"
	case errors.Is(err, lease.ErrLost):
		return "fenced"
	}
	return "other"
}

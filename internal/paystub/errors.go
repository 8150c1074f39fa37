package paystub

import (
	"errors"
	"fmt"
)

// ErrNoCharge is returned by [Client.Refund] when the provider has no charge
// with that id: the charge never happened, so there is nothing to refund.
var ErrNoCharge = errors.New("paystub: no such charge")

// ErrUnavailable is returned by [Client] calls when the provider answers 5xx
// or cannot be reached; the call may be retried.
var ErrUnavailable = errors.New("paystub: unavailable")

// StatusError is an unexpected HTTP answer from the provider.
type StatusError struct {
	Op     string
	Status int
}

// Error implements error.
func (e *StatusError) Error() string { return fmt.Sprintf("paystub: %s: HTTP %d", e.Op, e.Status) }

// Unwrap returns [ErrUnavailable] for 5xx answers and [ErrNoCharge] for a
// refund answered 404.
func (e *StatusError) Unwrap() error {
	switch {
	case e.Status >= 500:
		return ErrUnavailable
	case e.Op == "refund" && e.Status == 404:
		return ErrNoCharge
	}
	return nil
}

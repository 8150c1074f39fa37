package leasing

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Transient reports whether err, from a go-redis call, means that Redis could
// not be reached or could not take the command now: anything that is not a
// Redis error reply (network errors, timeouts, cancellations, a closed
// client), and the replies of a server that is out of memory, loading,
// failing over or busy.
func Transient(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) || errors.Is(err, redis.ErrClosed) {
		return true
	}
	for _, p := range []string{"OOM", "LOADING", "READONLY", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "BUSY", "MOVED", "ASK"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// Classify wraps a [Transient] error in [ErrUnavailable] and returns the rest
// (redis.Nil, script errors, other replies) as they are. It is the one place
// where errors of go-redis are read as an outage.
func Classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || !Transient(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

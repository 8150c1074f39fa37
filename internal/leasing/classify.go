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
// (redis.Nil, script errors, other replies) as they are, but for WRONGTYPE,
// whose likely causes it names. It is the one place where errors of go-redis
// are read as an outage.
func Classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	if !Transient(err) {
		if redis.HasErrorPrefix(err, "WRONGTYPE") {
			return fmt.Errorf("%w (%s)", err, wrongTypeHint)
		}
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// wrongTypeHint names the likely causes of a WRONGTYPE reply on leasehold's
// keys.
const wrongTypeHint = "a key under leasehold's prefix holds another type: another program's key, " +
	"or a lease key of a leasehold from before lease keys became strings, whose workers are stopped, " +
	"not rolled: see docs/operations.md, Upgrades"

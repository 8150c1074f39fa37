package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold/lease"
)

var (
	// ErrNoQuorum means fewer than a quorum (N/2+1) of the masters did what
	// was asked: they were unreachable, timed out, or were quarantined. It
	// comes inside a [*QuorumError], which also matches
	// [lease.ErrUnavailable], so the lease Manager treats it as transient:
	// acquisitions fail with it, and held leases keep retrying their renewals
	// until their local deadline.
	ErrNoQuorum = errors.New("redlock: no quorum of masters")

	// ErrQuarantined is a master's answer while it is in its restart
	// quarantine: it was found without its data (restarted empty, flushed,
	// or new) less than the quarantine ago, so it takes no locks yet (see
	// [WithRestartQuarantine]). It reaches callers inside a [*QuorumError].
	ErrQuarantined = errors.New("redlock: master quarantined after losing its data")

	// ErrFencedUnsupported is returned by Backend.Fenced: a fenced script
	// needs the lease and the data it guards in one store, which independent
	// masters are not. Keep idempotency records and journals on the Redis or
	// Cluster backend; fence downstream writes with the lease's fence.
	ErrFencedUnsupported = errors.New("redlock: fenced scripts need a single store (use the Redis or Cluster backend)")

	// ErrInvalid reports a bad configuration: no masters, an even number of
	// masters, or a bad option value.
	ErrInvalid = errors.New("redlock: invalid configuration")
)

// QuorumError reports an operation that did not reach a quorum of masters.
// It matches [ErrNoQuorum] and [lease.ErrUnavailable] with errors.Is, and
// unwraps to the masters' own errors.
type QuorumError struct {
	// Op is the operation: "acquire", "fence", "renew", "release", "check".
	Op string
	// OK is the number of masters that succeeded; Need the quorum; Of the
	// number of masters.
	OK, Need, Of int
	// Err joins the failing masters' errors.
	Err error
}

// Error names the counts and each failing master's cause.
func (e *QuorumError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redlock: %s: %d of %d masters succeeded, need %d", e.Op, e.OK, e.Of, e.Need)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.ReplaceAll(e.Err.Error(), "\n", "; "))
	}
	return b.String()
}

// Unwrap returns [ErrNoQuorum], [lease.ErrUnavailable] and the masters'
// errors.
func (e *QuorumError) Unwrap() []error {
	return []error{ErrNoQuorum, lease.ErrUnavailable, e.Err}
}

// MasterError is one master's failure.
type MasterError struct {
	// Master is the index of the master in the list given to [New].
	Master int
	// Addr is its address, when known.
	Addr string
	// Err is the cause.
	Err error
}

// Error names the master and the cause.
func (e *MasterError) Error() string {
	return fmt.Sprintf("master %d (%s): %v", e.Master, e.Addr, e.Err)
}

// Unwrap returns the cause.
func (e *MasterError) Unwrap() error { return e.Err }

// quarantineError is ErrQuarantined with the time left.
type quarantineError struct{ left time.Duration }

func (e *quarantineError) Error() string {
	return fmt.Sprintf("%v for %s more", ErrQuarantined, e.left)
}

func (e *quarantineError) Unwrap() error { return ErrQuarantined }

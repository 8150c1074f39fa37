package chaos

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNotRunning is returned when a signal is sent to a process that is
	// not running.
	ErrNotRunning = errors.New("chaos: process not running")

	// ErrAlreadyRunning is returned by Start on a process that is running.
	ErrAlreadyRunning = errors.New("chaos: process already running")

	// ErrNotReady is returned when a child process does not become ready
	// (for example, does not accept connections) in time.
	ErrNotReady = errors.New("chaos: process not ready")

	// ErrInvariant is wrapped by the error a run returns when a figure that
	// must be zero is not.
	ErrInvariant = errors.New("chaos: invariant violated")

	// ErrConfig is wrapped by errors about invalid harness settings.
	ErrConfig = errors.New("chaos: invalid configuration")

	// errIncomplete means a buffer holds only the beginning of a RESP
	// value: the rest is still on its way.
	errIncomplete = errors.New("chaos: incomplete RESP value")

	// errBadRESP means bytes seen on a Redis link are not RESP.
	errBadRESP = errors.New("chaos: malformed RESP")
)

// InvariantError lists the must-be-zero figures that were not zero.
type InvariantError struct {
	// Violations holds `name=value` for each offending figure.
	Violations []string
}

func (e *InvariantError) Error() string {
	return fmt.Sprintf("chaos: invariant violated: %s", strings.Join(e.Violations, ", "))
}

// Unwrap returns ErrInvariant.
func (e *InvariantError) Unwrap() error { return ErrInvariant }

package deadletter

import "errors"

// ErrConfig is returned by [New] when a required dependency is missing.
var ErrConfig = errors.New("deadletter: incomplete config")

// errStampStatus is a stamp script answer that is no known status: a
// script and code out of step.
var errStampStatus = errors.New("unknown stamp status")

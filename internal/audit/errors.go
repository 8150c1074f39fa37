package audit

import "errors"

// ErrConfig reports a Config that misses what it requires.
var ErrConfig = errors.New("audit: incomplete config")

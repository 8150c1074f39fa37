package fleet

import "errors"

// ErrConfig reports a publisher Config without what it requires.
var ErrConfig = errors.New("fleet: incomplete config")

package inspect

import "errors"

// ErrNoLease is returned by [Inspector.Expire] when no lease is held on the
// key.
var ErrNoLease = errors.New("inspect: no lease is held on the key")

// ErrLeaseChanged is returned by [Inspector.Expire] when the key's lease is
// not the one the caller saw (another fence), or changed while it was being
// expired: read the key again before acting.
var ErrLeaseChanged = errors.New("inspect: the lease changed; read it again")

// ErrNoHandlers is returned by [Inspector.RetryCompensation] when the
// Inspector was built without the compensation handlers
// ([WithCompensations]): a journal's steps cannot be run without them.
var ErrNoHandlers = errors.New("inspect: no compensation handlers registered")

// ErrNothingToRetry is returned by [Inspector.RetryCompensation] when the key
// has no dead-lettered compensation.
var ErrNothingToRetry = errors.New("inspect: no dead-lettered compensation for the key")

// ErrClosed is returned by every method after [Inspector.Close].
var ErrClosed = errors.New("inspect: closed")

// ErrBadCursor is returned by [Inspector.Leases] for a cursor it did not
// return.
var ErrBadCursor = errors.New("inspect: bad cursor")

// ErrUnknownKey is returned by [Inspector.Cancel] for a key with no record:
// never claimed, or its record left the retention.
var ErrUnknownKey = errors.New("inspect: no record of the key (never run, or past its retention)")

// ErrFinished is returned by [Inspector.Cancel] for a key that already
// completed or failed terminally (or was cancelled): there is nothing to
// cancel; reset the key to run it again.
var ErrFinished = errors.New("inspect: the key has already finished")

// ErrNotRunning is returned by [Inspector.Cancel] for a key that has a
// record but no running attempt (it waits for a retry): cancel it while it
// runs.
var ErrNotRunning = errors.New("inspect: the key is not running now")

// ErrNoDeadLetters is returned by [Inspector.DeadLetters] when the
// Inspector was built without a dead-letter source ([WithDeadLetters]).
var ErrNoDeadLetters = errors.New("inspect: no dead-letter topic to read")

// ErrBadGroup is returned by [Inspector.Limits], [Inspector.HoldLimit] and
// [Inspector.ReleaseLimitHold] for a limit group name no worker uses: one
// without its kind ("type:" or "key:"), or empty.
var ErrBadGroup = errors.New("inspect: not a limit group name")

// ErrBadHold is returned by [Inspector.HoldLimit] for a hold that is not
// positive ([Inspector.ReleaseLimitHold] ends a hold).
var ErrBadHold = errors.New("inspect: a limit hold must be positive")

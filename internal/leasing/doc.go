// Package leasing implements package lease, whose public types are aliases
// of this package's, and holds what the lease, idempotency and compensation
// packages and the worker share below that public API: the one family of
// lease errors, the one reading of go-redis errors ([Classify]), and the
// plumbing that lets another package's script take, write under and end a
// lease ([Adopt], [Fenced], [NewToken], [Token], [EndsInScript],
// [BeginFinish], [Forget], [AbortFinish]). Being internal, it can change
// without breaking users of package lease.
//
// # Ending a lease in a script
//
// A holder that records its outcome with a fenced script can let that script
// delete the lease key in the same atomic step as its write, instead of
// calling [Lease.Release] afterwards (one more round trip and one more
// script per lease), when [EndsInScript] says that deleting the key
// ends the lease. The key is then gone before the holder hears the answer,
// and until the holder ends the Lease locally the Manager would take the
// missing key for a loss (a renewal answering [ErrExpired], or the local
// deadline passing) and report it for work that in fact committed. So:
//
//	if err := BeginFinish(l); err != nil {
//		return err // the lease has already ended
//	}
//	_, err := Fenced(ctx, m, l, script, keys, args...) // deletes KEYS[1] when it writes
//	switch {
//	case err == nil:
//		Forget(l) // ended in Redis: end it here too, without a call
//	case errors.Is(err, ErrLost):
//		AbortFinish(l, true) // the write was refused: a loss (Fenced already reported it)
//	default:
//		AbortFinish(l, false) // no answer: held and renewed again
//	}
//
// While a lease is finishing, a renewal that finds its key gone or taken is
// not reported, and the deadline watcher leaves it alone: the script checks
// ownership atomically, so when it succeeds the write was the holder's,
// however late the answer came. AbortFinish decides the loss. A script call
// that hangs delays a loss until it returns; bound it (the Redis client's
// timeouts do). A script whose answer was lost may have run: a caller that
// retries it must recognise its own write (the idempotency scripts do).
package leasing

// Package lease provides owner-tokened, fenced, heartbeated leases.
//
// A [Manager] hands out leases on names: [Manager.Acquire] takes a lease that
// nobody else holds (one Lua script), and returns a [Lease] with a token
// unique to this acquisition and a fence that is strictly greater than every
// fence handed out for that name before. One renewer goroutine per Manager
// renews every held lease each renew interval (default TTL/3) in pipelined
// batches, so 10,000 leases cost a handful of round trips.
//
// A Lease tells its holder at once when it is lost: [Lease.Done] closes,
// [Lease.Err] gives the cause, [Lease.Context] is cancelled with it, and
// [Lease.OnLost] callbacks run. A lease is lost when
//   - a renewal finds another owner on its key ([ErrStolen]) or no owner
//     ([ErrExpired]): at the next renewal, so within one renew interval;
//   - renewals keep failing (Redis down, slow, paused, partitioned) until the
//     local deadline: the send time of the last successful renewal, plus TTL,
//     minus a drift margin, on the local monotonic clock ([ErrRenewDeadline]).
//     Redis counts the TTL from when it received that renewal, which is
//     later, so the holder gives up before anyone else can acquire. A
//     deadline watcher, apart from the renewer, enforces it, so a call hung
//     on a dead server does not delay the loss;
//   - a fenced write is refused ([Manager.Fenced]).
//
// # Keys
//
// With the Redis backend ([NewManager]), lease name N is a hash at
// [Manager.Key](N) = prefix + "lease:{N}" (or prefix + "lease:N" when N already
// contains a {hash tag}) with fields tok (the owner token) and fen (the fence,
// decimal), expiring after the TTL (PEXPIRE). The scripts live in package lua.
// Scripts of other packages that write only while a lease is held are built
// with lua.Fenced and run by [Manager.Fenced], which puts the lease key first
// and the token and fence first in ARGV.
//
// # Ending a lease in a script
//
// A holder that records its outcome with a fenced script can let that script
// delete the lease key in the same atomic step as its write, instead of
// calling [Lease.Release] afterwards (one more round trip and one more
// script per lease), when [Manager.EndsInScript] says that deleting the key
// ends the lease. The key is then gone before the holder hears the answer,
// and until the holder ends the Lease locally the Manager would take the
// missing key for a loss (a renewal answering [ErrExpired], or the local
// deadline passing) and report it for work that in fact committed. So:
//
//	if err := l.BeginFinish(); err != nil {
//		return err // the lease has already ended
//	}
//	_, err := m.Fenced(ctx, l, script, keys, args...) // deletes KEYS[1] when it writes
//	switch {
//	case err == nil:
//		l.Forget() // ended in Redis: end it here too, without a call
//	case errors.Is(err, lease.ErrLost):
//		l.AbortFinish(true) // the write was refused: a loss (Fenced already reported it)
//	default:
//		l.AbortFinish(false) // no answer: held and renewed again
//	}
//
// While a lease is finishing, a renewal that finds its key gone or taken is
// not reported, and the deadline watcher leaves it alone: the script checks
// ownership atomically, so when it succeeds the write was the holder's,
// however late the answer came. AbortFinish decides the loss. A script call
// that hangs delays a loss until it returns; bound it (the Redis client's
// timeouts do). A script whose answer was lost may have run: a caller that
// retries it must recognise its own write (the idempotency scripts do).
//
// # Fences
//
// The acquire script sets fence = max(previous fence + 1, server TIME in
// microseconds), where the previous fence is the one still stored at the key,
// if any. This assumes:
//   - the Redis server clock does not go back (across restarts and failovers
//     too: replicas' clocks agree with their primary's to well under a
//     lease's TTL). Then a fence is never smaller than one handed out before,
//     even after the key was released, expired, or lost in a restart without
//     persistence, because by then server time has moved past it;
//   - two acquisitions of one name are at least a microsecond apart, which
//     holds because a second acquisition can only follow the first's release
//     or expiry, a network round trip later;
//   - fences stay below 2^53, exact in Lua's doubles: microseconds since 1970
//     reach it in the year 2255.
//
// # Backends
//
// [Backend] separates the store from the local machinery, so that a Redlock
// backend over independent masters (package lease/redlock) plugs in with
// [NewManagerWithBackend] and callers do not change.
//
// Time: [WithClock] injects the clock that local deadlines and renew timers
// use. Metrics (leasehold.lease.held, leasehold.lease.renew.duration,
// leasehold.lease.lost by cause, leasehold.lease.acquire by outcome) and spans
// (lease.acquire, lease.release, lease.fenced, lease.renew) go to the
// providers of [WithMeterProvider] and [WithTracerProvider].
package lease

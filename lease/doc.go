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
//   - a fenced write is refused (the idempotency and compensation packages
//     write their records with Lua scripts fenced by the lease).
//
// # Keys
//
// With the Redis backend ([NewManager]), lease name N is a string at
// [Manager.Key](N) = prefix + "lease:{N}" (or prefix + "lease:N" when N already
// contains a {hash tag}): "<token> <fence> <ttl ms>" (the owner token, the
// fence in decimal, the TTL the holder renews with), then " <fence>"
// once an operator asked that attempt to cancel; it expires after the TTL
// and exists only while held. It is taken with SET NX PX and renewed with
// GETEX PX. The scripts live in lua/.
// Scripts of the module's other packages that write only while a lease is
// held run behind the fence prelude (lua/fence_prelude.lua), which puts the lease key first in KEYS and
// the token and fence first in ARGV, and check both in the same atomic step.
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

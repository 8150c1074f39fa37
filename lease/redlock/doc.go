// Package redlock is a [lease.Backend] over N independent Redis masters (N
// odd, quorum N/2+1), built on go-redsync/redsync, for teams that want lock
// availability when any minority of masters is down. Plug it into a lease
// Manager; callers do not change:
//
//	b, err := redlock.NewFromAddrs([]string{"r1:6379", "r2:6379", "r3:6379"})
//	m, err := lease.NewManagerWithBackend(b, lease.WithTTL(15*time.Second))
//
// # How it maps onto redsync
//
// The lease token is the redsync value (redsync.WithGenValueFunc); Acquire is
// Mutex.TryLockContext, renewal is Mutex.ExtendContext, release is
// Mutex.UnlockContext, and every local deadline comes from Mutex.Until, which
// already subtracts the time the quorum took and redsync's drift (the
// Manager subtracts its own drift on top). The Manager's one renewer still
// renews every held lease each interval through RenewBatch: a batch's extends
// run concurrently and the backend's redsync pool adapter gathers their
// scripts into one pipeline per master, so a round over 10,000 leases costs a
// few round trips per master, not 10,000.
//
// # Restarts: the quarantine
//
// A master that restarts without its data has forgotten locks that are still
// live on other masters, and could complete a second owner's quorum. Redlock
// requires such a master to stay out for at least the longest TTL. The
// backend enforces this itself: each master carries an epoch key (the server
// time its data dates from); a master without one gets one and takes no locks
// until it is older than the quarantine ([WithRestartQuarantine], default the
// lock's TTL). New masters are quarantined too, as nothing tells them apart
// from wiped ones: a fresh deployment waits one TTL ([Backend.WaitReady]).
// Masters that persist every write (appendonly yes, appendfsync always) keep
// their epoch and are never quarantined.
//
// # Fences: what they guarantee, and where they are weaker
//
// redsync has no fencing token. This backend hands one out anyway, in two
// phases after the lock is taken: every master proposes max(its counter for
// the name + 1, its TIME in microseconds) and stores it; the fence is the
// largest of a quorum's proposals, written back to a quorum before it is
// returned; then an extend on a quorum confirms the lock was still held after
// the write-back. Any two quorums share a master, and the next owner can lock
// only after this owner's keys expire on a quorum, so under the assumptions
// below every fence is greater than every fence handed out before it for
// that name.
//
// The assumptions are Redlock's own, and that is where this fence is weaker
// than the single-node or Cluster backend, whose fence is computed in the
// same atomic script that takes the lock, on the one node that stores it:
//
//   - Timing. Mutual exclusion rests on bounded clock drift between clients
//     and masters, and on bounded process pauses and network delays: the
//     lock's validity is measured on the client's clock, its expiry on each
//     master's. Martin Kleppmann, "How to do distributed locking" (2016,
//     https://martin.kleppmann.com/2016/02/08/how-to-do-distributed-locking.html),
//     shows how a GC pause, a clock jump or a delayed packet breaks this, and
//     argues that a lock meant for correctness needs fencing tokens from a
//     linearisable store. Salvatore Sanfilippo, "Is Redlock safe?" (2016,
//     http://antirez.com/news/101), answers that the algorithm is safe with
//     bounded drift (monotonic clocks, no step changes) and that the validity
//     re-check after acquisition covers pauses before it. Both agree that a
//     holder paused past its deadline must be stopped downstream, which is
//     what the fence is for.
//   - The fence is not atomic with the lock. If those assumptions fail and
//     two clients believe they hold the lock, their fences still differ and
//     a downstream guard (package fence) accepts only the newest: fences order
//     writers, they cannot make Redlock itself safe. The single-node backend
//     does not depend on the timing assumption for its fenced Redis writes,
//     because the check and the write are one script on the node that holds
//     the lease; here, fenced scripts are not offered at all
//     ([ErrFencedUnsupported]): keep idempotency records on a single Redis or
//     a Cluster.
//   - Data loss. The write-back makes the fence survive the loss of any
//     minority of masters' data. When a master of the intersecting quorum has
//     lost its data, the fence rests on its TIME component instead: it still
//     grows if that master's clock is not behind the others' by more than the
//     time elapsed since the previous fence (the restart quarantine alone
//     makes that at least a TTL). The single-node backend assumes only that
//     one server's clock does not go back; this one assumes the masters'
//     clocks agree to within the quarantine.
//   - Fence counters expire after [WithFenceRetention] of disuse; after that
//     the fence carries on from server time alone.
package redlock

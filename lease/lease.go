package lease

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/leasing"
)

// The types of the package are those of its implementation (an internal
// package that the idempotency and compensation packages also build on), so
// a *Manager or *Lease made here is the one they take.

// Manager hands out leases and keeps them alive: one renewer goroutine renews
// every held lease each renew interval in batches, and each lease carries a
// local deadline that ends it when renewals keep failing, whether or not the
// backend ever answers.
//
// Lifecycle: [NewManager], Start, then Acquire from any goroutine, then
// Shutdown. Its methods:
//   - Start(ctx) error: checks the backend (for Redis: it answers, and its
//     maxmemory-policy does not evict keys) and starts the renewer;
//   - Acquire(ctx, name) (*Lease, error): takes a lease nobody holds, or
//     answers a [*HeldError];
//   - Shutdown(ctx) error: stops the renewer and releases the held leases
//     (unless [WithLeaveOnShutdown]); idempotent;
//   - Held() []*Lease: the leases held now;
//   - Key(name) string: the backend key of lease name;
//   - TTL(), RenewInterval() time.Duration and CheckTTL(ttl) error: its
//     configuration, and whether a TTL is long enough for it.
type Manager = leasing.Manager

// Lease is one acquisition of a named lease. It is safe for concurrent use.
// Once Done is closed the lease is over for good: a new Acquire makes a new
// Lease with a new token and a greater fence. Its methods:
//   - Name() string and TTL() time.Duration;
//   - Fence() uint64: the fencing token, strictly greater than the fence of
//     every earlier acquisition of the name; pass it to downstream writes
//     that must reject a zombie;
//   - Context() context.Context: cancelled with the cause when the lease ends;
//   - Done() <-chan struct{} and Err() error: closed when it ends, and why
//     ([ErrStolen], [ErrExpired], [ErrRenewDeadline], all errors.Is
//     [ErrLost]; or [ErrReleased], [ErrClosed]);
//   - Deadline() time.Time: the local deadline;
//   - OnLost(func(error)): a callback run once when it is lost;
//   - Release(ctx) error: gives it back, owner only.
type Lease = leasing.Lease

// Backend stores leases for a [Manager]: the Redis Lua backend of
// [NewManager], or the Redlock backend of package lease/redlock given to
// [NewManagerWithBackend]. The Manager owns everything local (tokens, the
// renewer and its batching, local deadlines, contexts, callbacks, metrics); a
// Backend only talks to the store. Error conventions, which the Manager
// relies on: an answer that the caller does not own the lease is [ErrStolen]
// or [ErrExpired], or wraps one; an acquisition refused because of a live
// owner is a [*HeldError]; anything else is transient and should wrap
// [ErrUnavailable]. Every method must honour ctx.
type Backend = leasing.Backend

// Checker is implemented by backends that can verify the store at
// Manager.Start, e.g. that Redis answers and does not evict keys.
type Checker = leasing.Checker

// Grant is one acquisition, as a [Backend] answers it: name, owner token,
// fence, TTL and the local time the acquiring call was sent.
type Grant = leasing.Grant

// Renewal is one lease to renew in a [Backend]'s RenewBatch.
type Renewal = leasing.Renewal

// RenewResult is a [Backend]'s answer to one [Renewal]: nil, or the lease's
// loss ([ErrStolen], [ErrExpired]), or a transient error; with the validity
// the backend grants, when shorter than the TTL.
type RenewResult = leasing.RenewResult

// Clock is the source of time for local deadlines and renew timers
// ([WithClock]). The default is the system clock, whose readings carry the
// monotonic clock, so that a wall clock step does not move a deadline.
type Clock = leasing.Clock

// Timer is the part of *time.Timer that the Manager uses.
type Timer = leasing.Timer

// SystemClock is the default [Clock]: the time package.
type SystemClock = leasing.SystemClock

// MaxNameLen bounds a lease name, in bytes.
const MaxNameLen = leasing.MaxNameLen

// NewManager returns a Manager whose leases live in Redis through client (a
// single node, a Sentinel failover client or a Cluster client). Call Start
// before Acquire.
func NewManager(client redis.UniversalClient, opts ...Opt) (*Manager, error) {
	return leasing.NewManager(client, opts...)
}

// NewManagerWithBackend returns a Manager over another [Backend], such as
// the Redlock backend of package lease/redlock. [WithPrefix] does not apply:
// the backend owns its keys.
func NewManagerWithBackend(b Backend, opts ...Opt) (*Manager, error) {
	return leasing.NewManagerWithBackend(b, opts...)
}

// NewRedisBackend returns the Redis Lua backend that [NewManager] uses, with
// its keys under prefix, for a Backend that wraps it.
func NewRedisBackend(c redis.UniversalClient, prefix string) Backend {
	return leasing.NewRedisBackend(c, prefix)
}

// KeyFor returns the Redis key of lease name under prefix: prefix +
// "lease:{name}", or prefix + "lease:name" when name already holds a {hash
// tag}.
func KeyFor(prefix, name string) string { return leasing.KeyFor(prefix, name) }

// CheckTTL reports whether a lease TTL is long enough for a Manager built
// with opts: longer than its renew interval plus its drift margin. The error
// wraps [ErrInvalid].
func CheckTTL(ttl time.Duration, opts ...Opt) error { return leasing.CheckTTL(ttl, opts...) }

// Holder is a lease as stored, read without holding it: owner token, fence
// and time left. The token is a capability: show a digest of it, never it.
type Holder = leasing.Holder

// PeekCmd is a read of one lease queued on a pipeline by [Peek].
type PeekCmd = leasing.PeekCmd

// Peek queues on p the read of the lease stored at key ([Manager.Key] or
// [KeyFor]); its Holder method answers once the pipeline ran. It is the one
// reader of the lease layout outside the scripts.
func Peek(ctx context.Context, p redis.Pipeliner, key string) *PeekCmd {
	return leasing.Peek(ctx, p, key)
}

// Watched reads the lease at key inside the WATCH transaction tx, so that
// what the transaction then does applies only to the lease read.
func Watched(ctx context.Context, tx *redis.Tx, key string) (Holder, bool, error) {
	return leasing.Watched(ctx, tx, key)
}

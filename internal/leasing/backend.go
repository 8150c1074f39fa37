package leasing

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Backend stores leases for a [Manager]. The Manager owns everything local
// (tokens, the renewer and its batching, local deadlines, Done channels,
// contexts, callbacks, metrics); a Backend only talks to the store. Two
// implement it: the Redis Lua backend of [NewManager] (one node or a Redis
// Cluster through redis.UniversalClient) and a Redlock backend over
// independent masters (package lease/redlock). Callers see the same Manager
// and Lease either way.
//
// Error conventions, which the Manager relies on:
//   - an answer that the caller does not own the lease is [ErrStolen] (another
//     token or fence) or [ErrExpired] (no owner), or wraps one of them;
//   - an acquisition refused because of a live owner is a [*HeldError];
//   - anything else (network errors, timeouts, transient server replies) is
//     treated as transient: it should wrap [ErrUnavailable]. The Manager keeps
//     retrying renewals until the lease's local deadline.
//
// Every method must honour ctx cancellation and deadlines: the renewer bounds
// each batch with a deadline.
type Backend interface {
	// Key returns the store key of lease name (for logs, and for fenced
	// scripts whose other keys must share its Cluster slot).
	Key(name string) string

	// Acquire takes lease name for token with the given TTL if nobody holds
	// it, and returns the Grant with its fence. Grant.TTL is the validity
	// the backend guarantees from the moment the request was sent (Redlock
	// returns less than ttl, after its drift); Grant.SentAt may be left zero
	// for the Manager to fill in.
	Acquire(ctx context.Context, name, token string, ttl time.Duration) (Grant, error)

	// RenewBatch extends every lease in rs by its TTL, in as few round trips
	// as the store allows (the Redis backend sends one pipeline; Redlock one
	// extend per master in parallel). The result has one entry per renewal,
	// in order.
	RenewBatch(ctx context.Context, rs []Renewal) []RenewResult

	// Release deletes a lease for its owner only. It returns nil when the
	// lease was released, [ErrStolen] or [ErrExpired] when the caller no
	// longer owned it (nothing is changed), or a transient error. Fence 0
	// (never handed out) matches any fence: the Manager uses it to clean up
	// after an Acquire whose answer was lost, knowing only the token, which
	// is unique to that acquisition.
	Release(ctx context.Context, name, token string, fence uint64) error

	// Fenced runs a script built with scripts.Fenced with KEYS = [Key(name),
	// keys...] and ARGV = [token, fence, args...], and returns its raw reply
	// (the Manager maps scripts.StatusLost). Transient failures wrap
	// [ErrUnavailable].
	Fenced(ctx context.Context, name, token string, fence uint64, s *redis.Script, keys []string, args []any) (any, error)
}

// Checker is implemented by backends that can verify the store at
// [Manager.Start], e.g. that Redis answers and does not evict keys.
type Checker interface {
	// Check returns an error when the store is unfit for leases.
	Check(ctx context.Context) error
}

// Grant is one acquisition of a lease: made by [Manager.Acquire], or by
// another package's script (the idempotency claim) and handed to
// [Adopt].
type Grant struct {
	// Name is the lease name (not the key).
	Name string
	// Token is the owner token of this acquisition ([NewToken]).
	Token string
	// Fence is the fencing token handed out with this acquisition.
	Fence uint64
	// TTL is the lease's TTL (its validity from SentAt).
	TTL time.Duration
	// SentAt is the local time, with its monotonic reading, at which the
	// acquiring request was sent. The local deadline counts from it.
	SentAt time.Time
}

// Renewal asks a backend to extend one held lease.
type Renewal struct {
	// Name is the lease name.
	Name string
	// Token is the owner token.
	Token string
	// Fence is the lease's fence.
	Fence uint64
	// TTL is the new time to live.
	TTL time.Duration
}

// RenewResult is the outcome of one [Renewal].
type RenewResult struct {
	// Err is nil when renewed; [ErrStolen] or [ErrExpired] (or an error
	// wrapping one) when the lease is lost; anything else is transient.
	Err error
	// Valid is the validity the backend guarantees from the time the batch
	// was sent; zero means the Renewal's TTL.
	Valid time.Duration
	// Cancelled is true when the lease was renewed and an operator asked
	// to cancel the attempt that holds it (see [Lease.OnCancel]).
	Cancelled bool
}

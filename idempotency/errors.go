package idempotency

import (
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/lease"
)

// ErrLeaseLost is returned by Complete, Fail and SaveDetails when the caller no
// longer holds the key's lease with its token and fence (it expired, or another
// owner took the key over) and no outcome of the caller's fence is stored:
// nothing of this attempt was written, nor will be. Complete and Fail with
// Terminal say how it was found: ErrRefused (Redis refused the write) or
// ErrGivenUp (the lease had ended locally; nothing was sent). It is
// lease.ErrLost (and leasehold.ErrLeaseLost): one error across the packages.
var ErrLeaseLost = lease.ErrLost

// ErrRefused is returned by Complete and Fail (Terminal) when Redis refused
// the write: the key's lease is not the caller's (another token or fence, or
// none) and the record holds no outcome of the caller's fence. Nothing was
// written. It matches ErrLeaseLost.
var ErrRefused = leasing.NewSentinel("idempotency: write refused by redis", ErrLeaseLost)

// ErrGivenUp is returned when the Store gave a lease up on its own, from the
// local clock. By Complete and Fail (Terminal): the lease had ended locally
// (its local deadline passed, or its Manager closed) before the write, so
// nothing was sent; Redis was asked and holds no outcome of the caller's
// fence (it matches ErrLeaseLost then). By Claim: Redis granted the key but
// the answer came after the lease's local deadline, so the Store gave the key
// back in the same call (or, when that failed, left it to expire in its
// TTL); the job must not run: claim again.
var ErrGivenUp = leasing.NewError("idempotency: lease given up locally", leasing.ClassRetry)

// ErrAlreadyCommitted is matched by a *CommittedError: Complete or Fail
// (Terminal) found the caller's fence's outcome already stored (an earlier
// send whose answer was lost), but not the one asked for now (another result,
// or another state). Nothing was written; the stored outcome stands. When the
// stored outcome is the one asked for, the answer is nil.
var ErrAlreadyCommitted = leasing.NewError("idempotency: another outcome is already committed under this fence", leasing.ClassTerminal)

// ErrOutcomeUnknown is returned by Complete and Fail (Terminal) when the write
// was sent but its answer did not come (a cut connection, a timeout, Redis
// going down), or when the lease ended locally after such a send and Redis
// cannot be asked: the outcome may or may not be stored. Send the same call
// again once Redis answers: it answers nil if the earlier send landed. It
// matches ErrUnavailable.
var ErrOutcomeUnknown = leasing.NewSentinel("idempotency: outcome unknown, the answer was lost", ErrUnavailable)

// ErrUnavailable is returned when Redis cannot be reached or cannot take the
// write (connection refused, timeout, OOM, LOADING, READONLY, CLUSTERDOWN).
// It is not a business outcome: the caller must not run the job nor
// acknowledge the message. It is lease.ErrUnavailable (and
// leasehold.ErrUnavailable): one error across the packages.
var ErrUnavailable = lease.ErrUnavailable

// ErrMismatch is matched by a *MismatchError: the key already has a record
// whose payload fingerprint differs from the claim's.
var ErrMismatch = leasing.NewError("idempotency: fingerprint mismatch", leasing.ClassTerminal)

// ErrInvalidKey is matched by a *KeyError: the idempotency key is empty, too
// long, not UTF-8, or contains control characters or white space. Nothing was
// written.
var ErrInvalidKey = leasing.NewError("idempotency: invalid key", leasing.ClassTerminal)

// ErrInvalidTTL is the Err of a claim whose Request.TTL is negative, or not
// longer than the lease Manager's renew interval plus its drift margin (the
// lease would run out between two renewals). Nothing was written.
// errors.Is(err, lease.ErrInvalid) also holds for a TTL that is too short.
var ErrInvalidTTL = leasing.NewError("idempotency: invalid lease TTL", leasing.ClassTerminal)

// ErrTooLarge is matched by a *TooLargeError: a result or heartbeat details
// exceed the configured bound. Nothing was written; results are never
// truncated.
var ErrTooLarge = leasing.NewError("idempotency: too large", leasing.ClassTerminal)

// ErrEvictionPolicy is matched by a *PolicyError: the server's
// maxmemory-policy may evict keys, so leases and records could vanish.
var ErrEvictionPolicy = leasing.NewError("idempotency: maxmemory-policy evicts keys", leasing.ClassTerminal)

// ErrPolicyUnknown is returned by New when maxmemory-policy cannot be read
// (CONFIG disabled or renamed, or not permitted) and no WithMaxmemoryPolicy
// option states it.
var ErrPolicyUnknown = leasing.NewError("idempotency: cannot read maxmemory-policy", leasing.ClassTerminal)

// ErrFailed is matched by a *FailedError: the key's stored outcome is a
// terminal failure, replayed by Claim as a Duplicate.
var ErrFailed = leasing.NewError("idempotency: failed terminally", leasing.ClassTerminal)

// ErrNotClaimed is returned when Complete, Fail or SaveDetails get a Claim
// that does not hold a lease (its outcome is not Acquired or Takeover), or
// that was already finished.
var ErrNotClaimed = leasing.NewError("idempotency: claim holds no lease", leasing.ClassTerminal)

// ErrLayoutChanged is matched by a *LayoutError: New was given a shard count
// (WithShards) other than the one records still live under. Their keys carry
// other hash tags, which a claim cannot read in the same script, so a key
// recorded under the old count would run again. Another retention or window
// count is not refused: claims also read the buckets of the layouts whose
// records still live.
var ErrLayoutChanged = leasing.NewError("idempotency: shard count changed", leasing.ClassTerminal)

// ErrCorrupt is returned when a stored record cannot be decoded.
var ErrCorrupt = leasing.NewError("idempotency: corrupt record", leasing.ClassTerminal)

// MismatchError reports a claim whose payload fingerprint differs from the
// one stored for the key. It matches ErrMismatch.
type MismatchError struct {
	Key    string      // the idempotency key
	Got    Fingerprint // the claim's fingerprint
	Record Record      // the stored record
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("idempotency: fingerprint mismatch for key %s: claim %x, stored %x (%s, fence %d)",
		quoteKey(e.Key), e.Got[:], e.Record.Fingerprint[:], e.Record.State, e.Record.Fence)
}

// Unwrap returns ErrMismatch.
func (e *MismatchError) Unwrap() error { return ErrMismatch }

// KeyError reports an idempotency key that fails validation. It matches
// ErrInvalidKey.
type KeyError struct {
	Key    string // the key, shortened for display
	Reason string // what is wrong with it
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("idempotency: invalid key %s: %s", quoteKey(e.Key), e.Reason)
}

// Unwrap returns ErrInvalidKey.
func (e *KeyError) Unwrap() error { return ErrInvalidKey }

// TooLargeError reports a value over its bound. It matches ErrTooLarge.
type TooLargeError struct {
	What  string // "result" or "details"
	Size  int    // bytes given
	Limit int    // bytes allowed
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("idempotency: %s of %d bytes exceeds the limit of %d bytes", e.What, e.Size, e.Limit)
}

// Unwrap returns ErrTooLarge.
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// PolicyError reports a maxmemory-policy that evicts keys. It matches
// ErrEvictionPolicy.
type PolicyError struct {
	Policy string // the server's maxmemory-policy
	Node   string // the server address, when known
}

func (e *PolicyError) Error() string {
	node := ""
	if e.Node != "" {
		node = " on " + e.Node
	}
	return fmt.Sprintf("idempotency: maxmemory-policy is %q%s: under memory pressure Redis would evict lease and "+
		"record keys, so a held job could be run twice and a completed one replayed; set maxmemory-policy "+
		"noeviction, or pass WithAllowEviction to accept the risk", e.Policy, node)
}

// Unwrap returns ErrEvictionPolicy.
func (e *PolicyError) Unwrap() error { return ErrEvictionPolicy }

// FailedError is the cached terminal failure of a key, replayed on every
// later claim. It matches ErrFailed.
type FailedError struct {
	Key     string    // the idempotency key
	Message string    // the error text recorded by Fail
	Fence   uint64    // the fence of the attempt that failed
	At      time.Time // when it failed (Redis time, second precision)
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("idempotency: key %s failed terminally (fence %d): %s", quoteKey(e.Key), e.Fence, e.Message)
}

// Unwrap returns ErrFailed.
func (e *FailedError) Unwrap() error { return ErrFailed }

// CommittedError reports an outcome already stored under the caller's fence
// that differs from the one asked for. It matches ErrAlreadyCommitted.
type CommittedError struct {
	Key    string // the idempotency key
	Record Record // the stored record: its State and Result are what stands
}

func (e *CommittedError) Error() string {
	return fmt.Sprintf("idempotency: key %s already has a %s outcome of %d bytes under fence %d, not the one "+
		"sent now; keep the stored outcome (Record) or claim the key again", quoteKey(e.Key), e.Record.State,
		len(e.Record.Result), e.Record.Fence)
}

// Unwrap returns ErrAlreadyCommitted.
func (e *CommittedError) Unwrap() error { return ErrAlreadyCommitted }

// quoteKey quotes a key for an error message, shortened to 64 bytes.
func quoteKey(k string) string {
	const max = 64
	if len(k) > max {
		return fmt.Sprintf("%q...(%d bytes)", k[:max], len(k))
	}
	return fmt.Sprintf("%q", k)
}

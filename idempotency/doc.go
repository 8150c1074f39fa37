// Package idempotency runs each job of an at-least-once stream once in
// effect: a record per idempotency key, claimed under an owner-tokened,
// fenced lease (package lease), completed with a fenced write, and replayed to
// every later duplicate.
//
// # States
//
//	absent ──claim──▶ PROCESSING (token, fence F, attempt n) + lease
//	PROCESSING, lease live          ──claim──▶ Held (do not run, do not ack)
//	PROCESSING, lease expired       ──claim──▶ Takeover: fence > F, PrevFence = F (compensate F first)
//	PROCESSING ──Complete(token, F)──▶ COMPLETED (result)          ErrLeaseLost if not the holder
//	PROCESSING ──Fail(Retryable)───▶ RELEASED (attempt kept) ──claim──▶ Acquired, attempt n+1
//	PROCESSING ──Fail(Keep)────────▶ RELEASED + hold ──claim──▶ Held until the hold ends
//	PROCESSING ──Fail(Terminal)────▶ FAILED (error text, cached like a result)
//	COMPLETED / FAILED ──claim──▶ Duplicate (replayed); another fingerprint ──▶ Mismatch
//	any record ──retention──▶ absent (the key runs again, with a higher fence)
//
// Every transition is one Lua script (lua/: idem_claim.lua,
// idem_complete.lua, idem_release.lua, idem_details.lua). The claim script
// reads the record, compares the payload fingerprint, checks the lease and
// creates it (in the lease package's key layout, fence = max(previous + 1,
// Redis TIME in µs)) in one step; the Store then hands the lease to its
// lease.Manager, whose batched renewer keeps it alive while the job runs. The other scripts are fenced: they write only while the caller's
// token and fence still own the lease. Store.Lookup reads a key's record,
// lease and heartbeat details without writing (one pipeline), for operators.
//
// # Layout
//
// One Redis key per record costs about 100 bytes of key overhead alone, so
// records are not keys. Each idempotency key K hashes (SHA-256) to a shard
// (bytes 16..19, modulo WithShards, default DefaultShards, 4096) and a
// 16-byte field name (bytes 0..15). Records live in buckets, one hash per
// (shard, time window):
//
//	<prefix>idem:b:{i:<shard>}:<window start ms>   field = 16-byte hash of K, value = packed record
//	                                               field "" = the bucket's mark: its expiry (Redis ms)
//
// A window is Retention/WithWindows long (default 24h/2). A record is written
// into the bucket of the current window (by Redis TIME, inside the script),
// and the bucket expires at the end of its window plus the retention, so a
// record is kept at least the retention and at most retention + one window.
// Every claim writes the bucket's mark with its record; the one that adds
// it sets the bucket's expiry, and the others send no PEXPIREAT.
// A claim looks up the current window and the WithWindows earlier ones. The
// record value is 18 bytes (state, 56-bit fence, 64-bit fingerprint,
// attempt), plus a 4-byte time and the result for an outcome: about 42 bytes
// per completed record inside a listpack-encoded hash. A result that would
// push a value past the server's hash-max-listpack-value goes to its own key
// (<prefix>idem:r:{i:<shard>}:K, same expiry), so buckets stay listpacks.
// A bucket stays a listpack while it holds at most hash-max-listpack-entries
// records: choose shards >= rate x window / hash-max-listpack-entries
// (Capacity reports it).
//
// Bucket names carry the window start, so changing the retention or the
// windows moves the buckets a Store writes. Every Store announces its layout
// (window, retention, shards) in <prefix>idem:layouts, and a claim also
// reads the live buckets of every other layout whose records may still live
// (their last announcement plus two windows plus their retention): a key
// finished under any retention is replayed for as long as its record lives,
// whatever the setting now, and a key released or left PROCESSING is moved
// into the current layout when it runs again. A Store whose layout is new to
// a running fleet waits about two seconds before its first claim, until the
// other Stores have read it. A new shard count cannot be consulted (other
// hash tags, other Cluster slots): New refuses it with a *LayoutError
// (ErrLayoutChanged) while records of the old one live; a Store started
// without WithShards takes the live records' count instead.
//
// Every key of K carries the tag {i:<shard>} ([Store.Tag]): the lease
// (Manager.Key("{i:<shard>}:K")), the heartbeat details
// (<prefix>idem:d:{i:<shard>}:K) and the other packages' keys for K (the
// compensation journal), so that one script touches one Cluster slot.
// The default 4096 shards use a quarter of the 16384 slots, spread evenly
// over a Cluster's masters (about 4096/N shards each of N).
//
// After Complete or Fail the Store ends the claim's lease in its Manager
// without running OnLost callbacks. With the Redis backend the script
// deletes the lease key in the same step as the record write and the Store
// then ends the Lease locally (no round trip); the Lease is marked finishing
// before the script is sent, so that a renewal finding the key already
// gone, or the local deadline passing before the answer, is not reported as
// a loss of a key that committed, while a refused write still ends the
// lease as lost. The finishing scripts answer a
// resend of their own write (an earlier answer lost) as written, since the
// lease key is gone by then. With other backends the script leaves the key
// and the Store releases it through the Manager (Lease.Release, one more
// round trip per key).
//
// # Assumptions
//
// The Redis server clock does not go back (fences and windows come from
// TIME). The Store's Manager is a lease.NewManager on the same Redis: the
// claim script writes the lease itself. Redis must not evict keys: New
// refuses an evicting maxmemory-policy unless WithAllowEviction.
//
// # Failures
//
// Redis unreachable (or refusing writes) is ErrUnavailable, never an outcome:
// do not run the job and do not acknowledge the message. A finish (Complete,
// Fail) answers what happened to its write: nil (stored, now or by an earlier
// send whose answer was lost), ErrAlreadyCommitted (another outcome of the
// same fence is stored), ErrRefused (Redis refused: not the lease holder),
// ErrGivenUp (the lease ended locally; nothing sent), ErrOutcomeUnknown (the
// answer was lost: send it again). ErrRefused and ErrGivenUp match
// ErrLeaseLost, ErrOutcomeUnknown matches ErrUnavailable. A claim answered
// after its lease's local deadline is ErrGivenUp: the key was given back. A
// shard count other than the live records' is ErrLayoutChanged. Keys, results and
// details are bounded ([WithMaxKeyLen], [WithMaxResult], [WithMaxDetails]);
// an oversized value is refused with nothing written, never truncated.
package idempotency

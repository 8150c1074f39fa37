package idempotency

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/slot"
	"github.com/leasehold/leasehold/lease"
)

// Request is one key to claim.
type Request struct {
	Key         string
	Fingerprint Fingerprint
	// TTL is the lease TTL for this key when the claim acquires it (job
	// types with long handlers may want a longer one, so that a stalled
	// owner is detected late but a slow renewal does not cost the lease;
	// short ones a shorter one, so that a crash is taken over sooner). It
	// must be longer than the Manager's renew interval plus its drift margin
	// (lease.Manager.CheckTTL); otherwise the claim's Err wraps
	// ErrInvalidTTL and nothing is written. Zero means the Manager's TTL.
	TTL time.Duration
	// Worker, TraceID and SpanID go into the start entry that a claim which
	// runs the job writes into the key's history (WithHistory): the
	// worker's identity, and the hex IDs of the attempt's trace and span
	// ("" for none). The entry's owner digest, attempt, fence and start
	// time are the claim's own.
	Worker, TraceID, SpanID string
	// Type is the job's type, kept in the same start entry (its first
	// [MaxHistoryType] bytes) so that a reader without the worker's
	// registrations can name it; "" for none.
	Type string
}

// Claim is the answer to one claim. Which fields are set depends on Outcome.
type Claim struct {
	Key     string
	Outcome Outcome // zero when Err says the claim could not be made
	// Err is nil for Acquired, Held, Duplicate and Takeover; a
	// *MismatchError for Mismatch; otherwise why the claim could not be made
	// (ErrUnavailable, a *KeyError, ...).
	Err error

	// Acquired and Takeover.
	Lease     *lease.Lease // the key's lease, renewed by the Manager until Complete or Fail
	Fence     uint64       // the new fence (Duplicate: the fence of the attempt that ended the key)
	Attempt   int          // this attempt's number, 1 for the first
	PrevFence uint64       // the previous attempt's fence (Takeover: the one to compensate), 0 if none
	Details   []byte       // heartbeat details saved by an earlier attempt, nil if none
	// Cancelled: an operator cancelled the previous attempt (PrevFence), which
	// ended before it recorded the cancel (its lease lost, or released for a
	// retry). The cancel covers this attempt: do not run the job; record it
	// failed as cancelled (Fail with Terminal) after compensating the
	// previous attempts. A claim after this one is covered too until the key
	// records an outcome.
	Cancelled bool

	// Held.
	Holder    string        // the holder's owner token ("" for a keep hold); a capability: keep it out of logs
	Remaining time.Duration // how long the holder's lease (or the hold) has left unless renewed

	// Duplicate and Mismatch.
	Record *Record // the stored record

	fp      Fingerprint
	ttl     time.Duration // the lease TTL asked for (Request.TTL or the Manager's)
	h       keyHash
	tag     string
	name    string    // the lease's name: tag + ":" + Key
	keys    claimKeys // built once, for the claim and every write after it
	buckets struct {
		base int64    // the first window of keys
		keys []string // bucket keys of the windows the claim named (Claim.bucketKeys)
	}
	args struct { // script arguments passed by reference (strArg)
		entry      string // the attempt's history entry (startEntry); sent back by the completion when the record carries it
		token      string // the owner token of the acquired lease
		completion string // the completion's packed fields (Store.completeEntry), until its call has run
	}
	window     int64 // window index of the PROCESSING record
	carries    bool  // the PROCESSING record carries args.entry (a first attempt: no previous fence)
	mu         sync.Mutex
	details    bool  // details may exist in Redis for this key
	saved      bool  // this attempt's details were written once: later ones are coalesced (details.go)
	detailsErr error // why this attempt's coalesced details were refused (ErrLeaseLost)
	finished   bool
	sent       bool // a finishing script was sent and its answer lost: it may have landed
}

// Claim claims key k for a payload with fingerprint fp: see Outcome for the
// answers. A Mismatch is returned with an error (*MismatchError) as well as
// its Claim; any other error means nothing is known (ErrUnavailable: Redis
// could not be reached; do not run the job). ctx also parents the lease's
// Context.
func (s *Store) Claim(ctx context.Context, k string, fp Fingerprint) (*Claim, error) {
	c := s.ClaimBatch(ctx, []Request{{Key: k, Fingerprint: fp}})[0]
	return c, c.Err
}

// claimKeys are the per-key Redis names of a claim, built once: its Redis
// keys, its record's field in a bucket, and (once acquired) the bucket of the
// claim's window, which holds its PROCESSING record; with them, the
// fingerprint's bytes and the lease TTL in ms, as the scripts take them.
type claimKeys struct{ lease, details, result, field, fp, ttl, bucket, history, cancel string }

// ClaimBatch claims many keys in one pipeline (one round trip per Redis
// node; go-redis groups a Cluster pipeline by node), as for a whole poll
// batch. It returns one Claim per request, in order; each carries its own Err.
// A key may appear once per batch (a repeat is answered like a concurrent
// claim: Held). ctx also parents the leases' Contexts.
func (s *Store) ClaimBatch(ctx context.Context, reqs []Request) []*Claim {
	out := make([]*Claim, len(reqs))
	todo := make([]int, 0, len(reqs))
	for i, r := range reqs {
		c := &Claim{Key: r.Key, fp: r.Fingerprint}
		out[i] = c
		if err := ValidateKey(r.Key, s.cfg.maxKey); err != nil {
			c.Err = err
			continue
		}
		ttl, err := s.leaseTTL(r.TTL)
		if err != nil {
			c.Err = fmt.Errorf("idempotency: claim %s: %w", quoteKey(r.Key), err)
			continue
		}
		c.ttl = ttl
		c.h = hashKey(r.Key)
		s.setClaimKeys(c)
		todo = append(todo, i)
	}
	var others []liveLayout
	if len(todo) > 0 {
		var err error
		if others, err = s.otherLayouts(ctx, true); err != nil {
			for _, i := range todo {
				out[i].Err = err
			}
			return out
		}
	}
	wide, full := false, false
	for try := 0; len(todo) > 0; {
		again, redo := s.claimPass(ctx, todo, reqs, out, others, wide, full)
		if len(again) > 0 {
			if err := s.recalibrate(ctx, try, "claim"); err != nil {
				for _, i := range again {
					out[i].Err = err
				}
				again = nil
			}
			try++
			wide = true
		}
		// A short call's entries that found a record go again in a full one.
		todo, full = append(again, redo...), full || len(redo) > 0
	}
	return out
}

// claimPass sends the claims of the entries todo (indexes into reqs and
// out), in short calls unless full, and fills their Claims. It returns the
// entries to send again: again after a skew answer (the windows must be
// read again), redo when a short call's entry needs the full keys.
func (s *Store) claimPass(ctx context.Context, todo []int, reqs []Request, out []*Claim, others []liveLayout,
	wide, full bool) (again, redo []int) {
	base, n := s.windowRange(s.cfg.windows, wide)
	olds := s.otherWindows(others)
	tokens := make([]string, len(out))
	sent := time.Now()
	calls := s.group(todo, func(i int) string { return out[i].tag })
	cmds, perr := s.pipeline(ctx, len(calls), func(p redis.Pipeliner, j int) *redis.Cmd {
		sc := s.claimCall(calls[j], reqs, out, tokens, base, n, olds, !full)
		return sc.process(ctx, p)
	})
	for j, call := range calls {
		replies, err := callReplies(cmds, perr, j)
		for e, i := range call {
			c := out[i]
			if err != nil {
				c.Err = fmt.Errorf("idempotency: claim: %w", classify(err))
				continue
			}
			var res any
			if e < len(replies) {
				res = replies[e]
			}
			switch r := res.(type) {
			case string: // the job runs: acquired or takeover
				s.parseRunning(ctx, c, r, tokens[i], sent)
			case []any:
				switch s.parseClaim(c, r) {
				case scripts.IdemSkew:
					again = append(again, i)
				case scripts.IdemClaimFull:
					if full { // a full call never answers so: do not loop
						c.Err = fmt.Errorf("%w: a full claim call answered %d", ErrCorrupt, scripts.IdemClaimFull)
						continue
					}
					redo = append(redo, i)
				}
			default:
				c.Err = fmt.Errorf("%w: claim reply without entry %d", ErrCorrupt, e)
			}
		}
	}
	return again, redo
}

// claimCall builds one idem_claim.lua call for the entries call (indexes
// into reqs and out), with a new owner token each in tokens (see scriptCall
// for the pointers). A short call passes the keys that the claim of a key
// without a record, or of a finished one, reads and writes (the lease, the
// external result and the buckets); a full call all of them.
func (s *Store) claimCall(call []int, reqs []Request, out []*Claim, tokens []string, base int64, n int,
	olds [][2]int64, short bool) scriptCall {
	per := 5 + n + len(olds)
	if short {
		per = 2 + n + len(olds)
	}
	sc := newScriptCall(scripts.IdemClaim, len(call)*per, 9+5*len(call))
	sc.addArgs(base, s.window.Milliseconds(), s.cfg.windows, s.cfg.retention.Milliseconds(), n, len(olds),
		s.historyMax(), s.historyTTL().Milliseconds(), flagArg(short))
	for e, i := range call {
		c, r := out[i], &reqs[i]
		tokens[i] = leasing.NewToken()
		c.args.entry = s.startEntry(tokens[i], r)
		if e == 0 {
			sc.addKey(c.keys.lease)
		} else {
			sc.addKey(arg(&c.keys.lease))
		}
		if !short {
			sc.addKey(arg(&c.keys.details))
		}
		sc.addKey(arg(&c.keys.result))
		for b := range c.bucketKeys(s, base, n) {
			sc.addKey(arg(&c.buckets.keys[b]))
		}
		for _, o := range olds {
			sc.addKey(s.otherBucketKey(c.tag, o[0], o[1]))
		}
		if !short {
			sc.addKey(arg(&c.keys.history))
			sc.addKey(arg(&c.keys.cancel))
		}
		sc.addArgs(arg(&c.keys.field), arg(&c.keys.fp), arg(&tokens[i]), arg(&c.keys.ttl), arg(&c.args.entry))
	}
	return sc
}

// leaseTTL returns the lease TTL of a Request.TTL: the Manager's for zero,
// else ttl cut to whole milliseconds (what Redis keeps), refused when the
// Manager would renew it too late.
func (s *Store) leaseTTL(ttl time.Duration) (time.Duration, error) {
	if ttl == 0 {
		return s.ttl, nil
	}
	if ttl < 0 {
		return 0, fmt.Errorf("%w: %s is negative", ErrInvalidTTL, ttl)
	}
	ttl = ttl.Truncate(time.Millisecond)
	if err := s.m.CheckTTL(ttl); err != nil {
		return 0, fmt.Errorf("%w: %s: the lease Manager's renewals would come too late: %w", ErrInvalidTTL, ttl, err)
	}
	return ttl, nil
}

// maxPerCall bounds the entries of one batched script call, so that one
// call keeps Redis busy for a few milliseconds at most.
const maxPerCall = 100

// group splits the entries idx into script calls. On a Cluster the keys of
// one call must share a slot, so entries are grouped by the slot of their
// tag; on a single server any entries can share a call; other clients
// (Ring) get one call per entry.
func (s *Store) group(idx []int, tagOf func(i int) string) [][]int {
	var calls [][]int
	add := func(g []int) {
		for len(g) > maxPerCall {
			calls = append(calls, g[:maxPerCall:maxPerCall])
			g = g[maxPerCall:]
		}
		if len(g) > 0 {
			calls = append(calls, g)
		}
	}
	switch s.c.(type) {
	case *redis.Client:
		add(idx)
	case *redis.ClusterClient:
		bySlot := map[uint16][]int{}
		var order []uint16
		for _, i := range idx {
			ks := slot.Of(tagOf(i))
			if _, ok := bySlot[ks]; !ok {
				order = append(order, ks)
			}
			bySlot[ks] = append(bySlot[ks], i)
		}
		for _, ks := range order {
			add(bySlot[ks])
		}
	default:
		for _, i := range idx {
			calls = append(calls, []int{i})
		}
	}
	return calls
}

// pipeline sends n scripts built by add in one pipeline. Scripts that the
// server answered NOSCRIPT (its script cache was flushed: restart, failover)
// did not run: the scripts are loaded and those, only those, are sent once
// more. err is the first error left.
func (s *Store) pipeline(ctx context.Context, n int, add func(p redis.Pipeliner, i int) *redis.Cmd) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, n)
	run := func(idx []int) error {
		p := s.c.Pipeline()
		for _, i := range idx {
			cmds[i] = add(p, i)
		}
		_, err := p.Exec(ctx)
		return err
	}
	err := run(seq(n))
	if err == nil {
		return cmds, nil
	}
	var again []int
	for i, c := range cmds {
		if isNoScript(c.Err()) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds, err
	}
	if lerr := s.loadScripts(ctx); lerr != nil {
		return cmds, lerr
	}
	_ = run(again)
	for _, c := range cmds {
		if c.Err() != nil {
			return cmds, c.Err()
		}
	}
	return cmds, nil
}

// callReplies returns the replies of call j of a pipeline that answered
// cmds and perr (Store.pipeline), or the error that stands for them.
func callReplies(cmds []*redis.Cmd, perr error, j int) ([]any, error) {
	if cmds[j] == nil {
		return nil, perr
	}
	return cmds[j].Slice()
}

// parseClaim fills c from a claim script's reply that does not run the job
// (a table; parseRunning reads the others). It returns the code of an
// answer that asks for the claim to be sent again: scripts.IdemSkew (with
// fresh windows) or scripts.IdemClaimFull (in a full call); else 0.
func (s *Store) parseClaim(c *Claim, res []any) (again int64) {
	bad := func(why string) int64 {
		c.Err = fmt.Errorf("%w: claim reply %s", ErrCorrupt, why)
		return 0
	}
	if len(res) == 0 {
		return bad("empty")
	}
	code, _ := res[0].(int64)
	switch code {
	case scripts.IdemHeld:
		if len(res) < 3 {
			return bad("too short")
		}
		c.Outcome = Held
		c.Holder, _ = res[1].(string)
		ms, _ := res[2].(int64)
		c.Remaining = time.Duration(max(ms, 0)) * time.Millisecond
	case scripts.IdemDuplicate, scripts.IdemMismatch:
		if len(res) < 2 {
			return bad("too short")
		}
		v, _ := res[1].(string)
		ext, hasExt := "", false
		if len(res) > 2 {
			ext, hasExt = res[2].(string)
		}
		rec, err := decodeRecord([]byte(v), []byte(ext), hasExt)
		if err != nil {
			c.Err = fmt.Errorf("idempotency: claim %s: %w", quoteKey(c.Key), err)
			return 0
		}
		c.Record, c.Fence = &rec, rec.Fence
		c.Outcome = Duplicate
		if code == scripts.IdemMismatch {
			c.Outcome = Mismatch
			c.Err = &MismatchError{Key: c.Key, Got: c.fp, Record: rec}
		}
	case scripts.IdemCorrupt:
		// The script refused to decode the stored record; decodeRecord names
		// the damage. Nothing was written.
		v := ""
		if len(res) > 1 {
			v, _ = res[1].(string)
		}
		err := fmt.Errorf("%w: %d bytes, refused by the claim script", ErrCorrupt, len(v))
		if _, derr := decodeRecord([]byte(v), nil, false); derr != nil {
			err = derr
		}
		c.Err = fmt.Errorf("idempotency: claim %s: %w", quoteKey(c.Key), err)
	case scripts.IdemSkew, scripts.IdemClaimFull:
		return code
	default:
		return bad("status " + strconv.FormatInt(code, 10))
	}
	return 0
}

// runningLen is the length of an acquired or takeover reply's fixed part
// (idem_claim.lua: '>BI7I2I7I7BB').
const runningLen = 26

// parseRunning fills c from an acquired or takeover reply (idem_claim.lua's
// packed string) and adopts its lease; a lease that cannot be held is given
// back and c.Err says so.
func (s *Store) parseRunning(ctx context.Context, c *Claim, res string, token string, sent time.Time) {
	if len(res) < runningLen || (res[0] != scripts.IdemAcquired && res[0] != scripts.IdemTakeover) || res[25] > 1 ||
		res[25] == 0 && len(res) > runningLen {
		c.Err = fmt.Errorf("%w: claim reply of %d bytes is not an acquire or takeover", ErrCorrupt, len(res))
		return
	}
	takeover := res[0] == scripts.IdemTakeover
	prev := uint56(res[10:17])
	c.Fence, c.Attempt, c.PrevFence, c.window, c.args.token = uint56(res[1:8]), int(res[8])<<8|int(res[9]), prev,
		int64(uint56(res[17:24])), token //nolint:gosec // 56 bits
	c.Cancelled = res[24] == 1
	c.carries = !takeover && prev == 0 && c.args.entry != ""
	c.keys.bucket = s.bucketKeyOf(c, c.window)
	if res[25] == 1 {
		c.Details, c.details = []byte(res[runningLen:]), true
	}
	c.Outcome = Acquired
	if takeover {
		c.Outcome = Takeover
	}
	l, err := leasing.Adopt(ctx, s.m, lease.Grant{Name: c.name, Token: token, Fence: c.Fence, TTL: c.ttl, SentAt: sent})
	if err != nil {
		// The lease is in Redis but cannot be tracked (the Manager is
		// closed, or the reply came after the local deadline): give the
		// key back.
		back := "given back"
		if aerr := s.abandon(ctx, c, token); aerr != nil {
			back = "left to expire in its lease TTL (giving it back failed: " + aerr.Error() + ")"
		}
		c.Outcome, c.Lease = 0, nil
		c.Err = fmt.Errorf("%w: claim %s was granted (fence %d) but could not be held (%w), and was %s; "+
			"do not run the job, claim the key again", ErrGivenUp, quoteKey(c.Key), c.Fence, err, back)
		return
	}
	c.Lease = l
}

// abandon releases the lease of a claim that could not be adopted, and puts
// its record back to RELEASED, best effort: without it the key stays held
// until its lease TTL and the next claim is a takeover.
func (s *Store) abandon(ctx context.Context, c *Claim, token string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.ttl)
	defer cancel()
	fence := strconv.FormatUint(c.Fence, 10)
	return s.release(ctx, c, 0, "1", func(keys []string, args []any) (int64, error) {
		code, err := scripts.IdemRelease.Run(ctx, s.c, append([]string{c.keys.lease}, keys...),
			append([]any{token, fence}, args...)...).Int64()
		if err == nil && code == scripts.StatusLost {
			err = fmt.Errorf("release answered %d", code)
		}
		return code, err
	})
}

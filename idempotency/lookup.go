package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/lease"
)

// Absent is the State of a key without a record: never claimed, or its
// record has left the retention.
const Absent State = 0

// Info is what Lookup reads about one idempotency key. It is a snapshot: a
// worker may claim, renew or finish the key right after it was read.
type Info struct {
	Key   string
	State State // Absent when the key has no record

	// The record (zero when Absent).
	Fence       uint64      // fence of the attempt that wrote the record
	Fingerprint Fingerprint // payload fingerprint of the key's first claim
	Attempt     int         // attempt number of that attempt, 1 for the first
	At          time.Time   // Completed and Failed: when (Redis time, second precision)
	HoldUntil   time.Time   // Released by a keep failure: claims are held until then
	ResultSize  int         // Completed: result bytes; Failed: error text bytes
	Result      []byte      // the result or error text, read by LookupResult only

	// The lease (zero when no lease is live).
	Leased     bool          // a lease on the key is live now
	LeaseFence uint64        // the live lease's fence
	Remaining  time.Duration // the live lease's remaining TTL, unless renewed

	// Heartbeat details saved by the key's current or last attempt.
	HasDetails  bool          // details are stored (Details may still be empty)
	Details     []byte        // at most the Store's WithMaxDetails bytes
	DetailsSize int           // stored size of the details
	DetailsTTL  time.Duration // how long the details are kept unless rewritten
}

// expiredExternal reports a COMPLETED or FAILED record whose result lives in
// its own key, now gone: the result key expired with the retention the
// record was written with, and the record lives on only because another
// layout's write raised its bucket's expiry (their windows start at the same
// instants, so they share bucket names). Such a record has expired: claims
// run the key again (idem_claim.lua) and lookups read it as absent.
func expiredExternal(raw string, resultExists bool) bool {
	if resultExists || len(raw) == 0 || raw[0]&flagExternal == 0 {
		return false
	}
	st := State(raw[0] & 15)
	return st == Completed || st == Failed
}

// Lookup reads the record, the lease and the heartbeat details of key k
// without changing anything, in one pipeline (one round trip; every key of k
// shares one Cluster slot). It looks for the record in the same buckets a
// claim reads. The result or error text of a finished key is not read, only
// its size (see LookupResult). The lease owner token is not returned: it is
// a capability. A damaged stored record gives an error matching ErrCorrupt,
// with the lease and details fields of Info filled in.
func (s *Store) Lookup(ctx context.Context, k string) (Info, error) {
	info, _, err := s.lookup(ctx, k, false, false)
	return info, err
}

// LookupResult is Lookup that also reads the result (or the error text) of a
// finished key into Info.Result.
func (s *Store) LookupResult(ctx context.Context, k string) (Info, error) {
	info, _, err := s.lookup(ctx, k, true, false)
	return info, err
}

// LookupHistory is LookupResult and History of key k in one pipeline, both
// from the same read of the record: the record's state and the attempts
// agree even when the record expires or is claimed as it is read (two
// calls could see a finished record and then, the record gone, none of the
// attempt it keeps).
func (s *Store) LookupHistory(ctx context.Context, k string) (Info, []Attempt, error) {
	return s.lookup(ctx, k, true, true)
}

func (s *Store) lookup(ctx context.Context, k string, withResult, withHistory bool) (Info, []Attempt, error) {
	info := Info{Key: k}
	if err := ValidateKey(k, s.cfg.maxKey); err != nil {
		return info, nil, err
	}
	h := hashKey(k)
	tag := s.tag(&h)
	// The widest range a claim may use: a record written in any of them is
	// the one a claim would find (newest first); older buckets have expired.
	base, n := s.windowRange(s.cfg.windows, true)
	leaseKey := s.m.Key(tag + ":" + k)
	dkey, rkey := s.detailsKey(tag, k), s.resultKey(tag, k)

	others, err := s.otherLayouts(ctx, false)
	if err != nil {
		return info, nil, fmt.Errorf("idempotency: lookup: %w", err)
	}
	olds := s.otherWindows(others)

	p := s.c.Pipeline()
	recs := s.readRecord(ctx, p, tag, &h, base, n, olds)
	lh := lease.Peek(ctx, p, leaseKey)
	dval := p.GetRange(ctx, dkey, 0, int64(s.cfg.maxDetails)-1)
	dlen := p.StrLen(ctx, dkey)
	dttl := p.PTTL(ctx, dkey)
	dexists := p.Exists(ctx, dkey)
	rexists := p.Exists(ctx, rkey)
	rlen := p.StrLen(ctx, rkey)
	var rval *redis.StringCmd
	if withResult {
		rval = p.GetRange(ctx, rkey, 0, int64(s.cfg.maxResult)-1)
	}
	// The history list after the record (see History for why that order).
	var list *redis.StringSliceCmd
	if withHistory {
		list = p.LRange(ctx, s.historyKey(tag, k), 0, -1)
	}
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return info, nil, fmt.Errorf("idempotency: lookup: %w", classify(err))
	}

	if hd, ok := lh.Holder(); ok {
		info.Leased, info.LeaseFence, info.Remaining = true, hd.Fence, hd.Remaining
	}
	if dexists.Val() > 0 {
		info.HasDetails = true
		info.Details = []byte(dval.Val())
		info.DetailsSize = int(dlen.Val())
		info.DetailsTTL = max(dttl.Val(), 0)
	}

	raw, found := recs.newest()
	if found && expiredExternal(raw, rexists.Val() > 0) {
		// The record outlived its result key (idem_claim.lua): expired.
		raw, found = "", false
	}
	var hs []Attempt
	if withHistory {
		hs = s.mergeHistory(list.Val(), raw, found)
	}
	if !found {
		return info, hs, nil
	}
	var ext []byte
	if rval != nil {
		ext = []byte(rval.Val())
	}
	r, err := decodeRecord([]byte(raw), ext, rexists.Val() > 0)
	if err != nil {
		return info, hs, fmt.Errorf("idempotency: lookup %s: %w", quoteKey(k), err)
	}
	info.State, info.Fence, info.Fingerprint, info.Attempt = r.State, r.Fence, r.Fingerprint, r.Attempt
	info.At, info.HoldUntil = r.At, r.HoldUntil
	info.ResultSize = len(r.Result)
	if raw[0]&flagExternal != 0 {
		info.ResultSize = int(rlen.Val())
	}
	if withResult {
		info.Result = r.Result
	}
	return info, hs, nil
}

// recordReads are the reads of one key's record in every bucket it may
// live in (see readRecord).
type recordReads struct {
	windows []*redis.StringCmd // the current layout's windows, oldest first
	others  []*redis.StringCmd // other layouts' buckets (layout.go)
}

// readRecord queues on p the reads of the record of the key hashed h in
// every bucket a claim would look in: the n windows from base and the other
// layouts' buckets olds. A claim moves a record only into its current window
// (the newest), so the buckets it may leave are read first: the other
// layouts', then the windows oldest first. A record moved while the pipeline
// runs is then found, if not where it was, where it went.
func (s *Store) readRecord(ctx context.Context, p redis.Pipeliner, tag string, h *keyHash, base int64, n int, olds [][2]int64) recordReads {
	r := recordReads{windows: make([]*redis.StringCmd, n), others: make([]*redis.StringCmd, len(olds))}
	for i, o := range olds {
		r.others[i] = p.HGet(ctx, s.otherBucketKey(tag, o[0], o[1]), h.field())
	}
	for i := range n {
		r.windows[i] = p.HGet(ctx, s.bucketKey(tag, base+int64(i)), h.field())
	}
	return r
}

// newest returns the record the reads found that a claim would take as the
// key's: the newest window's, then the other layouts' in order.
func (r recordReads) newest() (string, bool) {
	for i := len(r.windows) - 1; i >= 0; i-- {
		if v, err := r.windows[i].Result(); err == nil {
			return v, true
		}
	}
	for _, rc := range r.others {
		if v, err := rc.Result(); err == nil {
			return v, true
		}
	}
	return "", false
}

package idempotency

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/lease"
)

// MaxLookupBatch bounds the keys of one LookupStates call: one pipeline of
// a few commands a key.
const MaxLookupBatch = 1024

// LookupStates reads the record and the lease of each key of keys (at most
// MaxLookupBatch) in one pipeline, for tools that account for many keys at
// once (worker audit). Each Info has the record fields and the lease fields
// of [Store.Lookup]; heartbeat details and result sizes of results kept in
// their own key are not read. A key that is not valid, or whose record is
// damaged, gets its error in errs at its index (errs is nil when every key
// was read); the returned error is for the round trip as a whole.
func (s *Store) LookupStates(ctx context.Context, keys []string) (infos []Info, errs []error, err error) {
	if len(keys) > MaxLookupBatch {
		return nil, nil, fmt.Errorf("idempotency: lookup of %d keys: want at most %d", len(keys), MaxLookupBatch)
	}
	others, err := s.otherLayouts(ctx, false)
	if err != nil {
		return nil, nil, fmt.Errorf("idempotency: lookup: %w", err)
	}
	olds := s.otherWindows(others)
	base, n := s.windowRange(s.cfg.windows, true)
	infos = make([]Info, len(keys))
	recs := make([]recordReads, len(keys))
	leases := make([]*lease.PeekCmd, len(keys))
	p := s.c.Pipeline()
	for i, k := range keys {
		infos[i].Key = k
		if verr := ValidateKey(k, s.cfg.maxKey); verr != nil {
			errs = setErr(errs, len(keys), i, verr)
			continue
		}
		h := hashKey(k)
		tag := s.tag(&h)
		recs[i] = s.readRecord(ctx, p, tag, &h, base, n, olds)
		leaseKey := s.m.Key(tag + ":" + k)
		leases[i] = lease.Peek(ctx, p, leaseKey)
	}
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("idempotency: lookup: %w", classify(err))
	}
	for i := range keys {
		if leases[i] == nil {
			continue
		}
		if derr := fillState(&infos[i], recs[i], leases[i]); derr != nil {
			errs = setErr(errs, len(keys), i, derr)
		}
	}
	return infos, errs, nil
}

// fillState decodes what LookupStates read for one key into info.
func fillState(info *Info, recs recordReads, lh *lease.PeekCmd) error {
	if h, ok := lh.Holder(); ok {
		info.Leased = true
		info.LeaseFence = h.Fence
		info.Remaining = h.Remaining
	}
	raw, ok := recs.newest()
	if !ok {
		return nil
	}
	// The result itself is not read: an external result counts as present.
	r, err := decodeRecord([]byte(raw), nil, true)
	if err != nil {
		return fmt.Errorf("idempotency: lookup %s: %w", quoteKey(info.Key), err)
	}
	info.State, info.Fence, info.Fingerprint, info.Attempt = r.State, r.Fence, r.Fingerprint, r.Attempt
	info.At, info.HoldUntil = r.At, r.HoldUntil
	if raw[0]&flagExternal == 0 {
		info.ResultSize = len(r.Result)
	}
	return nil
}

func setErr(errs []error, n, i int, err error) []error {
	if errs == nil {
		errs = make([]error, n)
	}
	errs[i] = err
	return errs
}

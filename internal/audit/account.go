package audit

import (
	"context"
	"hash/maphash"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/deadletter"
)

// pos names a record of the audited topic.
type pos struct {
	partition int32
	offset    int64
}

// pending is a record read and not yet accounted for: what the account
// needs of it (not its payload).
type pending struct {
	e      Entry
	fp     idempotency.Fingerprint
	fpErr  bool
	hasKey bool
}

type auditor struct {
	c     Config
	dead  map[pos]string // dead-lettered records of the range: their reason
	seen  map[uint64]struct{}
	seed  maphash.Seed
	batch []pending
	rep   Report
	total int64

	lastProgress time.Time
	began        time.Time // when the audit began: the retention counts back from it
}

// add notes r for the next flush.
func (a *auditor) add(r *kgo.Record) {
	p := pending{e: Entry{Partition: r.Partition, Offset: r.Offset, Time: r.Timestamp.UTC()}}
	for _, h := range r.Headers {
		switch h.Key {
		case deadletter.HeaderKey:
			p.e.Key, p.hasKey = string(h.Value), true
		case deadletter.HeaderType:
			p.e.Type = string(h.Value)
		}
	}
	if p.hasKey {
		fp, err := a.c.Store.Fingerprint(r.Value)
		p.fp, p.fpErr = fp, err != nil
	}
	a.batch = append(a.batch, p)
}

// flush reads the Redis records of the batch's keys in one pipeline and
// accounts for each record of the batch.
func (a *auditor) flush(ctx context.Context) error {
	if len(a.batch) == 0 {
		return nil
	}
	keys := make([]string, 0, len(a.batch))
	idx := make([]int, len(a.batch))
	for i, p := range a.batch {
		idx[i] = -1
		if _, dl := a.dead[pos{p.e.Partition, p.e.Offset}]; p.hasKey && !dl {
			idx[i] = len(keys)
			keys = append(keys, p.e.Key)
		}
	}
	var infos []idempotency.Info
	var errs []error
	var err error
	if len(keys) > 0 {
		if infos, errs, err = a.c.Store.LookupStates(ctx, keys); err != nil {
			return err
		}
	}
	for i, p := range a.batch {
		var info *idempotency.Info
		var lerr error
		if j := idx[i]; j >= 0 {
			info = &infos[j]
			if errs != nil {
				lerr = errs[j]
			}
		}
		e := a.account(p, info, lerr)
		if e.Outcome == Failed && a.c.IsCancelled != nil {
			if e, err = a.cancelled(ctx, e); err != nil {
				return err
			}
		}
		a.record(e)
	}
	a.batch = a.batch[:0]
	a.progress()
	return nil
}

// account says what became of the record of p, whose key's Redis record
// is info (nil when not read: no key, or dead-lettered).
func (a *auditor) account(p pending, info *idempotency.Info, lerr error) Entry {
	e := p.e
	if reason, ok := a.dead[pos{e.Partition, e.Offset}]; ok {
		e.Outcome, e.Reason = DeadLettered, reason
		if reason == deadletter.ReasonPermanent {
			a.firstRun(e.Key)
		}
		return e
	}
	switch {
	case !p.hasKey:
		return unaccounted(e, "no idempotency key and no dead-letter copy")
	case lerr != nil:
		return unaccounted(e, lerr.Error())
	}
	e.Fence, e.Attempt = info.Fence, info.Attempt
	switch info.State {
	case idempotency.Completed, idempotency.Failed:
		if !p.fpErr && p.fp != info.Fingerprint {
			return unaccounted(e, "the key's record is for another payload and no dead-letter copy was found")
		}
		e.Outcome = Completed
		if info.State == idempotency.Failed {
			e.Outcome = Failed
		}
		if !a.firstRun(e.Key) {
			e.Outcome = Duplicate
		}
		return e
	case idempotency.Processing, idempotency.Released:
		e.Outcome = Running
		if !info.Leased {
			e.Reason = "no live lease: waits for its next attempt"
		}
		return e
	}
	if info.Leased { // claimed before its record was written back: a race with a claim
		e.Outcome, e.Fence = Running, info.LeaseFence
		return e
	}
	if c, ok := a.c.Committed[e.Partition]; ok && e.Offset >= c {
		e.Outcome, e.Reason = Pending, "not consumed yet: at or past the group's committed offset"
		return e
	}
	if a.c.Retention > 0 && e.Time.Before(a.began.Add(-a.c.Retention)) {
		e.Outcome, e.Reason = Expired, "no record in Redis, written longer ago than the retention: it may have lapsed"
		return e
	}
	return unaccounted(e, "no record in Redis (never run, or past the retention) and no dead-letter copy")
}

// cancelled returns e, the first record of a FAILED key, as Cancelled when
// the key's failure is an operator's cancel. The failure text is read for
// the first record of each failed key only (one round trip each): the
// batch's pipeline reads states, not texts, and failed keys are few.
// Config.IsCancelled judges the text.
func (a *auditor) cancelled(ctx context.Context, e Entry) (Entry, error) {
	info, err := a.c.Store.LookupResult(ctx, e.Key)
	if err != nil {
		return e, err
	}
	if info.State == idempotency.Failed && a.c.IsCancelled(string(info.Result)) {
		e.Outcome = Cancelled
	}
	return e, nil
}

func unaccounted(e Entry, why string) Entry {
	e.Outcome, e.Reason = Unaccounted, why
	return e
}

// firstRun reports whether key k was not accounted for before, and
// remembers it (up to MaxKeys keys).
func (a *auditor) firstRun(k string) bool {
	h := maphash.String(a.seed, k)
	if _, ok := a.seen[h]; ok {
		return false
	}
	if len(a.seen) >= a.c.MaxKeys {
		a.rep.KeysForgotten++
		return true
	}
	a.seen[h] = struct{}{}
	return true
}

func (a *auditor) record(e Entry) {
	a.rep.Records++
	a.rep.Counts[e.Outcome]++
	if e.Outcome == Unaccounted && len(a.rep.Unaccounted) < a.c.MaxListed {
		a.rep.Unaccounted = append(a.rep.Unaccounted, e)
	}
	if a.c.Each != nil {
		a.c.Each(e)
	}
}

func (a *auditor) progress() {
	if a.c.Progress == nil || time.Since(a.lastProgress) < a.c.ProgressEvery {
		return
	}
	a.lastProgress = time.Now()
	a.c.Progress(a.rep.Records, a.total)
}

// readDeadLetters reads the whole dead-letter topic and returns the reason
// of each copy of a record of the audited range.
func readDeadLetters(ctx context.Context, c Config, from, to map[int32]int64) (map[pos]string, error) {
	dead := map[pos]string{}
	if c.DLQ == "" {
		return dead, nil
	}
	end, err := deadletter.EndOffsets(ctx, c.Admin, c.DLQ)
	if err != nil {
		return nil, err
	}
	err = deadletter.Scan(ctx, c.Admin, c.ConnOpts, c.DLQ, nil, end, func(r *kgo.Record) bool {
		var topic, reason string
		var part, off int64 = -1, -1
		for _, h := range r.Headers {
			switch h.Key {
			case deadletter.HeaderTopic:
				topic = string(h.Value)
			case deadletter.HeaderReason:
				reason = string(h.Value)
			case deadletter.HeaderPartition:
				part, _ = strconv.ParseInt(string(h.Value), 10, 32)
			case deadletter.HeaderOffset:
				off, _ = strconv.ParseInt(string(h.Value), 10, 64)
			}
		}
		p := int32(part) //nolint:gosec // parsed with bitSize 32
		if e, ok := to[p]; topic == c.Topic && ok && off >= from[p] && off < e {
			dead[pos{p, off}] = reason
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return dead, nil
}

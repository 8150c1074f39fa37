// Package audit accounts for every record of a range of a jobs topic: it
// reads the records (direct partition reads, no consumer group), the Redis
// record of each key and the dead-letter topic, and says what became of
// each record: run once and completed (with its fence), a replayed
// duplicate, dead-lettered (with the reason), failed terminally, cancelled
// by an operator, still running, or unaccounted. `worker audit` presents it; the chaos run ends
// with it.
//
// Memory is bounded: the jobs topic is streamed, keys are read from Redis
// in pipelined batches, and only the dead letters of the range, the
// unaccounted records (up to [Config.MaxListed]) and one 8-byte hash per
// distinct key (up to [Config.MaxKeys], to tell a duplicate from the first
// run) are kept.
package audit

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/deadletter"
	"github.com/leasehold/leasehold/outcome"
)

// Outcome is what became of one record: a name of leasehold's one outcome
// vocabulary (package outcome).
type Outcome = outcome.Name

// Outcomes, in the order a report lists them.
const (
	// Completed: the key's record is COMPLETED with this record's payload,
	// and this is the first record of the key in the range.
	Completed = outcome.Completed
	// Duplicate: a later record of a key already accounted for: its
	// outcome was replayed, the job did not run again.
	Duplicate = outcome.Duplicate
	// DeadLettered: a copy of the record is in the dead-letter topic.
	DeadLettered = outcome.DeadLettered
	// Failed: the key's record is FAILED (a terminal failure, replayed like
	// a result) and no dead-letter copy of this record was found.
	Failed = outcome.Failed
	// Cancelled: the key's record is FAILED with the text of an operator's
	// cancel (worker cancel; judged by [Config.IsCancelled]), and this is the
	// first record of the key in the range; its saga steps were
	// compensated. Later records of the key are Duplicate.
	Cancelled = outcome.Cancelled
	// Running: the key is leased now, or its last attempt ended without
	// an outcome and it waits for its next one.
	Running = outcome.Running
	// Pending: no record yet, and the consumer group has not committed
	// past the record: it waits to be consumed.
	Pending = outcome.Pending
	// Expired: no record in Redis, no dead-letter copy, and the record was
	// written longer ago than the workers' retention ([Config.Retention]):
	// its key's record may have lapsed, so the audit cannot tell. Audit a
	// range younger than the retention to account for every record.
	Expired = outcome.Expired
	// Unaccounted: none of the above: no record in Redis though the group
	// committed past the record (or no group was given), a record for
	// another payload, or no key, and no dead-letter copy.
	Unaccounted = outcome.Unaccounted
)

// Outcomes lists every outcome, in report order.
func Outcomes() []Outcome {
	return []Outcome{Completed, Duplicate, DeadLettered, Failed, Cancelled, Running, Pending, Expired, Unaccounted}
}

// Entry is the account of one record.
type Entry struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Time      time.Time `json:"time"`
	Key       string    `json:"key,omitempty"`
	Type      string    `json:"type,omitempty"`
	Outcome   Outcome   `json:"outcome"`
	Fence     uint64    `json:"fence,omitempty"`   // the fence of the attempt that wrote the key's record
	Attempt   int       `json:"attempt,omitempty"` // that attempt's number
	Reason    string    `json:"reason,omitempty"`  // dead-lettered: the reason; unaccounted: why
}

// Defaults of [Config].
const (
	DefaultBatch     = 500
	DefaultMaxKeys   = 1 << 22
	DefaultMaxListed = 1000
)

// AllPartitions is the partition under which an offset of Config.From or
// Config.To applies to every partition.
const AllPartitions int32 = -1

// Config says what to audit and with what.
type Config struct {
	// Store names and reads the idempotency records, with the worker's
	// key prefix and policy (fingerprints). Required.
	Store *idempotency.Store
	// Admin lists offsets; ConnOpts (seed brokers, TLS, SASL, no group)
	// open the clients that read the topics. Required.
	Admin    *kgo.Client
	ConnOpts []kgo.Opt
	// Topic is the jobs topic (required); DLQ its dead-letter topic (empty:
	// none, nothing counts as dead-lettered).
	Topic, DLQ string
	// From and To bound the range by partition: offsets from From (the log
	// start for a partition From lacks) up to To, exclusive; an offset
	// under AllPartitions applies to every partition. To nil: the end
	// offsets when the audit starts. Only the partitions named in To (or,
	// To nil, in From) are read; both nil: every partition.
	From, To map[int32]int64
	// Committed holds the workers' consumer group's committed offsets on
	// Topic: a record at or past its partition's offset with no record in
	// Redis is Pending, not Unaccounted. Nil, or a partition it lacks:
	// every such record is Unaccounted.
	Committed map[int32]int64
	// Retention is the workers' retention of finished keys: a record with
	// no Redis record written longer ago than it (before the audit began)
	// is Expired, not Unaccounted. 0: every such record is Unaccounted.
	Retention time.Duration
	// Batch is how many keys one Redis pipeline reads. Default DefaultBatch;
	// at most idempotency.MaxLookupBatch.
	Batch int
	// MaxKeys bounds the distinct keys remembered to tell a duplicate from
	// the first run (8 bytes each, plus the map's overhead); past it, later
	// records of unremembered keys count as completed. Default
	// DefaultMaxKeys.
	MaxKeys int
	// MaxListed bounds the unaccounted entries kept in the report (all are
	// counted). Default DefaultMaxListed.
	MaxListed int
	// IsCancelled, when set, tells a key's terminal failure text that
	// records an operator's cancel (leasehold.IsCancelledFailure, given by
	// the caller: the root package imports this one's callers, not this
	// one): such a key's first record is Cancelled, not Failed. Nil: every
	// FAILED key is Failed.
	IsCancelled func(failure string) bool
	// Each, when set, gets every record's entry, in read order.
	Each func(Entry)
	// Progress, when set, gets the records read so far and the range's
	// size, about every ProgressEvery (default 2s).
	Progress      func(done, total int64)
	ProgressEvery time.Duration
}

// Report is the account of a range.
type Report struct {
	Topic   string            `json:"topic"`
	From    map[int32]int64   `json:"from"`
	To      map[int32]int64   `json:"to"`
	Records int64             `json:"records"`
	Counts  map[Outcome]int64 `json:"counts"`
	// Unaccounted lists the first MaxListed unaccounted records.
	Unaccounted []Entry `json:"unaccounted"`
	// KeysForgotten: distinct keys past MaxKeys (duplicates of them were
	// counted as completed).
	KeysForgotten int64 `json:"keys_forgotten,omitempty"`
}

// Run audits the range of c and returns its report. It reads the
// dead-letter topic first, then streams the range.
func Run(ctx context.Context, c Config) (Report, error) {
	if c.Store == nil || c.Admin == nil || c.Topic == "" {
		return Report{}, fmt.Errorf("%w: want a store, an admin client and a topic", ErrConfig)
	}
	c.Batch = min(cmp.Or(c.Batch, DefaultBatch), idempotency.MaxLookupBatch)
	c.MaxKeys = cmp.Or(c.MaxKeys, DefaultMaxKeys)
	c.MaxListed = cmp.Or(c.MaxListed, DefaultMaxListed)
	c.ProgressEvery = cmp.Or(c.ProgressEvery, 2*time.Second)
	from, to, err := bounds(ctx, c)
	if err != nil {
		return Report{}, err
	}
	dead, err := readDeadLetters(ctx, c, from, to)
	if err != nil {
		return Report{}, err
	}
	a := &auditor{c: c, dead: dead, seen: make(map[uint64]struct{}), seed: maphash.MakeSeed(), began: time.Now(),
		rep: Report{Topic: c.Topic, From: from, To: to, Counts: map[Outcome]int64{}, Unaccounted: []Entry{}}}
	for p, e := range to {
		a.total += max(e-from[p], 0)
	}
	a.lastProgress = time.Now()
	var flushErr error
	err = deadletter.Scan(ctx, c.Admin, c.ConnOpts, c.Topic, from, to, func(r *kgo.Record) bool {
		a.add(r)
		if len(a.batch) >= c.Batch {
			flushErr = a.flush(ctx)
		}
		return flushErr == nil
	})
	if err == nil {
		err = flushErr
	}
	if err == nil {
		err = a.flush(ctx)
	}
	if err != nil {
		return a.rep, fmt.Errorf("audit: %w", err)
	}
	return a.rep, nil
}

// at returns the offset of m for partition p, or m's offset for every
// partition (under AllPartitions).
func at(m map[int32]int64, p int32) (int64, bool) {
	if o, ok := m[p]; ok {
		return o, true
	}
	o, ok := m[AllPartitions]
	return o, ok
}

// bounds returns the range's start and end offsets by partition: c.From
// over the log start offsets, c.To or the end offsets.
func bounds(ctx context.Context, c Config) (from, to map[int32]int64, err error) {
	start, err := deadletter.StartOffsets(ctx, c.Admin, c.Topic)
	if err != nil {
		return nil, nil, err
	}
	end, err := deadletter.EndOffsets(ctx, c.Admin, c.Topic)
	if err != nil {
		return nil, nil, err
	}
	if len(end) == 0 {
		return nil, nil, fmt.Errorf("audit: topic %s has no partitions (does it exist?)", c.Topic)
	}
	from, to = map[int32]int64{}, map[int32]int64{}
	for p, e := range end {
		if c.To != nil {
			t, ok := at(c.To, p)
			if !ok {
				continue
			}
			e = min(e, t)
		}
		f := start[p]
		if o, ok := at(c.From, p); ok {
			f = max(f, o)
		} else if c.From != nil && c.To == nil {
			continue
		}
		if f < e {
			from[p], to[p] = f, e
		}
	}
	return from, to, nil
}

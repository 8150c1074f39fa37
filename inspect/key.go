package inspect

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/lease"
)

// KeyInfo is what [Inspector.Key] reads about one idempotency key: its
// record, its lease, its last heartbeat details, its saga journals and its
// attempt history. It is a snapshot: a worker may claim, renew or finish
// the key right after it was read.
type KeyInfo struct {
	Key      string
	Tag      string // the Cluster hash tag every Redis key of Key carries
	LeaseKey string // the Redis key of its lease

	// The record (State idempotency.Absent: none, or it left the retention).
	State      idempotency.State
	Fence      uint64    // fence of the attempt that wrote the record
	Attempt    int       // that attempt's number, 1 for the first
	FinishedAt time.Time // COMPLETED and FAILED: when (second precision)
	HoldUntil  time.Time // RELEASED with a hold: claims are held until then
	Result     []byte    // COMPLETED: the cached result (at most the store's bound)
	ResultSize int       // COMPLETED: the cached result's stored size
	Failure    string    // FAILED: the cached terminal error text

	// The lease (Leased false: no lease is live).
	Leased     bool
	LeaseFence uint64
	// Owner is a short digest of the owner token, to tell holders apart
	// (the token itself is a capability and is never returned).
	Owner     string
	Remaining time.Duration // the lease's time left, unless renewed

	// Heartbeat details of the current or last attempt.
	HasDetails  bool
	Details     []byte        // at most the store's details bound
	DetailsSize int           // their stored size
	DetailsTTL  time.Duration // how long they are kept unless rewritten

	// Journals are the key's saga journals still kept, newest fence first
	// (at most 10; see [Inspector.Journals]); JournalErr is why they could
	// not all be read.
	Journals   []compensation.JournalInfo
	JournalErr error

	// History is the key's attempts, oldest first, as its history keeps
	// them (see [Inspector.History]), read with the record (one pipeline,
	// one read of the record), so the two agree. HistoryErr is nil: a
	// failed read of the history is Key's error; kept for code that checks it.
	History    []idempotency.Attempt
	HistoryErr error

	// Type is the job's type as the newest attempt of History that kept
	// one tells it: known without the worker's registrations, also once the
	// key finished; "" with no history, or one written before the type was
	// kept.
	Type string
}

// Lease is one lease as stored in Redis.
type Lease struct {
	Name      string // the idempotency key, or the lease name for other leases
	LeaseKey  string // the Redis key
	Owner     string // digest of the owner token ([OwnerDigest])
	Fence     uint64
	Remaining time.Duration

	// Idempotency is true for the lease of an idempotency key (a job's);
	// Record is then the key's record, unless RecordErr says why not.
	Idempotency bool
	Record      *idempotency.Info
	RecordErr   error
}

// Key reads the record (with its result or error text), lease, heartbeat
// details and saga journals of idempotency key key, in a few round trips.
func (i *Inspector) Key(ctx context.Context, key string) (KeyInfo, error) {
	be, err := i.backend(ctx)
	if err != nil {
		return KeyInfo{}, err
	}
	// The record and the history from one read of the record: read apart,
	// a record expiring between them showed a finished key without the
	// attempt its record kept.
	info, hs, err := be.s.LookupHistory(ctx, key)
	if err != nil {
		return KeyInfo{Key: key}, err
	}
	name := be.s.LeaseName(key)
	ki := newKeyInfo(key, be.s.Tag(key), info)
	ki.LeaseKey = be.m.Key(name)
	if info.Leased {
		// The owner digest: read apart, as Lookup never returns the token;
		// kept only if it is the same lease (same fence).
		if l, ok, err := i.readLease(ctx, ki.LeaseKey); err != nil {
			return ki, err
		} else if ok && l.Fence == info.LeaseFence {
			ki.Owner = l.Owner
		}
	}
	ki.Journals, ki.JournalErr = be.comp.Journals(ctx, name, 10, ki.Fence, ki.LeaseFence)
	ki.History = hs
	ki.Type = JobType(ki.History)
	return ki, nil
}

// JobType returns the job type of the newest attempt of hs (oldest first)
// that kept one, "" if none did.
func JobType(hs []idempotency.Attempt) string {
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].Type != "" {
			return hs[i].Type
		}
	}
	return ""
}

// History returns the attempts of idempotency key key, oldest first: the
// last ones its history keeps (idempotency.WithHistory, default 16) for as
// long as its record is kept. Each tells its fence, owner digest, worker,
// start and end, how it ended, the compensations run for it and its trace.
func (i *Inspector) History(ctx context.Context, key string) ([]idempotency.Attempt, error) {
	be, err := i.backend(ctx)
	if err != nil {
		return nil, err
	}
	return be.s.History(ctx, key)
}

// Journals returns up to limit saga journals of idempotency key key, newest
// fence first: those not settled yet, and those of the fences given (for
// example fences an operator saw earlier), while they are kept.
func (i *Inspector) Journals(ctx context.Context, key string, limit int, fences ...uint64) ([]compensation.JournalInfo, error) {
	be, err := i.backend(ctx)
	if err != nil {
		return nil, err
	}
	return be.comp.Journals(ctx, be.s.LeaseName(key), limit, fences...)
}

func newKeyInfo(key, tag string, info idempotency.Info) KeyInfo {
	ki := KeyInfo{
		Key: key, Tag: tag, State: info.State, Fence: info.Fence, Attempt: info.Attempt,
		FinishedAt: info.At, HoldUntil: info.HoldUntil,
		Leased: info.Leased, LeaseFence: info.LeaseFence, Remaining: info.Remaining, Owner: "-",
		HasDetails: info.HasDetails, Details: info.Details, DetailsSize: info.DetailsSize, DetailsTTL: info.DetailsTTL,
	}
	switch info.State {
	case idempotency.Completed:
		ki.Result, ki.ResultSize = info.Result, info.ResultSize
	case idempotency.Failed:
		ki.Failure = string(info.Result)
	}
	return ki
}

// Lease reads the lease of idempotency key key; false when none is held.
func (i *Inspector) Lease(ctx context.Context, key string) (Lease, bool, error) {
	lk, err := i.LeaseKey(ctx, key)
	if err != nil {
		return Lease{}, false, err
	}
	l, ok, err := i.readLease(ctx, lk)
	l.Name, l.Idempotency = key, true
	return l, ok, err
}

func (i *Inspector) readLease(ctx context.Context, lk string) (Lease, bool, error) {
	p := i.rdb.Pipeline()
	c := lease.Peek(ctx, p, lk)
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Lease{}, false, err
	}
	h, ok := c.Holder()
	if !ok {
		return Lease{LeaseKey: lk, Owner: "-"}, false, nil
	}
	return Lease{LeaseKey: lk, Owner: OwnerDigest(h.Token), Fence: h.Fence, Remaining: h.Remaining}, true, nil
}

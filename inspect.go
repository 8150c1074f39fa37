package leasehold

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/lease"
)

// KeyInfo is what [Worker.Inspect] reads about one idempotency key: its
// record, its lease and its last heartbeat details. It is a snapshot: a
// worker may claim, renew or finish the key right after it was read.
type KeyInfo struct {
	Key string
	Tag string // the Cluster hash tag every Redis key of Key carries

	// The record (State idempotency.Absent: none, or it left the retention).
	State      idempotency.State
	Fence      uint64    // fence of the attempt that wrote the record
	Attempt    int       // that attempt's number, 1 for the first
	FinishedAt time.Time // COMPLETED and FAILED: when (second precision)
	HoldUntil  time.Time // RELEASED with a hold: claims are held until then
	Result     []byte    // COMPLETED: the cached result, replayed to duplicates
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
}

// OwnerDigest returns the digest of a lease owner token that [KeyInfo.Owner]
// shows: the first 8 hex digits of its SHA-256, or "-" for none.
func OwnerDigest(token string) string {
	if token == "" {
		return "-"
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:4])
}

// Inspect reads the record, lease and heartbeat details of idempotency key
// key, with the worker's Redis client, key prefix and store options. It
// works before [Worker.Start], while the worker runs and after it stopped:
// each call opens a short-lived view of the worker's Redis (a few round
// trips), so that no second lease manager or store needs building by hand.
func (w *Worker) Inspect(ctx context.Context, key string) (KeyInfo, error) {
	if err := ValidateKey(key); err != nil {
		return KeyInfo{}, err
	}
	var ki KeyInfo
	err := w.withView(ctx, func(s *idempotency.Store, m *lease.Manager) error {
		info, err := s.LookupResult(ctx, key)
		if err != nil {
			return mapStoreErr(err)
		}
		ki = keyInfo(key, s.Tag(key), info)
		if info.Leased {
			// The owner digest: read apart, as Lookup never returns the
			// token; kept only if it is the same lease (same fence).
			v, err := w.rdb.HMGet(ctx, m.Key(s.LeaseName(key)), "tok", "fen").Result()
			if err != nil {
				return mapStoreErr(err)
			}
			tok, _ := v[0].(string)
			fen, _ := v[1].(string)
			if tok != "" && fen == strconv.FormatUint(info.LeaseFence, 10) {
				ki.Owner = OwnerDigest(tok)
			}
		}
		return nil
	})
	return ki, err
}

func keyInfo(key, tag string, info idempotency.Info) KeyInfo {
	ki := KeyInfo{
		Key: key, Tag: tag, State: info.State, Fence: info.Fence, Attempt: info.Attempt,
		FinishedAt: info.At, HoldUntil: info.HoldUntil,
		Leased: info.Leased, LeaseFence: info.LeaseFence, Remaining: info.Remaining, Owner: "-",
		HasDetails: info.HasDetails, Details: info.Details, DetailsSize: info.DetailsSize, DetailsTTL: info.DetailsTTL,
	}
	switch info.State {
	case idempotency.Completed:
		ki.Result = info.Result
	case idempotency.Failed:
		ki.Failure = string(info.Result)
	}
	return ki
}

// withView runs fn with an idempotency store and lease manager over the
// worker's Redis client, built with the worker's options (TTL, prefix,
// retention, store options) and shut down when fn returns. It holds no lease.
func (w *Worker) withView(ctx context.Context, fn func(*idempotency.Store, *lease.Manager) error) error {
	c := &w.cfg
	m, err := lease.NewManager(w.rdb, lease.WithTTL(c.leaseTTL), lease.WithPrefix(c.keyPrefix), lease.WithLogger(c.logger))
	if err != nil {
		return fmt.Errorf("leasehold: %w", err)
	}
	if err := m.Start(ctx); err != nil {
		return mapStoreErr(fmt.Errorf("leasehold: %w", err))
	}
	defer func() { _ = m.Shutdown(context.WithoutCancel(ctx)) }()
	iopts := []idempotency.Opt{idempotency.WithPrefix(c.keyPrefix), idempotency.WithRetention(c.retention),
		idempotency.WithLogger(c.logger), idempotency.WithMaxKeyLen(MaxKeyLen)}
	s, err := idempotency.New(ctx, w.rdb, m, append(iopts, c.idemOpts...)...)
	if err != nil {
		return mapStoreErr(fmt.Errorf("leasehold: %w", err))
	}
	return fn(s, m)
}

package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/scripts"
)

// Errors of Reset. (They belong in errors.go; they sit here while errors.go
// is being reworked elsewhere.)
var (
	// ErrResetHeld is matched by a *ResetHeldError: Reset found a live
	// lease on the key and was not forced. Nothing was written.
	ErrResetHeld = errors.New("idempotency: reset refused: the key's lease is live")
	// ErrResetClock is returned by Reset when Redis time is not past the
	// key's fence (a fence ahead of the server clock: the clock went back,
	// or fences were raised faster than time). A claim after the reset takes
	// its fence from the clock, so it could get a lower one; nothing was
	// written. Retry once Redis time has passed the fence.
	ErrResetClock = errors.New("idempotency: reset refused: Redis time is not past the key's fence")
)

// ResetHeldError reports the live lease that refused a Reset. It matches
// ErrResetHeld.
type ResetHeldError struct {
	Key       string
	Fence     uint64        // the live lease's fence
	Remaining time.Duration // the lease's time left, unless renewed
}

func (e *ResetHeldError) Error() string {
	return fmt.Sprintf("idempotency: reset of %s refused: its lease (fence %d) is live for %s more; "+
		"wait for it to end, or force the reset to end the lease (its holder then loses it)",
		quoteKey(e.Key), e.Fence, e.Remaining.Round(time.Millisecond))
}

// Unwrap returns ErrResetHeld.
func (e *ResetHeldError) Unwrap() error { return ErrResetHeld }

// ResetResult is what Reset forgot.
type ResetResult struct {
	// State is the record's state before the reset (Absent: there was none).
	State State
	// Fence is the highest fence the key had (its record's or its lease's);
	// every later claim of the key gets a higher one.
	Fence uint64
	// LeaseEnded reports that a live lease was ended (forced reset).
	LeaseEnded bool
}

// Reset forgets the record of key k, so that its next delivery runs as a
// first claim (attempt 1): a COMPLETED or FAILED outcome is no longer
// replayed and a payload of another fingerprint is no longer refused. The
// record (in every bucket a claim reads), the heartbeat details and the
// external result are deleted in one script (lua/idem_reset.lua). The key's
// attempt history stays (History): a first attempt's entry the record carries
// moves into it first.
//
// A live lease refuses the reset with a *ResetHeldError unless force is set;
// forced, the lease is ended too: its holder loses it at its next renewal,
// and its commit and heartbeat writes are refused by the fence. The fence
// never goes backwards: the reset is refused with ErrResetClock unless Redis
// time is past the key's highest fence, and a claim after it takes its fence
// from Redis time.
func (s *Store) Reset(ctx context.Context, k string, force bool) (ResetResult, error) {
	if err := ValidateKey(k, s.cfg.maxKey); err != nil {
		return ResetResult{}, err
	}
	h := hashKey(k)
	tag := s.tag(&h)
	others, err := s.otherLayouts(ctx, false)
	if err != nil {
		return ResetResult{}, fmt.Errorf("idempotency: reset: %w", err)
	}
	// The buckets Lookup reads: every one a claim may find the record in.
	base, n := s.windowRange(s.cfg.windows, true)
	keys := []string{s.m.Key(tag + ":" + k), s.detailsKey(tag, k), s.resultKey(tag, k), s.historyKey(tag, k)}
	for i := range n {
		keys = append(keys, s.bucketKey(tag, base+int64(i)))
	}
	for _, o := range s.otherWindows(others) {
		keys = append(keys, s.otherBucketKey(tag, o[0], o[1]))
	}
	f := "0"
	if force {
		f = "1"
	}
	res, err := scripts.IdemReset.Run(ctx, s.c, keys, h.field(), f, s.historyMax(), s.historyTTL().Milliseconds()).Int64Slice()
	if err != nil {
		return ResetResult{}, fmt.Errorf("idempotency: reset: %w", classify(err))
	}
	if len(res) < 3 {
		return ResetResult{}, fmt.Errorf("idempotency: reset: unexpected reply %v", res)
	}
	switch res[0] {
	case scripts.IdemResetDone:
		r := ResetResult{Fence: uint64(max(res[1], 0)), LeaseEnded: len(res) > 3 && res[3] == 1}
		if res[2] > 0 && res[2] <= int64(Failed) {
			r.State = State(res[2]) //nolint:gosec // bounded by the line above
		}
		return r, nil
	case scripts.IdemResetHeld:
		return ResetResult{}, &ResetHeldError{Key: k, Fence: uint64(max(res[2], 0)),
			Remaining: time.Duration(max(res[1], 0)) * time.Millisecond}
	case scripts.IdemResetClock:
		return ResetResult{}, fmt.Errorf("%w: fence %d, Redis time %d µs", ErrResetClock, res[1], res[2])
	}
	return ResetResult{}, fmt.Errorf("idempotency: reset: unknown status %d", res[0])
}

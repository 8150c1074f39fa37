package idempotency

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/outcome"
)

// DefaultHistory is how many attempts of a key its history keeps by default
// ([WithHistory]).
const DefaultHistory = 16

// MaxHistoryType is the most bytes of a job type an attempt's history entry
// keeps ([Attempt.Type]); a longer type is cut at a character boundary.
const MaxHistoryType = 128

// historyType returns the job type t as a history entry keeps it: its first
// MaxHistoryType bytes, without a split character.
func historyType(t string) string {
	if len(t) <= MaxHistoryType {
		return t
	}
	return strings.ToValidUTF8(t[:MaxHistoryType], "")
}

// How an attempt ended, as its history tells ([Attempt.End]): the names of
// package outcome, where each is documented, as strings. Prefer the outcome
// constants; these stay for one release. EndFailed means a terminal failure
// only: a retryable one ends with outcome.Retry.
const (
	EndCompleted     = string(outcome.Completed)
	EndFailed        = string(outcome.Failed)
	EndLeaseLost     = string(outcome.LeaseLost)
	EndCommitRefused = string(outcome.CommitRefused)
	EndTakenOver     = string(outcome.TakenOver)
	EndCancelled     = string(outcome.Cancelled)
	EndDeadLettered  = string(outcome.DeadLettered)
	EndUnrecorded    = string(outcome.Unrecorded)
)

// Attempt is one attempt of a key, as its history keeps it.
type Attempt struct {
	Attempt int    `json:"a,omitempty"`
	Fence   uint64 `json:"-"`
	Owner   string `json:"o,omitempty"` // digest of the lease's owner token
	Worker  string `json:"w,omitempty"` // the worker's identity (host and process)
	TraceID string `json:"t,omitempty"` // the attempt's trace, hex
	SpanID  string `json:"sp,omitempty"`
	Type    string `json:"ty,omitempty"` // the job's type (at most MaxHistoryType bytes); "" in entries written before it was kept

	Started time.Time `json:"-"` // Redis time
	Ended   time.Time `json:"-"` // zero while it runs (or its owner died before anyone took over)
	End     string    `json:"-"` // how it ended: one of the End* names, "" while unknown
	// TakenOver is true when another worker took the key over: End is then
	// EndTakenOver, or the owner's own account written after the takeover.
	TakenOver     bool               `json:"-"`
	Compensations []CompensationStep `json:"-"`
}

// CompensationStep is one compensation of a saga step run for an attempt
// (by its owner, a takeover or the recovery sweep), with its outcome.
type CompensationStep struct {
	Step    string `json:"n"`
	Handler string `json:"h,omitempty"`
	Outcome string `json:"o"` // outcome.CompensationSteps: compensated, retry, dead_lettered, superseded
}

// stored is an attempt as the script keeps it.
type stored struct {
	Attempt
	F  string             `json:"f"`
	S  int64              `json:"s,omitempty"`
	E  int64              `json:"e,omitempty"`
	X  string             `json:"x,omitempty"`
	TO int                `json:"to,omitempty"`
	C  []CompensationStep `json:"c,omitempty"`
}

func (s *Store) historyKey(tag, k string) string { return s.cfg.prefix + "idem:h:" + tag + ":" + k }

// historyMax is the most attempts a history keeps, 0 when none is written
// (the scripts' history bound argument).
func (s *Store) historyMax() int { return max(s.cfg.history, 0) }

// historyTTL is how long a key's history is kept: as long as its record.
func (s *Store) historyTTL() time.Duration {
	return s.cfg.retention + s.cfg.retention/time.Duration(s.cfg.windows)
}

// historyOwner is the owner digest a history entry keeps for a lease's
// owner token ("" with no history: nothing is written).
func (s *Store) historyOwner(token string) string {
	if s.cfg.history <= 0 {
		return ""
	}
	return leasing.OwnerDigest(token)
}

// HistoryLen returns how many attempts a key's history keeps (WithHistory).
func (s *Store) HistoryLen() int { return s.cfg.history }

// HistoryStart records the start of an attempt of key k under a.Fence (its
// start time is Redis time). prev, when not 0, is the fence of the attempt a
// takeover replaces: its entry, if it has no end, ends now as taken over.
func (s *Store) HistoryStart(ctx context.Context, k string, a Attempt, prev uint64) error {
	p := ""
	if prev != 0 {
		p = strconv.FormatUint(prev, 10)
	}
	return s.history(ctx, k, a.Fence, "start", a, p)
}

// HistoryEnd records how the attempt of key k under fence ended (an End*
// name), unless another end was written first (a takeover's is replaced).
func (s *Store) HistoryEnd(ctx context.Context, k string, fence uint64, end string) error {
	return s.history(ctx, k, fence, "end", struct {
		X string `json:"x"`
	}{end}, "")
}

// HistoryCompensation records one compensation of a saga step run for the
// attempt of key k under fence.
func (s *Store) HistoryCompensation(ctx context.Context, k string, fence uint64, c CompensationStep) error {
	return s.history(ctx, k, fence, "comp", c, "")
}

func (s *Store) history(ctx context.Context, k string, fence uint64, ev string, v any, prev string) error {
	if s.cfg.history <= 0 || fence == 0 {
		return nil
	}
	if err := ValidateKey(k, s.cfg.maxKey); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("idempotency: history: %w", err)
	}
	h := hashKey(k)
	key := s.historyKey(s.tag(&h), k)
	ttl := s.historyTTL()
	err = scripts.IdemHistory.Run(ctx, s.c, []string{key}, s.cfg.history, ttl.Milliseconds(),
		strconv.FormatUint(fence, 10), ev, string(b), prev).Err()
	if err != nil {
		return fmt.Errorf("idempotency: history: %w", classify(err))
	}
	return nil
}

// History returns the attempts of key k that its history keeps, oldest
// first: at most WithHistory of them, for as long as its record is kept.
func (s *Store) History(ctx context.Context, k string) ([]Attempt, error) {
	if err := ValidateKey(k, s.cfg.maxKey); err != nil {
		return nil, err
	}
	h := hashKey(k)
	raw, err := s.c.LRange(ctx, s.historyKey(s.tag(&h), k), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("idempotency: history: %w", classify(err))
	}
	out := make([]Attempt, 0, len(raw))
	for _, r := range raw {
		var st stored
		if json.Unmarshal([]byte(r), &st) != nil {
			continue // not an entry this version wrote
		}
		a := st.Attempt
		a.Fence, _ = strconv.ParseUint(st.F, 10, 64)
		if st.S > 0 {
			a.Started = time.UnixMilli(st.S)
		}
		if st.E > 0 {
			a.Ended = time.UnixMilli(st.E)
		}
		a.End, a.TakenOver, a.Compensations = st.X, st.TO == 1, st.C
		out = append(out, a)
	}
	return out, nil
}

package idempotency

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

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

// maxHistoryField is the most bytes of a worker identity, a trace ID or a
// span ID that a history entry keeps (the IDs are 32 and 16 hex digits); a
// longer one is cut at a character boundary, so that an entry stays small.
const maxHistoryField = 256

// historyCut returns the first max bytes of v, without a split character.
func historyCut(v string, max int) string {
	if len(v) <= max {
		return v
	}
	return strings.ToValidUTF8(v[:max], "")
}

// historyTail returns the members of the start entry of an attempt under
// lease owner token for request r that the claim script does not know (owner
// digest, worker, trace ID, span ID, job type; empty ones left out), as JSON
// text after the script's own members: `,"o":"…",…`. The script builds the
// entry by appending it ("" with no history: nothing is written). One
// allocation, where the script's encoding of them cost Redis about 2 µs.
func (s *Store) historyTail(token string, r *Request) string {
	if s.cfg.history <= 0 {
		return ""
	}
	var digest [8]byte
	leasing.PutOwnerDigest(digest[:], token)
	w, tid, sid := historyCut(r.Worker, maxHistoryField), historyCut(r.TraceID, maxHistoryField), historyCut(r.SpanID, maxHistoryField)
	ty := historyType(r.Type)
	var b strings.Builder
	b.Grow(len(`,"o":"","w":"","t":"","sp":"","ty":""`) + len(digest) + len(w) + len(tid) + len(sid) + len(ty))
	b.WriteString(`,"o":"`)
	b.Write(digest[:])
	b.WriteByte('"')
	for _, m := range [...]struct{ name, v string }{{`,"w":`, w}, {`,"t":`, tid}, {`,"sp":`, sid}, {`,"ty":`, ty}} {
		if m.v != "" {
			b.WriteString(m.name)
			writeJSONString(&b, m.v)
		}
	}
	return b.String()
}

// writeJSONString writes v to b as a JSON string: '"' and '\' escaped, and
// control characters as \u00XX; other bytes as they are (a reader decodes an
// invalid UTF-8 sequence as U+FFFD).
func writeJSONString(b *strings.Builder, v string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b.WriteString(v[start:i])
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
		start = i + 1
	}
	b.WriteString(v[start:])
	b.WriteByte('"')
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
// The first attempt of a key is kept in its record rather than in the
// history list until another attempt starts (a job done at its first try
// writes no list): History reads the record, then the list, and merges
// them.
func (s *Store) History(ctx context.Context, k string) ([]Attempt, error) {
	if err := ValidateKey(k, s.cfg.maxKey); err != nil {
		return nil, err
	}
	h := hashKey(k)
	tag := s.tag(&h)
	others, err := s.otherLayouts(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("idempotency: history: %w", err)
	}
	// The buckets Lookup reads.
	base, n := s.windowRange(s.cfg.windows, true)
	olds := s.otherWindows(others)
	// One pipeline, the record first: the server runs it in order, and an
	// entry moves only from the record to the list (a claim, a reset), so a
	// move between the two reads leaves it in the list read second, where the
	// merge finds it by its fence. No MULTI: the project's least-privilege
	// ACL (+@read +@write +@scripting) does not allow it.
	p := s.c.Pipeline()
	recs := s.readRecord(ctx, p, tag, &h, base, n, olds)
	list := p.LRange(ctx, s.historyKey(tag, k), 0, -1)
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("idempotency: history: %w", classify(err))
	}
	raw, found := recs.newest()
	return s.mergeHistory(list.Val(), raw, found), nil
}

// mergeHistory returns the attempts of a key from its history list and, if
// found, its record raw (which may keep the first attempt's entry), oldest
// first, at most WithHistory of them.
func (s *Store) mergeHistory(list []string, raw string, found bool) []Attempt {
	out := make([]Attempt, 0, len(list)+1)
	for _, r := range list {
		if a, ok := decodeAttempt([]byte(r)); ok {
			out = append(out, a)
		}
	}
	if found {
		if fence, entry, ok := recordEntry([]byte(raw)); ok {
			out = mergeAttempt(out, fence, entry)
		}
	}
	if len(out) > s.cfg.history && s.cfg.history > 0 {
		out = out[len(out)-s.cfg.history:]
	}
	return out
}

// decodeAttempt parses one history entry as the scripts keep it.
func decodeAttempt(b []byte) (Attempt, bool) {
	var st stored
	if json.Unmarshal(b, &st) != nil {
		return Attempt{}, false // not an entry this version wrote
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
	return a, true
}

// recordEntry returns the fence of a stored record and the history entry it
// carries; ok is false when it carries none (or is damaged: Lookup reports
// that).
func recordEntry(b []byte) (fence uint64, entry []byte, ok bool) {
	if len(b) < headerLen+2 || b[0]&flagEntry == 0 {
		return 0, nil, false
	}
	n := int(binary.BigEndian.Uint16(b[headerLen:]))
	if len(b) < headerLen+2+n {
		return 0, nil, false
	}
	var f [8]byte
	copy(f[1:], b[1:8])
	return binary.BigEndian.Uint64(f[:]), b[headerLen+2 : headerLen+2+n], true
}

// mergeAttempt merges the history entry a record carries, of fence, into
// the attempts read from the list: the list's entry of the same fence keeps
// its own fields and takes the others from the record's (an end, or
// compensation steps, written to the list while the record kept the
// start); without one the record's attempt goes before the list's entries
// of higher fences (fences grow with every attempt of a key, also across a
// reset), which is last but for starts written through HistoryStart.
func mergeAttempt(out []Attempt, fence uint64, entry []byte) []Attempt {
	r, ok := decodeAttempt(entry)
	if !ok || r.Fence != fence {
		return out
	}
	for i := len(out) - 1; i >= 0; i-- {
		a := &out[i]
		if a.Fence != fence {
			continue
		}
		fill(&a.Attempt, r.Attempt)
		fill(&a.Owner, r.Owner)
		fill(&a.Worker, r.Worker)
		fill(&a.TraceID, r.TraceID)
		fill(&a.SpanID, r.SpanID)
		fill(&a.Type, r.Type)
		if a.Started.IsZero() {
			a.Started = r.Started
		}
		if a.End == "" {
			a.Ended, a.End = r.Ended, r.End
		}
		return out
	}
	i := len(out)
	for i > 0 && out[i-1].Fence > fence {
		i--
	}
	return slices.Insert(out, i, r)
}

// fill sets *v to w when *v is its zero value.
func fill[T comparable](v *T, w T) {
	var zero T
	if *v == zero {
		*v = w
	}
}

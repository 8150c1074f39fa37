package idempotency

import (
	"context"
	"encoding/binary"
	"encoding/hex"
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
// longer one is cut at a character boundary, so that an entry stays small
// (its length is one byte in the entry a record carries).
const maxHistoryField = 255

// historyCut returns the first max bytes of v, without a split character.
func historyCut(v string, max int) string {
	if len(v) <= max {
		return v
	}
	return strings.ToValidUTF8(v[:max], "")
}

// The history entry that a record carries for its attempt (a key's first
// attempt: see History), in the binary form that replaced the JSON text
// (records written before keep the JSON text, whose first byte is '{';
// readers take both):
//
//	0       entryBinary
//	1..8    owner digest (8 hex digits)
//	9       flags: entryRawTrace, entryRawSpan
//	        worker, trace ID, span ID, job type: each 1 byte of length n, n bytes
//	        (a raw ID is its 16 or 8 bytes; otherwise the text as given)
//	ended:  end, Redis time in unix milliseconds (48 bits), then how it ended
//	        (an outcome name) to the entry's end
//
// The fence and the attempt are the record's own, and so is the start: a
// record carries the entry only of a claim of a key that had no record and
// no earlier fence, whose fence is the Redis time of the claim in
// microseconds. startEntry makes an open entry; the claim script writes it
// as it is, and the completion appends the end to the same text, which the
// worker sends back (it knows the record carries it: an acquired claim with
// no previous fence). A claim or a reset that moves the entry to the key's
// history list makes it the list's JSON entry there.
const (
	entryBinary   = 1
	entryRawTrace = 1
	entryRawSpan  = 2
)

// startEntry returns the start entry of an attempt under lease owner token
// for request r, in the binary form above ("" with no history: nothing is
// written).
func (s *Store) startEntry(token string, r *Request) string {
	if s.cfg.history <= 0 {
		return ""
	}
	w, tid, sid := historyCut(r.Worker, maxHistoryField), historyCut(r.TraceID, maxHistoryField), historyCut(r.SpanID, maxHistoryField)
	ty := historyType(r.Type)
	var head [10]byte // version, owner digest, flags
	head[0] = entryBinary
	leasing.PutOwnerDigest(head[1:9], token)
	var traceRaw [16]byte
	var spanRaw [8]byte
	var traceB, spanB []byte
	if len(tid) == 32 && hexLower(tid) {
		_, _ = hex.Decode(traceRaw[:], []byte(tid))
		head[9] |= entryRawTrace
		traceB = traceRaw[:]
	}
	if len(sid) == 16 && hexLower(sid) {
		_, _ = hex.Decode(spanRaw[:], []byte(sid))
		head[9] |= entryRawSpan
		spanB = spanRaw[:]
	}
	// One allocation: the entry goes to the claim script and back to the
	// completion as this string.
	var b strings.Builder
	b.Grow(len(head) + 4 + len(w) + len(tid) + len(sid) + len(ty))
	b.Write(head[:])
	writeField(&b, w, nil)
	writeField(&b, tid, traceB)
	writeField(&b, sid, spanB)
	writeField(&b, ty, nil)
	return b.String()
}

// writeField writes a field of the binary entry: raw when not nil, else v
// (at most 255 bytes), after its one-byte length.
func writeField(b *strings.Builder, v string, raw []byte) {
	if raw != nil {
		b.WriteByte(byte(len(raw))) //nolint:gosec // 16 or 8
		b.Write(raw)
		return
	}
	b.WriteByte(byte(len(v))) //nolint:gosec // every field is cut to 255 bytes
	b.WriteString(v)
}

// hexLower reports whether v is lowercase hex digits only (an ID as
// OpenTelemetry writes it, which the entry keeps as raw bytes).
func hexLower(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// decodeBinaryEntry parses a record's binary history entry (layout above)
// of the attempt under fence, attempt number attempt.
func decodeBinaryEntry(b []byte, fence uint64, attempt int) (Attempt, bool) {
	if len(b) < 10 || b[0] != entryBinary || fence > maxFence {
		return Attempt{}, false
	}
	a := Attempt{Fence: fence, Attempt: attempt, Owner: string(b[1:9])}
	a.Started = time.UnixMilli(int64(fence / 1000)) //nolint:gosec // below 2^53, checked above
	flags := b[9]
	rest := b[10:]
	var fields [4][]byte
	for i := range fields {
		if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
			return Attempt{}, false
		}
		fields[i], rest = rest[1:1+int(rest[0])], rest[1+int(rest[0]):]
	}
	a.Worker, a.TraceID, a.SpanID, a.Type = string(fields[0]), string(fields[1]), string(fields[2]), string(fields[3])
	if flags&entryRawTrace != 0 && len(fields[1]) == 16 {
		a.TraceID = hex.EncodeToString(fields[1])
	}
	if flags&entryRawSpan != 0 && len(fields[2]) == 8 {
		a.SpanID = hex.EncodeToString(fields[2])
	}
	switch {
	case len(rest) == 0:
	case len(rest) > 6:
		a.Ended, a.End = time.UnixMilli(uint48(rest[:6])), string(rest[6:])
	default:
		return Attempt{}, false
	}
	return a, true
}

// uint48 reads a big-endian 48-bit number (a time in unix milliseconds).
func uint48(b []byte) int64 {
	var v int64
	for _, c := range b[:6] {
		v = v<<8 | int64(c)
	}
	return v
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
		if r, ok := recordAttempt([]byte(raw)); ok {
			out = mergeAttempt(out, r)
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

// recordAttempt returns the attempt whose history entry a stored record
// carries; ok is false when it carries none (or is damaged: Lookup reports
// that).
func recordAttempt(b []byte) (Attempt, bool) {
	if len(b) < headerLen+2 || b[0]&flagEntry == 0 {
		return Attempt{}, false
	}
	n := int(binary.BigEndian.Uint16(b[headerLen:]))
	if len(b) < headerLen+2+n {
		return Attempt{}, false
	}
	return decodeEntry(b[headerLen+2:headerLen+2+n], uint56(b[1:8]), int(binary.BigEndian.Uint16(b[16:18])))
}

// decodeEntry parses the history entry a record of fence and attempt
// carries: the binary form, or the JSON text of records written before it.
func decodeEntry(entry []byte, fence uint64, attempt int) (Attempt, bool) {
	if len(entry) > 0 && entry[0] == entryBinary {
		return decodeBinaryEntry(entry, fence, attempt)
	}
	r, ok := decodeAttempt(entry)
	if !ok || r.Fence != fence {
		return Attempt{}, false
	}
	return r, true
}

// mergeAttempt merges r, the attempt whose entry a record carries, into
// the attempts read from the list: the list's entry of the same fence keeps
// its own fields and takes the others from the record's (an end, or
// compensation steps, written to the list while the record kept the
// start); without one the record's attempt goes before the list's entries
// of higher fences (fences grow with every attempt of a key, also across a
// reset), which is last but for starts written through HistoryStart.
func mergeAttempt(out []Attempt, r Attempt) []Attempt {
	fence := r.Fence
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

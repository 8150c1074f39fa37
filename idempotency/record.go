package idempotency

import (
	"encoding/binary"
	"fmt"
	"time"
)

// State is the state of an idempotency record.
type State uint8

// Record states. A key without a record is absent.
const (
	// Processing: an attempt holds (or held, until its lease expired) the key.
	Processing State = 1
	// Released: the last attempt ended without an outcome (a retryable
	// failure, or a hold); the next claim runs the key again.
	Released State = 2
	// Completed: the key ran to completion; its result is replayed.
	Completed State = 3
	// Failed: the key failed terminally; the error is replayed like a result.
	Failed State = 4
)

func (s State) String() string {
	switch s {
	case Absent:
		return "ABSENT"
	case Processing:
		return "PROCESSING"
	case Released:
		return "RELEASED"
	case Completed:
		return "COMPLETED"
	case Failed:
		return "FAILED"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Record is the stored state of one idempotency key.
type Record struct {
	State       State
	Fence       uint64      // fence of the attempt that wrote the record
	Fingerprint Fingerprint // payload fingerprint of the key's first claim
	Attempt     int         // attempt number, 1 for the first
	At          time.Time   // Completed and Failed: when (Redis time, second precision)
	Result      []byte      // Completed: the result; Failed: the error text
	HoldUntil   time.Time   // Released by a keep failure: claims are held until then (Redis time)

	// entry is the history entry of the record's attempt when the record
	// carries it (a first attempt, see History): binary (startEntry), or
	// the JSON text of a record written before that form.
	entry []byte
}

// Err returns a *FailedError for a Failed record, and nil otherwise.
func (r Record) Err(key string) error {
	if r.State != Failed {
		return nil
	}
	return &FailedError{Key: key, Message: string(r.Result), Fence: r.Fence, At: r.At}
}

// Binary layout of a record value, big-endian; it is what the Lua scripts
// pack with struct format '>BI7c8I2' followed by the state's tail:
//
//	0      state byte: State, +flagExternal when the result is in its own key
//	1..7   fence (56 bits; fences stay below 2^53)
//	8..15  payload fingerprint
//	16..17 attempt
//	+flagEntry: 18..19 length n of the attempt's history entry, 20..19+n the
//	entry (binary, see startEntry; JSON text in records written before);
//	the state's tail follows it instead of starting at 18
//	Completed/Failed: 18..21 unix seconds, 22.. inline result
//	Released: optionally 18..23 hold-until unix milliseconds (48 bits)
const (
	headerLen    = 18
	outcomeLen   = headerLen + 4
	holdLen      = headerLen + 6
	flagExternal = 16
	flagEntry    = 32
	maxFence     = 1<<53 - 1
)

// encodeRecord returns the stored form of r. external marks a result kept in
// the record's result key (r.Result is then not included).
func encodeRecord(r Record, external bool) []byte {
	b := make([]byte, headerLen, outcomeLen+2+len(r.entry)+len(r.Result))
	b[0] = byte(r.State)
	if external {
		b[0] |= flagExternal
	}
	if r.entry != nil {
		b[0] |= flagEntry
	}
	var f [8]byte
	binary.BigEndian.PutUint64(f[:], r.Fence)
	copy(b[1:8], f[1:])
	copy(b[8:16], r.Fingerprint[:])
	binary.BigEndian.PutUint16(b[16:18], uint16(min(max(r.Attempt, 0), 65535)))
	if r.entry != nil {
		b = binary.BigEndian.AppendUint16(b, uint16(len(r.entry))) //nolint:gosec // entries are far below 64 KiB
		b = append(b, r.entry...)
	}
	switch r.State {
	case Completed, Failed:
		b = binary.BigEndian.AppendUint32(b, uint32(r.At.Unix())) //nolint:gosec // a completion time: positive, below 2^32 until 2106
		if !external {
			b = append(b, r.Result...)
		}
	case Released:
		if !r.HoldUntil.IsZero() {
			var ms [8]byte
			binary.BigEndian.PutUint64(ms[:], uint64(r.HoldUntil.UnixMilli()))
			b = append(b, ms[2:]...)
		}
	}
	return b
}

// decodeRecord parses a stored record value. ext is the content of the
// record's result key, used when the value says the result lives there.
func decodeRecord(b []byte, ext []byte, hasExt bool) (Record, error) {
	if len(b) < headerLen {
		return Record{}, fmt.Errorf("%w: %d bytes, want at least %d", ErrCorrupt, len(b), headerLen)
	}
	var r Record
	external := b[0]&flagExternal != 0
	r.State = State(b[0] &^ (flagExternal | flagEntry))
	if b[0]&^(flagExternal|flagEntry|0x0f) != 0 {
		return Record{}, fmt.Errorf("%w: unknown flags in state byte %#x", ErrCorrupt, b[0])
	}
	r.Fence = uint56(b[1:8])
	copy(r.Fingerprint[:], b[8:16])
	r.Attempt = int(binary.BigEndian.Uint16(b[16:18]))
	if r.Fence > maxFence {
		return Record{}, fmt.Errorf("%w: fence %d above 2^53", ErrCorrupt, r.Fence)
	}
	tail := b[headerLen:]
	if b[0]&flagEntry != 0 {
		if len(tail) < 2 || len(tail) < 2+int(binary.BigEndian.Uint16(tail)) {
			return Record{}, fmt.Errorf("%w: history entry past the end of a %d-byte record", ErrCorrupt, len(b))
		}
		n := 2 + int(binary.BigEndian.Uint16(tail))
		r.entry = append([]byte{}, tail[2:n]...)
		tail = tail[n:]
	}
	if err := decodeTail(&r, len(b), tail, external, ext, hasExt); err != nil {
		return Record{}, err
	}
	return r, nil
}

// decodeTail parses what follows a record's header (and the history entry it
// may carry) for r's state: size is the whole record's, for errors.
func decodeTail(r *Record, size int, tail []byte, external bool, ext []byte, hasExt bool) error {
	switch r.State {
	case Processing:
		if len(tail) != 0 || external {
			return fmt.Errorf("%w: %s record of %d bytes", ErrCorrupt, r.State, size)
		}
	case Released:
		switch {
		case external:
			return fmt.Errorf("%w: released record with an external result", ErrCorrupt)
		case len(tail) == holdLen-headerLen:
			ms := uint64(tail[0])<<40 | uint64(tail[1])<<32 | uint64(tail[2])<<24 | uint64(tail[3])<<16 | uint64(tail[4])<<8 | uint64(tail[5])
			r.HoldUntil = time.UnixMilli(int64(ms)) //nolint:gosec // ms has 48 bits
		case len(tail) != 0:
			return fmt.Errorf("%w: released record of %d bytes", ErrCorrupt, size)
		}
	case Completed, Failed:
		const at = outcomeLen - headerLen // unix seconds, before an inline result
		if len(tail) < at {
			return fmt.Errorf("%w: %s record of %d bytes", ErrCorrupt, r.State, size)
		}
		r.At = time.Unix(int64(binary.BigEndian.Uint32(tail[:at])), 0)
		switch {
		case !external:
			r.Result = append([]byte{}, tail[at:]...)
		case len(tail) != at:
			return fmt.Errorf("%w: inline bytes after an external result flag", ErrCorrupt)
		case !hasExt:
			return fmt.Errorf("%w: the result key of a %s record is missing", ErrCorrupt, r.State)
		default:
			r.Result = append([]byte{}, ext...)
		}
	default:
		return fmt.Errorf("%w: unknown state %d", ErrCorrupt, uint8(r.State))
	}
	return nil
}

// uint56 reads the big-endian 7-byte unsigned integer at the start of b
// (struct format I7).
func uint56[T string | []byte](b T) uint64 {
	var v uint64
	for i := range 7 {
		v = v<<8 | uint64(b[i])
	}
	return v
}

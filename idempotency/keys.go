package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Layout of one idempotency key K (tag = Tag(K), every key in one Cluster slot):
//
//	lease     Manager.Key(tag + ":" + K)                 hash tok/fen, PX = lease TTL
//	bucket    <prefix>idem:b:<tag>:<window start ms>     hash: field = 16-byte hash of K, value = record
//	details   <prefix>idem:d:<tag>:<K>                   string, heartbeat details, PX = retention
//	result    <prefix>idem:r:<tag>:<K>                   string, a result too large to sit in the bucket
//	history   <prefix>idem:h:<tag>:<K>                   list of JSON attempts (history.go), PX = retention
//
// A bucket holds the records of every key of its shard written in its window;
// it expires at window end + retention.

// keyHash is the SHA-256 of an idempotency key: bytes 0..15 name the record
// inside its bucket, bytes 16..19 pick the shard.
type keyHash [sha256.Size]byte

func hashKey(k string) keyHash { return sha256.Sum256([]byte(k)) }

func (h *keyHash) field() string { return string(h[:16]) }

func (h *keyHash) shard(n int) int { return int(binary.BigEndian.Uint32(h[16:20]) % uint32(n)) } //nolint:gosec // New checks shards is 1 to 2^24

// Tag returns the Cluster hash tag shared by every Redis key of idempotency
// key k, braces included (for example "{i:4821}"). Other packages put their
// own keys for k under it (compensation journals) so that a script can touch
// them together with the record.
func (s *Store) Tag(k string) string {
	h := hashKey(k)
	return s.tag(&h)
}

func (s *Store) tag(h *keyHash) string {
	var buf [16]byte // "{i:" + up to 8 digits (shards <= 2^24) + "}": one allocation, the string
	b := strconv.AppendInt(append(buf[:0], "{i:"...), int64(h.shard(s.cfg.shards)), 10)
	return string(append(b, '}'))
}

// LeaseName returns the name of the lease that guards key k, as given to the
// lease.Manager; Manager.Key(LeaseName(k)) is its Redis key.
func (s *Store) LeaseName(k string) string { return s.Tag(k) + ":" + k }

func (s *Store) bucketKey(tag string, window int64) string {
	return s.cfg.prefix + "idem:b:" + tag + ":" + s.windowName(window)
}

// windowNames holds the decimal start, in ms, of consecutive windows from
// first: a claim names a bucket for every window it reads, and the windows in
// use change once per window length.
type windowNames struct {
	first int64
	names [8]string
}

// windowName returns window index w's start in ms, in decimal.
func (s *Store) windowName(w int64) string {
	if c := s.names.Load(); c != nil && w >= c.first && w < c.first+int64(len(c.names)) {
		return c.names[w-c.first]
	}
	// Claims use the windows before the current one, and one after near a
	// window's end (windowRange).
	c := &windowNames{first: w - 4}
	for i := range c.names {
		c.names[i] = strconv.FormatInt((c.first+int64(i))*s.window.Milliseconds(), 10)
	}
	s.names.Store(c)
	return c.names[4]
}

func (s *Store) detailsKey(tag, k string) string { return s.cfg.prefix + "idem:d:" + tag + ":" + k }

func (s *Store) resultKey(tag, k string) string { return s.cfg.prefix + "idem:r:" + tag + ":" + k }

// ValidateKey reports whether k can be used as an idempotency key: not empty,
// at most max bytes, valid UTF-8, and free of control characters (C0, DEL and
// C1) and white space (unicode.IsSpace), so that a key reads the same in a log
// line, a shell and a header. It returns a *KeyError otherwise. It is the one
// implementation of the rule: leasehold.ValidateKey and ValidateType call it.
func ValidateKey(k string, max int) error {
	switch {
	case k == "":
		return &KeyError{Key: k, Reason: "empty"}
	case len(k) > max:
		return &KeyError{Key: k, Reason: "longer than " + strconv.Itoa(max) + " bytes (" + strconv.Itoa(len(k)) + ")"}
	case !utf8.ValidString(k):
		return &KeyError{Key: k, Reason: "not valid UTF-8"}
	}
	for i, r := range k {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return &KeyError{Key: k, Reason: "control character " + strconv.QuoteRune(r) + " at byte " + strconv.Itoa(i)}
		}
		if unicode.IsSpace(r) {
			return &KeyError{Key: k, Reason: "white space " + strconv.QuoteRune(r) + " at byte " + strconv.Itoa(i)}
		}
	}
	return nil
}

package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Layout of one idempotency key K (tag = Tag(K), every key in one Cluster slot):
//
//	lease     Manager.Key(tag + ":" + K)                 string "<token> <fence> <ttl ms>", PX = lease TTL
//	bucket    <prefix>idem:b:<tag>:<window start ms>     hash: field = 16-byte hash of K, value = record;
//	                                                     field "" = the bucket's mark, its expiry (idem_claim.lua)
//	details   <prefix>idem:d:<tag>:<K>                   string, heartbeat details, PX = retention
//	result    <prefix>idem:r:<tag>:<K>                   string, a result too large to sit in the bucket
//	history   <prefix>idem:h:<tag>:<K>                   list of JSON attempts (history.go), PX = retention
//	cancel    <prefix>idem:x:<tag>:<K>                   string, the fence an operator cancelled, PX = retention
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
	return string(s.appendTag(buf[:0], h))
}

func (s *Store) appendTag(b []byte, h *keyHash) []byte {
	b = strconv.AppendInt(append(b, "{i:"...), int64(h.shard(s.cfg.shards)), 10)
	return append(b, '}')
}

// setClaimKeys fills c's tag and names (claimKeys, but for the bucket) for
// its key and hash: the tag, the lease name (tag + ":" + K), the details,
// result, history and cancel mark keys, the record's field, the fingerprint's bytes and
// the lease TTL in ms (as the claim script takes them) and, over the Redis
// lease backend, the lease key are substrings of one string, one allocation
// for all of them (any other backend's Manager names the lease key).
func (s *Store) setClaimKeys(c *Claim) {
	var tb [16]byte
	tag, p, k := s.appendTag(tb[:0], &c.h), s.cfg.prefix, c.Key
	const kinds = "idem:d:idem:r:idem:h:idem:x:" // four prefixes of the same length
	per := len(p) + len(kinds)/4 + len(tag) + 1 + len(k)
	leaseLen := 0
	if s.leasePrefix != "" {
		leaseLen = len(s.leasePrefix) + len(tag) + 1 + len(k)
	}
	var b strings.Builder
	b.Grow(len(tag) + 1 + len(k) + 4*per + 16 + len(c.fp) + 20 + leaseLen)
	b.Write(tag)
	b.WriteByte(':')
	b.WriteString(k)
	name := b.Len()
	for i := range 4 {
		b.WriteString(p)
		b.WriteString(kinds[i*7 : i*7+7])
		b.Write(tag)
		b.WriteByte(':')
		b.WriteString(k)
	}
	b.Write(c.h[:16])
	b.Write(c.fp[:])
	ttl := b.Len()
	var nb [20]byte
	b.Write(strconv.AppendInt(nb[:0], c.ttl.Milliseconds(), 10))
	lease := b.Len()
	if s.leasePrefix != "" {
		// The lease key: the Manager's prefix, then the name (its tag is a
		// hash tag: leasing.TaggedKeyPrefix).
		b.WriteString(s.leasePrefix)
		b.Write(tag)
		b.WriteByte(':')
		b.WriteString(k)
	}
	all := b.String()
	at := func(i int) string { return all[name+i*per : name+(i+1)*per] }
	c.tag, c.name = all[:len(tag)], all[:name]
	c.keys = claimKeys{lease: all[lease:], details: at(0), result: at(1), history: at(2), cancel: at(3),
		field: all[name+4*per : name+4*per+16], fp: all[name+4*per+16 : ttl], ttl: all[ttl:lease]}
	if s.leasePrefix == "" {
		c.keys.lease = s.m.Key(c.name)
	}
}

// bucketKeys returns the bucket keys of c's tag for the windows
// base..base+n-1, built once for a claim (one allocation for their bytes and
// one for the slice) and kept in c.buckets for its later writes
// (bucketKeyOf).
func (c *Claim) bucketKeys(s *Store, base int64, n int) []string {
	if c.buckets.base == base && len(c.buckets.keys) == n {
		return c.buckets.keys
	}
	var b strings.Builder
	b.Grow(n * (len(s.cfg.prefix) + len("idem:b:") + len(c.tag) + 1 + 14))
	ends := make([]int, 0, 8)
	for w := base; w < base+int64(n); w++ {
		b.WriteString(s.cfg.prefix)
		b.WriteString("idem:b:")
		b.WriteString(c.tag)
		b.WriteByte(':')
		b.WriteString(s.windowName(w))
		ends = append(ends, b.Len())
	}
	all, keys, from := b.String(), make([]string, n), 0
	for i, e := range ends {
		keys[i], from = all[from:e], e
	}
	c.buckets.base, c.buckets.keys = base, keys
	return keys
}

// bucketKeyOf returns the bucket key of c's tag for window w: kept from the
// claim when it named that window, built otherwise.
func (s *Store) bucketKeyOf(c *Claim, w int64) string {
	if i := w - c.buckets.base; i >= 0 && i < int64(len(c.buckets.keys)) {
		return c.buckets.keys[i]
	}
	return s.bucketKey(c.tag, w)
}

// bucketKeyArg is bucketKeyOf as a script key: a pointer to the kept key
// when the claim named window w (scriptCall).
func (s *Store) bucketKeyArg(c *Claim, w int64) any {
	if i := w - c.buckets.base; i >= 0 && i < int64(len(c.buckets.keys)) {
		return arg(&c.buckets.keys[i])
	}
	return s.bucketKey(c.tag, w)
}

// LeaseName returns the name of the lease that guards key k, as given to the
// lease.Manager; Manager.Key(LeaseName(k)) is its Redis key.
func (s *Store) LeaseName(k string) string { return s.Tag(k) + ":" + k }

// CancelMarkKey returns the Redis key of k's cancel mark: the fence of the
// attempt an operator cancelled, written with the lease's cancel request
// (package inspect) and kept for the record's retention. A claim after that
// attempt, if it ended before recording the cancel, finds it and is covered
// (Claim.Cancelled).
func (s *Store) CancelMarkKey(k string) string { return s.cfg.prefix + "idem:x:" + s.Tag(k) + ":" + k }

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

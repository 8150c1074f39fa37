package jobtrace

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Redaction says how an idempotency key (and a Kafka record key) appears in
// span attributes.
type Redaction int

const (
	// KeyHashed records "sha256:" and the first 16 hex digits of the key's
	// SHA-256, or "hmac-sha256:..." when [WithKeyHashSecret] is set. Equal keys
	// hash equally, so one job's attempts can still be found. Without a
	// secret, a guessable key (an e-mail address, an order number) can be
	// found by hashing candidates: set a secret for those.
	KeyHashed Redaction = iota
	// KeyFull records the key as is (truncated to 256 bytes).
	KeyFull
	// KeyOmitted records no key at all.
	KeyOmitted
)

// String returns "hash", "full" or "none".
func (r Redaction) String() string {
	switch r {
	case KeyHashed:
		return "hash"
	case KeyFull:
		return "full"
	case KeyOmitted:
		return "none"
	}
	return "Redaction(" + strconv.Itoa(int(r)) + ")"
}

// ParseRedaction parses "hash", "full" or "none" (also "omit"), as a
// command-line flag or environment variable would give it.
func ParseRedaction(s string) (Redaction, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "hash", "hashed":
		return KeyHashed, nil
	case "full":
		return KeyFull, nil
	case "none", "omit", "omitted":
		return KeyOmitted, nil
	}
	return 0, &ConfigError{Setting: "key redaction", Value: truncate(s, 32)}
}

// maxKeyLen bounds a key recorded in full.
const maxKeyLen = 256

// maxNameLen bounds a job type in span names and metric labels.
const maxNameLen = 64

// redactor applies a Redaction.
type redactor struct {
	mode   Redaction
	secret []byte
}

// redact returns the key's recorded form and whether to record it at all.
func (r redactor) redact(key string) (string, bool) {
	switch r.mode {
	case KeyFull:
		return truncate(key, maxKeyLen), true
	case KeyOmitted:
		return "", false
	}
	var buf [len("hmac-sha256:") + 16]byte // the recorded form: one allocation, the string
	if len(r.secret) > 0 {
		h := hmac.New(sha256.New, r.secret)
		h.Write([]byte(key))
		return string(hex.AppendEncode(append(buf[:0], "hmac-sha256:"...), h.Sum(nil)[:8])), true
	}
	sum := sha256.Sum256([]byte(key))
	return string(hex.AppendEncode(append(buf[:0], "sha256:"...), sum[:8])), true
}

// scrub replaces the key in s by its recorded form, so that an error message
// that quotes the key does not undo the redaction.
func (r redactor) scrub(s, key string) string {
	if r.mode == KeyFull || len(key) < 3 || !strings.Contains(s, key) {
		return s
	}
	red, ok := r.redact(key)
	if !ok {
		red = "[redacted]"
	}
	return strings.ReplaceAll(s, key, red)
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence, and
// replaces invalid UTF-8.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// KeyAttribute returns the value the spans of t record for idempotency key
// key (attribute [AttrIdempotencyKey]), as its [Redaction] makes it, and
// false when they record none. A nil Tracer answers with the default,
// [KeyHashed] without a secret. A trace search by key (the console's links)
// must use this form, not the key.
func (t *Tracer) KeyAttribute(key string) (string, bool) {
	if t == nil {
		return redactor{mode: KeyHashed}.redact(key)
	}
	return t.cfg.redact.redact(key)
}

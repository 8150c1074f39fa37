package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
)

// Fingerprint identifies a payload: a claim of a key that already has a record
// with another fingerprint is a Mismatch (the same key was reused for a
// different request). 64 bits: enough to tell payloads apart, not a security
// boundary.
type Fingerprint [8]byte

// Fingerprinter computes the fingerprint of a message payload.
type Fingerprinter func(payload []byte) (Fingerprint, error)

// PayloadFingerprint is the default Fingerprinter: the first 8 bytes of the
// SHA-256 of the whole payload.
func PayloadFingerprint(payload []byte) (Fingerprint, error) {
	return hashFingerprint(payload), nil
}

func hashFingerprint(b []byte) Fingerprint {
	sum := sha256.Sum256(b)
	var f Fingerprint
	copy(f[:], sum[:8])
	return f
}

// FieldsFingerprint returns a Fingerprinter over selected fields of a JSON
// object payload, so that fields which legitimately differ between deliveries
// (a timestamp, a trace id) do not cause a Mismatch. Each path names a field,
// with dots for nested objects ("order.id"). Values are compared in canonical
// form (object keys sorted, numbers as written); a missing field differs from
// a null one. A payload that is not a JSON object is an error.
func FieldsFingerprint(paths ...string) Fingerprinter {
	split := make([][]string, len(paths))
	for i, p := range paths {
		split[i] = strings.Split(p, ".")
	}
	return func(payload []byte) (Fingerprint, error) {
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.UseNumber()
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			return Fingerprint{}, fmt.Errorf("idempotency: fingerprint fields: payload is not a JSON object: %w", err)
		}
		var buf []byte
		for i, path := range split {
			buf = binary.AppendUvarint(buf, uint64(len(paths[i])))
			buf = append(buf, paths[i]...)
			v, ok := lookup(doc, path)
			if !ok {
				buf = append(buf, 0)
				continue
			}
			enc, err := json.Marshal(v)
			if err != nil {
				return Fingerprint{}, fmt.Errorf("idempotency: fingerprint field %q: %w", paths[i], err)
			}
			buf = append(buf, 1)
			buf = binary.AppendUvarint(buf, uint64(len(enc)))
			buf = append(buf, enc...)
		}
		return hashFingerprint(buf), nil
	}
}

func lookup(doc map[string]any, path []string) (any, bool) {
	var cur any = doc
	for _, name := range path {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[name]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// FuncFingerprint returns a Fingerprinter that hashes the bytes f derives from
// the payload (for example a canonical encoding of the request's business
// fields).
func FuncFingerprint(f func(payload []byte) ([]byte, error)) Fingerprinter {
	return func(payload []byte) (Fingerprint, error) {
		b, err := f(payload)
		if err != nil {
			return Fingerprint{}, fmt.Errorf("idempotency: fingerprint func: %w", err)
		}
		return hashFingerprint(b), nil
	}
}

package leasehold

import (
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/idempotency"
)

// FuzzRecordEnvelope feeds arbitrary Kafka headers and payloads through the
// envelope code: the producer's Record and the consumer's header reading and
// key/type validation. A key the worker accepts must be one the idempotency
// store accepts too (or every claim of it would fail), and Record must carry
// exactly the key and type it validated, whatever headers the caller passes.
// (The dead-letter copy has its own fuzz test, in internal/deadletter.)
func FuzzRecordEnvelope(f *testing.F) {
	f.Add("order-1", "demo.transfer", []byte(`{"from":"a","to":"b","amount":1}`), "trace", []byte("x"), "dlq-reason", []byte("old"))
	f.Add("", "demo.sleep", []byte{}, "idempotency-key", []byte("smuggled"), "job-type", []byte("other"))
	f.Add("a b", "t\x00", []byte{0xff}, "dlq-original-offset", []byte("-1"), "", []byte(nil))
	f.Add("{tag}*?[x]", "' .. redis.call('FLUSHALL') .. '", []byte("payload"), "k", []byte("v"), "k", []byte("v2"))
	f.Add("caf\xc3", "\u0085", []byte(nil), "x", []byte(nil), "y", []byte(nil))
	f.Fuzz(func(t *testing.T, key, typ string, payload []byte, h1 string, v1 []byte, h2 string, v2 []byte) {
		keyOK, typOK := ValidateKey(key) == nil, ValidateType(typ) == nil
		if keyOK {
			if err := idempotency.ValidateKey(key, 512); err != nil {
				t.Fatalf("worker accepts key %q that the idempotency store refuses: %v", key, err)
			}
			if len(key) > MaxKeyLen || !utf8.ValidString(key) {
				t.Fatalf("accepted key %q breaks the documented bounds", key)
			}
		} else if err := ValidateKey(key); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("ValidateKey(%q) = %v, want ErrInvalidKey", key, err)
		}

		// Producer side: Record refuses what validation refuses, and
		// otherwise stamps the key and type exactly once, ahead of the
		// caller's headers (which cannot override them).
		r, err := KafkaRecord(t.Context(), NewJob{Type: typ, Key: key, Payload: payload, Topic: "t",
			Headers: map[string]string{h1: string(v1), h2: string(v2)}})
		switch {
		case !typOK && err == nil:
			t.Fatalf("Record accepted type %q", typ)
		case typOK && key != "" && !keyOK && err == nil:
			t.Fatalf("Record accepted key %q", key)
		case err == nil:
			gotKey := string(headerValue(r.Headers, HeaderKey))
			if key != "" && gotKey != key {
				t.Fatalf("record key header %q, want %q", gotKey, key)
			}
			if got := string(headerValue(r.Headers, HeaderType)); got != typ {
				t.Fatalf("record type header %q, want %q", got, typ)
			}
			if n := countHeader(r.Headers, HeaderKey) + countHeader(r.Headers, HeaderType); n != 2 {
				t.Fatalf("record has %d key/type headers, want 2", n)
			}
			for k := range userHeaders(r.Headers) {
				if k == HeaderKey || k == HeaderType {
					t.Fatalf("user headers expose %q", k)
				}
			}
		}

		// Consumer side: a record as it may arrive from any producer.
		in := &kgo.Record{Topic: "jobs", Partition: 3, Offset: 42, Key: []byte(key), Value: payload,
			Headers: []kgo.RecordHeader{{Key: h1, Value: v1}, {Key: HeaderKey, Value: []byte(key)}, {Key: h2, Value: v2}}}
		if got := string(headerValue(in.Headers, HeaderKey)); h1 != HeaderKey && got != key {
			t.Fatalf("header %q read as %q, want %q", HeaderKey, got, key)
		}
	})
}

func countHeader(hs []kgo.RecordHeader, key string) int {
	n := 0
	for _, h := range hs {
		if h.Key == key {
			n++
		}
	}
	return n
}

package idempotency

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/lease"
)

// FuzzDecodeRecord feeds arbitrary bytes to the decoder of records read back
// from Redis. It must never panic, and every value it accepts must be
// exactly what encodeRecord writes for the decoded record, so that no two
// stored forms mean the same record and nothing is silently dropped.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range []Record{
		{State: Processing, Fence: 1, Attempt: 1},
		{State: Released, Fence: maxFence, Attempt: 65535},
		{State: Completed, Fence: 1 << 40, Attempt: 2, Result: []byte("ok")},
		{State: Failed, Fence: 7, Attempt: 3, Result: []byte("card declined")},
		{State: Completed, Fence: 8, Attempt: 1, Result: []byte("ok"), entry: []byte(`{"f":"8","x":"completed"}`)},
		{State: Released, Fence: 8, Attempt: 1, HoldUntil: time.UnixMilli(1795316743123), entry: []byte(`{"f":"8"}`)},
	} {
		f.Add(encodeRecord(r, false), []byte(nil), false)
	}
	f.Add(encodeRecord(Record{State: Completed, Fence: 9, Attempt: 1}, true), []byte("big result"), true)
	f.Add([]byte{}, []byte(nil), false)
	f.Add(bytes.Repeat([]byte{0xff}, headerLen+6), []byte(nil), false)
	f.Fuzz(func(t *testing.T, b, ext []byte, hasExt bool) {
		r, err := decodeRecord(b, ext, hasExt)
		if err != nil {
			if r.State != 0 || r.Result != nil {
				t.Fatalf("error %v with a non-empty record %+v", err, r)
			}
			return
		}
		if r.Fence > maxFence {
			t.Fatalf("accepted fence %d above 2^53", r.Fence)
		}
		external := b[0]&flagExternal != 0
		if got := encodeRecord(r, external); !bytes.Equal(got, b) {
			t.Fatalf("decode then encode changed the value:\n in  %x\n out %x", b, got)
		}
		again, err := decodeRecord(encodeRecord(r, external), ext, hasExt)
		if err != nil {
			t.Fatalf("re-decoding an accepted record: %v", err)
		}
		if diff := cmp.Diff(r, again, cmp.AllowUnexported(Record{})); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

// FuzzValidateKey checks key validation against its specification, and
// that an accepted key, whatever Redis or Lua metacharacters it holds, never
// changes which Cluster slot its Redis keys land in: the first {...} of every
// key built for it is the store's own hash tag.
func FuzzValidateKey(f *testing.F) {
	for _, k := range []string{
		"order-1", "", "a\x00b", "\x7f", "\u0085", "caf\xc3", "{x}", "}{", "*?[a-z]", "' .. redis.call('FLUSHALL') .. '",
		"lease:{other}", strings.Repeat("k", 512), strings.Repeat("k", 513), "日本語", "a b\tc",
	} {
		f.Add(k, 512)
	}
	s := &Store{cfg: cfg{shards: 16, prefix: "lh:"}}
	// The Manager only names keys here; it never connects.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer func() { _ = c.Close() }()
	m, err := lease.NewManager(c, lease.WithPrefix("lh:"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, k string, limit int) {
		if limit < 0 || limit > 1<<16 {
			return
		}
		err := ValidateKey(k, limit)
		want := k != "" && len(k) <= limit && utf8.ValidString(k)
		for _, r := range k {
			if r < 0x20 || (r >= 0x7f && r <= 0x9f) || unicode.IsSpace(r) {
				want = false
			}
		}
		if (err == nil) != want {
			t.Fatalf("ValidateKey(%q, %d) = %v, want accepted=%v", k, limit, err, want)
		}
		if err != nil {
			if msg := err.Error(); !utf8.ValidString(msg) || strings.ContainsAny(msg, "\x00\r\n") {
				t.Fatalf("error message is not safe to log: %q", msg)
			}
			return
		}
		tag := s.Tag(k)
		for _, key := range []string{m.Key(s.LeaseName(k)), s.detailsKey(tag, k), s.resultKey(tag, k)} {
			i := strings.IndexByte(key, '{')
			j := strings.IndexByte(key[i+1:], '}')
			if i < 0 || j < 0 || key[i:i+j+2] != tag {
				t.Fatalf("key %q for %q: first hash tag is not the store's %q", key, k, tag)
			}
		}
	})
}

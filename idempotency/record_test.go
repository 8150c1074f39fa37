package idempotency

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Unix(1795316743, 0)
	for _, r := range []Record{
		{State: Processing, Fence: 1795316743110062, Fingerprint: fp("a"), Attempt: 1},
		{State: Released, Fence: 7, Fingerprint: fp("b"), Attempt: 3},
		{State: Released, Fence: 7, Fingerprint: fp("b"), Attempt: 3, HoldUntil: time.UnixMilli(1795316743123)},
		{State: Completed, Fence: maxFence, Fingerprint: fp("c"), Attempt: 65535, At: at, Result: []byte{}},
		{State: Completed, Fence: 9, Fingerprint: fp("c"), Attempt: 2, At: at, Result: []byte("result")},
		{State: Failed, Fence: 9, Fingerprint: fp("c"), Attempt: 2, At: at, Result: []byte("declined")},
		{State: Processing, Fence: 11, Fingerprint: fp("d"), Attempt: 1, entry: []byte(`{"f":"11","a":1}`)},
		{State: Released, Fence: 11, Fingerprint: fp("d"), Attempt: 1, entry: []byte(`{"f":"11"}`), HoldUntil: time.UnixMilli(1795316743123)},
		{State: Completed, Fence: 11, Fingerprint: fp("d"), Attempt: 1, entry: []byte(`{"f":"11","x":"completed"}`), At: at, Result: []byte("r")},
	} {
		got, err := decodeRecord(encodeRecord(r, false), nil, false)
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", r, err)
		}
		if diff := cmp.Diff(r, got, cmp.AllowUnexported(Record{})); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	}
	ext := Record{State: Completed, Fence: 9, Fingerprint: fp("c"), Attempt: 1, At: at, Result: []byte("big")}
	b := encodeRecord(ext, true)
	if len(b) != outcomeLen {
		t.Fatalf("external record of %d bytes, want %d", len(b), outcomeLen)
	}
	if _, err := decodeRecord(b, nil, false); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("external record without its result key: %v", err)
	}
	got, err := decodeRecord(b, []byte("big"), true)
	if err != nil || string(got.Result) != "big" {
		t.Fatalf("external record: %+v, %v", got, err)
	}
}

// TestRecordLayoutMatchesLua checks that the bytes the scripts store decode
// to what the claim reported, and re-encode to the same bytes.
func TestRecordLayoutMatchesLua(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	c := e.claim(t, "layout", fp("p"), Acquired)
	raw := func() []byte {
		t.Helper()
		v, err := e.c.HGet(ctx, e.s.bucketKey(c.tag, c.window), c.h.field()).Bytes()
		if err != nil {
			t.Fatalf("HGET record: %v", err)
		}
		return v
	}
	check := func(want Record) {
		t.Helper()
		b := raw()
		got, err := decodeRecord(b, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmpRecord); diff != "" {
			t.Fatalf("stored record (-want +got):\n%s", diff)
		}
		if re := encodeRecord(got, false); !bytes.Equal(re, b) {
			t.Fatalf("re-encoded %x, stored %x", re, b)
		}
	}
	// A first attempt's record carries its history entry (idem_claim.lua).
	entry := func(wantEnd string) {
		t.Helper()
		r, err := decodeRecord(raw(), nil, false)
		if err != nil {
			t.Fatal(err)
		}
		a, ok := decodeEntry(r.entry, r.Fence, r.Attempt)
		if !ok || r.entry[0] != entryBinary || a.Fence != c.Fence || a.Attempt != 1 || a.Started.IsZero() || a.Owner == "" || a.End != wantEnd {
			t.Fatalf("carried entry %q: %+v, want fence %d, attempt 1, a start, an owner, end %q", r.entry, a, c.Fence, wantEnd)
		}
	}
	check(Record{State: Processing, Fence: c.Fence, Fingerprint: fp("p"), Attempt: 1})
	entry("")
	if err := e.s.Complete(ctx, c, []byte("out")); err != nil {
		t.Fatal(err)
	}
	check(Record{State: Completed, Fence: c.Fence, Fingerprint: fp("p"), Attempt: 1, Result: []byte("out")})
	entry(EndCompleted)
	r, err := decodeRecord(raw(), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(raw()), outcomeLen+2+len(r.entry)+3; got != want {
		t.Fatalf("completed record of %d bytes, want %d", got, want)
	}
}

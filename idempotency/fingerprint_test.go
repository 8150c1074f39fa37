package idempotency

import (
	"errors"
	"testing"
)

func TestFieldsFingerprint(t *testing.T) {
	t.Parallel()
	f := FieldsFingerprint("order.id", "amount")
	get := func(payload string) Fingerprint {
		t.Helper()
		fp, err := f([]byte(payload))
		if err != nil {
			t.Fatalf("fingerprint of %s: %v", payload, err)
		}
		return fp
	}
	base := get(`{"order":{"id":"o-1","note":"x"},"amount":10,"sent_at":"09:00"}`)
	for _, same := range []string{
		`{"amount":10,"order":{"note":"y","id":"o-1"},"sent_at":"09:05"}`,
		`{"order":{"id":"o-1"},"amount":10}`,
	} {
		if got := get(same); got != base {
			t.Errorf("%s: fingerprint differs though the selected fields are equal", same)
		}
	}
	for _, other := range []string{
		`{"order":{"id":"o-2"},"amount":10}`,
		`{"order":{"id":"o-1"},"amount":11}`,
		`{"order":{"id":"o-1"},"amount":10.0}`,
		`{"order":{"id":"o-1"}}`,
		`{"order":{"id":"o-1"},"amount":null}`,
	} {
		if got := get(other); got == base {
			t.Errorf("%s: same fingerprint though a selected field differs", other)
		}
	}
	if get(`{"order":{"id":"o-1"}}`) == get(`{"order":{"id":"o-1"},"amount":null}`) {
		t.Error("a missing field and a null one give the same fingerprint")
	}
	if _, err := f([]byte(`[1,2]`)); err == nil {
		t.Error("a JSON array was fingerprinted")
	}
}

func TestPayloadAndFuncFingerprint(t *testing.T) {
	t.Parallel()
	a, _ := PayloadFingerprint([]byte("a"))
	b, _ := PayloadFingerprint([]byte("b"))
	if a == b || a == (Fingerprint{}) {
		t.Fatalf("payload fingerprints %x %x", a, b)
	}
	upper := FuncFingerprint(func(p []byte) ([]byte, error) {
		if len(p) == 0 {
			return nil, errors.New("empty")
		}
		return p[:1], nil
	})
	x, _ := upper([]byte("xyz"))
	y, _ := upper([]byte("xab"))
	if x != y {
		t.Fatal("FuncFingerprint did not hash the function's output")
	}
	if _, err := upper(nil); err == nil {
		t.Fatal("the function's error was dropped")
	}
}

package demo_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/demo"
)

// FuzzParseTransfer feeds arbitrary demo.transfer payloads (a Kafka record
// value) to ParseTransfer: it never panics, refuses with ErrInvalidTransfer,
// accepts only distinct accounts of 1..MaxAccountLen bytes of UTF-8 without
// control or format characters, an amount in 1..MaxAmount and a hold in
// 0..MaxHoldMS, and an
// accepted payload re-encodes to one that parses to the same transfer.
func FuzzParseTransfer(f *testing.F) {
	for _, s := range []string{
		`{"from":"a","to":"b","amount":10}`, `{"from":"a","to":"a","amount":10}`, `{"from":"a","to":"b","amount":-1}`,
		`{"from":"a","to":"b","amount":9223372036854775807}`, `{"from":"a","to":"b","amount":9223372036854775808}`,
		`{"from":"","to":"b","amount":1}`, `{"amount":"10"}`, `null`, `[]`, "\xff", ``, `{"from":"a","to":"b","amount":1.5}`,
		`{"from":"a\u0000","to":"b","amount":1,"extra":true}`, `{"from":"a\u001b[31m","to":"b","amount":1}`,
		`{"from":"a\u200e","to":"b","amount":1}`, `{"from":"a","to":"b","amount":1000000000001}`,
		`{"from":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","to":"b","amount":1}`,
		`{"from":"a","to":"b","amount":1,"hold_ms":2000}`, `{"from":"a","to":"b","amount":1,"hold_ms":-1}`,
		`{"from":"a","to":"b","amount":1,"hold_ms":60001}`, `{"from":"a","to":"b","amount":1,"hold_ms":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		a, err := demo.ParseTransfer(payload)
		if err != nil {
			if !errors.Is(err, demo.ErrInvalidTransfer) {
				t.Fatalf("ParseTransfer(%q) err %v, want ErrInvalidTransfer", payload, err)
			}
			return
		}
		if a.From == a.To || a.Amount <= 0 || a.Amount > demo.MaxAmount || a.HoldMS < 0 || a.HoldMS > demo.MaxHoldMS ||
			demo.ValidateAccount(a.From) != nil || demo.ValidateAccount(a.To) != nil {
			t.Fatalf("ParseTransfer(%q) accepted %+v", payload, a)
		}
		for _, name := range []string{a.From, a.To} {
			if name == "" || len(name) > demo.MaxAccountLen || !utf8.ValidString(name) ||
				strings.ContainsFunc(name, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) {
				t.Fatalf("ParseTransfer(%q) accepted the account %q", payload, name)
			}
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		again, err := demo.ParseTransfer(b)
		if err != nil {
			t.Fatalf("re-encoded %q refused: %v", b, err)
		}
		if diff := cmp.Diff(a, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

package demo_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/demo"
)

// FuzzParseTransfer feeds arbitrary demo.transfer payloads (a Kafka record
// value) to ParseTransfer: it never panics, accepts only distinct non-empty
// accounts and a positive amount, and an accepted payload re-encodes to one
// that parses to the same transfer.
func FuzzParseTransfer(f *testing.F) {
	for _, s := range []string{
		`{"from":"a","to":"b","amount":10}`, `{"from":"a","to":"a","amount":10}`, `{"from":"a","to":"b","amount":-1}`,
		`{"from":"a","to":"b","amount":9223372036854775807}`, `{"from":"a","to":"b","amount":9223372036854775808}`,
		`{"from":"","to":"b","amount":1}`, `{"amount":"10"}`, `null`, `[]`, "\xff", ``, `{"from":"a","to":"b","amount":1.5}`,
		`{"from":"a\u0000","to":"b","amount":1,"extra":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		a, err := demo.ParseTransfer(payload)
		if err != nil {
			return
		}
		if a.From == "" || a.To == "" || a.From == a.To || a.Amount <= 0 {
			t.Fatalf("ParseTransfer(%q) accepted %+v", payload, a)
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

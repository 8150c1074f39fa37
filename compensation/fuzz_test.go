package compensation

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/lease"
)

// redisHashTag returns the part of key Redis Cluster hashes: the bytes
// between the first '{' and the first '}' after it when that is not empty,
// else the whole key (the rule from the Redis Cluster specification).
func redisHashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// FuzzParseRef feeds arbitrary journal references (as read back from the
// journal index in Redis) to ParseRef. It must never panic; an accepted
// reference round-trips through String, and every Redis key built for it
// (journal, fence list, compensation lease) hashes to the same Cluster slot
// as the job's own lease key, whatever braces the name holds (names whose
// lease key has no usable hash tag aside).
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{
		"1:{i:7}:order-1", "1795319212495155:job", "0:job", ":job", "1:", "x:job", "18446744073709551616:job",
		"7:a{}b{c}", "7:}{", "7:{", "7:a}b", "7:{{}}", "-1:job", "+1:job", "1:job:with:colons",
	} {
		f.Add(s)
	}
	r := &Runner{cfg: cfg{prefix: "lh:"}}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := ParseRef(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseRef(%q) = %v, want ErrInvalid", s, err)
			}
			return
		}
		if ref.Fence == 0 || ref.Name == "" {
			t.Fatalf("ParseRef(%q) accepted %+v", s, ref)
		}
		again, err := ParseRef(ref.String())
		if err != nil || again != ref {
			t.Fatalf("round trip of %+v: %+v, %v", ref, again, err)
		}
		leaseKey := lease.KeyFor("lh:", ref.Name)
		want := redisHashTag(leaseKey)
		if want == leaseKey {
			// The name starts with '}', so wrapping it yields an empty
			// tag and Redis hashes each whole key: the journal cannot
			// share its lease's slot. Cluster callers name leases with a
			// tag of their own, as idempotency's "{i:N}:key" names do.
			return
		}
		for _, k := range []string{r.journalKey(ref), r.fencesKey(ref.Name), lease.KeyFor("lh:", compLeaseName(ref))} {
			if got := redisHashTag(k); got != want {
				t.Fatalf("ref %+v: key %q hashes %q, the job lease key hashes %q: cross-slot in a Cluster", ref, k, got, want)
			}
		}
	})
}

type fuzzArgs struct {
	ChargeID string `json:"charge_id"`
	Amount   int64  `json:"amount"`
}

// FuzzHandlerArgs feeds arbitrary encoded arguments (as stored in a journal
// entry) to a registered handler. Undecodable arguments are refused with
// ErrInvalid before the handler runs; decodable ones reach it exactly as
// encoding/json decodes them; nothing panics.
func FuzzHandlerArgs(f *testing.F) {
	for _, s := range []string{
		`{"charge_id":"k/1","amount":10}`, `{}`, `null`, `[]`, `{"amount":"ten"}`, `{"amount":1e400}`,
		`{"charge_id":"\ud800"}`, "\xff", ``, `{"charge_id":"a","extra":{"deep":[1,2,3]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		reg := NewRegistry()
		var got *fuzzArgs
		MustRegister(reg, "refund", func(_ context.Context, a fuzzArgs) error {
			got = &a
			return nil
		})
		err := reg.run(context.Background(), "refund", raw)
		var want fuzzArgs
		if jerr := json.Unmarshal(raw, &want); jerr != nil {
			if !errors.Is(err, ErrInvalid) || got != nil {
				t.Fatalf("undecodable args %q: err %v, handler ran: %v", raw, err, got != nil)
			}
			return
		}
		if err != nil || got == nil {
			t.Fatalf("decodable args %q: err %v, handler ran: %v", raw, err, got != nil)
		}
		if diff := cmp.Diff(want, *got); diff != "" {
			t.Fatalf("args reached the handler changed (-want +got):\n%s", diff)
		}
		if err := reg.run(context.Background(), "unregistered", raw); !errors.Is(err, ErrUnknownHandler) {
			t.Fatalf("unregistered handler: %v, want ErrUnknownHandler", err)
		}
	})
}

package idempotency

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestLookupStates: one batch of keys in every state reads, field for field,
// what Lookup reads of each (heartbeat details and result bytes aside); an
// invalid key gets its error at its index; a batch above the bound is
// refused.
func TestLookupStates(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	e.claim(t, "running", fp("r"), Acquired)
	done := e.claim(t, "done", fp("d"), Acquired)
	if err := e.s.Complete(ctx, done, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	big := e.claim(t, "big", fp("b"), Acquired)
	if err := e.s.Complete(ctx, big, []byte(strings.Repeat("x", 64<<10))); err != nil { // kept in its own key
		t.Fatal(err)
	}
	keys := []string{"running", "done", "big", "never", "bad key"}
	infos, errs, err := e.s.LookupStates(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	var ke *KeyError
	if len(errs) != len(keys) || !errors.As(errs[4], &ke) {
		t.Fatalf("errors %v: want a *KeyError for the invalid key", errs)
	}
	for i, k := range keys[:4] {
		if errs[i] != nil {
			t.Fatalf("%s: %v", k, errs[i])
		}
		want, err := e.s.Lookup(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if k == "big" {
			want.ResultSize = 0 // not read: its result lives in its own key
		}
		opts := cmpopts.IgnoreFields(Info{}, "Remaining", "HasDetails", "Details", "DetailsSize", "DetailsTTL")
		if diff := cmp.Diff(want, infos[i], opts); diff != "" {
			t.Errorf("%s (-Lookup +LookupStates):\n%s", k, diff)
		}
	}
	if infos[1].State != Completed || infos[0].State != Processing || !infos[0].Leased || infos[3].State != Absent {
		t.Errorf("states %v %v %v: want PROCESSING (leased), COMPLETED, ABSENT", infos[0].State, infos[1].State, infos[3].State)
	}
	if _, _, err := e.s.LookupStates(ctx, make([]string, MaxLookupBatch+1)); err == nil {
		t.Error("a batch above MaxLookupBatch was read")
	}
}

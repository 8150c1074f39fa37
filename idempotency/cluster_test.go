package idempotency

import (
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/internal/slot"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestCluster runs batches on a real Redis Cluster: the Store groups keys by
// slot into script calls, so its slot computation must agree with Redis's.
func TestCluster(t *testing.T) {
	t.Parallel()
	cl := testkit.StartCluster(t)
	c := cl.Client(t)
	e := setupOn(t, c, "c:", nil)
	ctx := t.Context()
	for _, k := range []string{"a", "order-42", "{user}:x"} {
		tag := e.s.Tag(k)
		want, err := c.ClusterKeySlot(ctx, e.s.bucketKey(tag, 1)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := slot.Of(tag); int64(got) != want {
			t.Fatalf("slot of %s = %d, Redis says %d", tag, got, want)
		}
	}
	reqs := make([]Request, 300)
	for i := range reqs {
		reqs[i] = Request{Key: fmt.Sprintf("k-%d", i), Fingerprint: fp("p")}
	}
	// Few shards, so that several keys share a slot and a script call.
	e2 := setupOn(t, c, "c2:", []Opt{WithShards(16)})
	for _, st := range []*Store{e.s, e2.s} {
		cs := st.ClaimBatch(ctx, reqs)
		comps := make([]Completion, len(cs))
		for i, cl := range cs {
			if cl.Outcome != Acquired {
				t.Fatalf("cluster claim %s: %v %v", cl.Key, cl.Outcome, cl.Err)
			}
			comps[i] = Completion{Claim: cl, Result: []byte(cl.Key)}
		}
		for i, err := range st.CompleteBatch(ctx, comps) {
			if err != nil {
				t.Fatalf("cluster complete %d: %v", i, err)
			}
		}
		for _, cl := range st.ClaimBatch(ctx, reqs) {
			if cl.Outcome != Duplicate || string(cl.Record.Result) != cl.Key {
				t.Fatalf("cluster replay %s: %v", cl.Key, cl.Outcome)
			}
		}
	}
}

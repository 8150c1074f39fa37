package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/limit"
)

// TestLimitsCommand: `worker limits` lists a group a worker used with its
// running slots, --hold holds it (shown in --json), --release ends the hold;
// usage errors exit 2.
func TestLimitsCommand(t *testing.T) {
	t.Parallel()
	url, prefix, rdb := sharedRedisURL(t)
	env := map[string]string{"REDIS_URL": url, "LEASEHOLD_PREFIX": prefix}
	ctx := context.Background()
	spec := limit.Spec{Limit: 3}
	if _, err := limit.Acquire(ctx, rdb, prefix, []limit.Request{{Group: "type:t.x", Member: "k1|w1", TTL: time.Minute, Spec: spec}}); err != nil {
		t.Fatal(err)
	}
	if err := limit.Register(ctx, rdb, prefix, map[string]limit.Spec{"type:t.x": spec}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if r := run(ctx, t, env, "limits"); r.code != 0 || !strings.Contains(r.stdout, "type:t.x") || !strings.Contains(r.stdout, "1/3") {
		t.Fatalf("limits: %+v", r)
	}
	if r := run(ctx, t, env, "limits", "--hold", "1m", "type:t.x"); r.code != 0 || !strings.Contains(r.stdout, "held type:t.x") {
		t.Fatalf("limits --hold: %+v", r)
	}
	r := run(ctx, t, env, "limits", "--json")
	var got limitsJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
		t.Fatalf("limits --json: %v %+v", err, r)
	}
	if len(got.Groups) != 1 || got.Groups[0].HeldUntil == nil || got.Groups[0].Running != 1 ||
		len(got.Groups[0].Slots) != 1 || got.Groups[0].Slots[0].Key != "k1" || got.Groups[0].Slots[0].Holder != "w1" {
		t.Fatalf("limits --json: %+v", got)
	}
	if r := run(ctx, t, env, "limits", "--release", "type:t.x"); r.code != 0 || !strings.Contains(r.stdout, "released") {
		t.Fatalf("limits --release: %+v", r)
	}
	wantFailure(t, run(ctx, t, env, "limits", "--hold", "1m"), 2, "exactly one GROUP")
	wantFailure(t, run(ctx, t, env, "limits", "--hold", "1m", "t.x"), 2, "not a limit group name")
	wantFailure(t, run(ctx, t, env, "limits", "--release", ""), 2, "not a limit group name")
}

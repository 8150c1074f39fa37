package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/idempotency"
)

// TestHistoryCommand: `history KEY` prints the key's attempts oldest first,
// the taken-over one marked, with its compensations; --json carries the same.
func TestHistoryCommand(t *testing.T) {
	t.Parallel()
	url, prefix, rdb := sharedRedisURL(t)
	env := map[string]string{"REDIS_URL": url, "LEASEHOLD_PREFIX": prefix}
	ctx := context.Background()
	s := workerStore(t, rdb, prefix)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.HistoryStart(ctx, "pay-1", idempotency.Attempt{Attempt: 1, Fence: 100, Owner: "aaaa1111", Worker: "host-a/1", TraceID: "0af7651916cd43dd8448eb211c80319c"}, 0))
	must(s.HistoryStart(ctx, "pay-1", idempotency.Attempt{Attempt: 2, Fence: 200, Owner: "bbbb2222", Worker: "host-b/2", Type: "payments.transfer"}, 100))
	must(s.HistoryCompensation(ctx, "pay-1", 100, idempotency.CompensationStep{Step: "hold", Handler: "release", Outcome: "compensated"}))
	must(s.HistoryEnd(ctx, "pay-1", 200, idempotency.EndCompleted))

	r := run(ctx, t, env, "history", "pay-1")
	if r.code != 0 {
		t.Fatalf("history: %+v", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	// The first attempt's entry was written without a type (as before types
	// were kept): it reads, with none.
	if len(lines) != 3 || !strings.Contains(lines[0], "TYPE") || strings.Contains(lines[1], "payments.transfer") ||
		!strings.Contains(lines[2], "payments.transfer") || !strings.Contains(lines[1], "taken_over") || !strings.Contains(lines[1], "hold:compensated") ||
		!strings.Contains(lines[1], "0af7651916cd43dd8448eb211c80319c") || !strings.Contains(lines[2], "completed") {
		t.Fatalf("history output:\n%s", r.stdout)
	}
	r = run(ctx, t, env, "history", "--json", "pay-1")
	var out historyJSON
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		t.Fatalf("history --json: %+v", r)
	}
	if len(out.Attempts) != 2 || out.Attempts[0].Fence != 100 || !out.Attempts[0].TakenOver ||
		out.Attempts[0].Type != "" || out.Attempts[1].Type != "payments.transfer" ||
		len(out.Attempts[0].Compensations) != 1 || out.Attempts[1].End != "completed" || out.Attempts[1].Started == nil {
		t.Fatalf("history --json = %+v", out)
	}
	// The console's shape: fences as strings, steps named in full.
	if !strings.Contains(r.stdout, `"fence": "100"`) || !strings.Contains(r.stdout, `"step": "hold"`) || !strings.Contains(r.stdout, `"outcome": "compensated"`) {
		t.Fatalf("history --json: want the fence as a string and the steps in full:\n%s", r.stdout)
	}
	r = run(ctx, t, env, "inspect", "--json", "pay-1")
	if r.code != 0 || !strings.Contains(r.stdout, `"type": "payments.transfer"`) {
		t.Fatalf("inspect --json: want the type from the history: %+v", r)
	}
	if r := run(ctx, t, env, "history", "never-seen"); r.code != 0 || !strings.Contains(r.stdout, "no attempt") {
		t.Fatalf("history of an unknown key: %+v", r)
	}
}

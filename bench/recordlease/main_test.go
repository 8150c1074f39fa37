package main

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestVariantsAnswerAlike runs the checks the measurement relies on for the
// shipped scripts and the prototype, then a small measured run of each, whose
// calls per job must be the counts docs/benchmarks.md gives (9 and 7).
func TestVariantsAnswerAlike(t *testing.T) {
	ctx := context.Background()
	c := testkit.StartRedis(t).Client(t)
	want := map[string]float64{"lease_key": 9, "record_lease": 7}
	for _, v := range newVariants() {
		if err := v.check(ctx, c); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if err := v.measure(ctx, c, 640, 64, 2); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if v.calls[0] != want[v.name] {
			t.Errorf("%s: %.4f calls per job, want %.0f", v.name, v.calls[0], want[v.name])
		}
		if v.cpu[0] <= 0 || v.rate[0] <= 0 {
			t.Errorf("%s: CPU %.2f us per job, %.0f jobs/s: not measured", v.name, v.cpu[0], v.rate[0])
		}
	}
}

// TestCheckCatchesAMissingLeaseCheck shows that check fails a prototype whose
// completion skips the owner check: it is what makes the comparison fair.
func TestCheckCatchesAMissingLeaseCheck(t *testing.T) {
	const ownerCheck = "or string.sub(v, 25) ~= ARGV[a]"
	if !strings.Contains(completeRecordSrc, ownerCheck) {
		t.Fatalf("complete_record.lua has no %q", ownerCheck)
	}
	broken := &variant{name: "broken", record: true, claimScript: claimRecord,
		completeScript: redis.NewScript(strings.Replace(completeRecordSrc, ownerCheck, "", 1))}
	err := broken.check(context.Background(), testkit.StartRedis(t).Client(t))
	if err == nil || !strings.Contains(err.Error(), "complete with another token") {
		t.Fatalf("check of a prototype without the owner check: %v, want a failure at the other token's completion", err)
	}
}

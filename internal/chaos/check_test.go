package chaos

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/leasehold/leasehold/internal/demo"
	"github.com/leasehold/leasehold/internal/paystub"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestCheckFromOutsideEvidence builds the evidence of a run by hand, one job
// per outcome, and checks that each bad outcome is counted where it must be.
func TestCheckFromOutsideEvidence(t *testing.T) {
	t.Parallel()
	db := testkit.Postgres(t)
	ctx := t.Context()
	if err := demo.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	jobs := []Job{
		{Key: "ok", Amount: 5},            // applied once, charged once
		{Key: "zombie", Amount: 7},        // applied once; the zombie's charge refunded
		{Key: "lost", Amount: 3},          // never applied, never charged
		{Key: "twice", Amount: 4},         // balances moved twice
		{Key: "half", Amount: 2},          // debited, not credited
		{Key: "double-charge", Amount: 1}, // applied once, charged under two fences, none refunded
		{Key: "refunded", Amount: 6},      // applied once, its only charge refunded
	}
	moved := map[string]int64{"ok": 1, "zombie": 1, "twice": 2, "double-charge": 1, "refunded": 1}
	for _, j := range jobs {
		from := InitialBalance - moved[j.Key]*j.Amount
		to := InitialBalance + moved[j.Key]*j.Amount
		if j.Key == "half" {
			from, to = InitialBalance-j.Amount, InitialBalance
		}
		if err := demo.OpenAccount(ctx, db, FromAccount(j.Key), from); err != nil {
			t.Fatal(err)
		}
		if err := demo.OpenAccount(ctx, db, ToAccount(j.Key), to); err != nil {
			t.Fatal(err)
		}
		if moved[j.Key] > 0 || j.Key == "half" {
			if _, err := db.Exec(ctx, `INSERT INTO demo_transfers (key, fence, from_id, to_id, amount) VALUES ($1, 1, $2, $3, $4)`,
				j.Key, FromAccount(j.Key), ToAccount(j.Key), j.Amount); err != nil {
				t.Fatal(err)
			}
		}
	}
	ledger := paystub.Ledger{
		Charges: []paystub.Charge{
			{ID: demo.ChargeID("ok", 10)},
			{ID: demo.ChargeID("zombie", 10), Refunded: true},
			{ID: demo.ChargeID("zombie", 11)},
			{ID: demo.ChargeID("twice", 10)},
			{ID: demo.ChargeID("half", 10)},
			{ID: demo.ChargeID("double-charge", 10)},
			{ID: demo.ChargeID("double-charge", 11)},
			{ID: demo.ChargeID("refunded", 10), Refunded: true},
			{ID: "not-a-chaos-charge"},
		},
		RefundsApplied: 2,
	}
	got, err := Check(ctx, Evidence{DB: db, Ledger: ledger}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	want := Figures{
		JobsEnqueued:            7,
		JobsCompleted:           4, // ok, zombie, double-charge, refunded
		JobsLost:                1, // lost
		FencedEffectsDuplicated: 2, // twice, half
		UnfencedNetNotOne:       3, // lost (0), double-charge (2), refunded (0)
		CompensationsRun:        2,
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("figures (-want +got):\n%s", diff)
	}
	if err := got.Err(); err == nil {
		t.Fatal("bad evidence passed the invariants")
	}

	// A job whose accounts were never opened is a harness error, not a
	// figure.
	if _, err := Check(ctx, Evidence{DB: db, Ledger: ledger}, append(jobs, Job{Key: "unknown", Amount: 1})); err == nil {
		t.Fatal("Check accepted a job without accounts")
	}
}

func TestCountStaleFences(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	logA := `time=x level=WARN msg="job failed" err="demo: transfer k1: fence: stale fence 5 for \"demo.transfer:k1\" (newest is 6)"
time=x level=WARN msg="compensating" err="demo: transfer k1: fence: stale fence 5 for \"demo.transfer:k1\" (newest is 6)"
time=x level=INFO msg="nothing to see"
`
	logB := `{"level":"WARN","err":"fence: stale fence 9 for \"demo.transfer:k2\" (newest is 12)"}
plain: fence: stale fence 5 for "demo.transfer:k3" (newest is 6)
`
	for p, s := range map[string]string{a: logA, b: logB} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := CountStaleFences([]string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("stale fences = %d, want 3 distinct (k1/5 logged twice, k2/9, k3/5)", n)
	}
	if _, err := CountStaleFences([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Fatal("missing log not reported")
	}
}

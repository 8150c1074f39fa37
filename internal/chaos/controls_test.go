package chaos

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestAccountCancelled: a cancelled key counts as cancelled whether its
// fenced effect is absent or applied once, never as lost or completed; a
// doubled or half effect is still a duplicated one, and a charge left
// unrefunded is not compensated. An uncancelled key is held to exactly one.
func TestAccountCancelled(t *testing.T) {
	t.Parallel()
	j := Job{Key: "k", Amount: 5}
	for _, tc := range []struct {
		name      string
		moved     int64
		written   bool
		net       int
		cancelled bool
		want      Figures
	}{
		{"cancelled before its write", 0, false, 0, true, Figures{JobsCancelled: 1, CancelledEffectAbsent: 1}},
		{"cancelled after its write", 1, true, 0, true, Figures{JobsCancelled: 1, CancelledEffectApplied: 1}},
		{"cancelled, charge kept", 0, false, 1, true, Figures{JobsCancelled: 1, CancelledEffectAbsent: 1, CancelledNotCompensated: 1}},
		{"cancelled, written twice", 2, true, 0, true, Figures{JobsCancelled: 1, FencedEffectsDuplicated: 1}},
		{"not cancelled, never run", 0, false, 0, false, Figures{JobsLost: 1, UnfencedNetNotOne: 1}},
		{"not cancelled, completed", 1, true, 1, false, Figures{JobsCompleted: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Figures
			f.account(j, tc.moved*j.Amount, tc.moved*j.Amount, tc.written, tc.net, tc.cancelled)
			if d := cmp.Diff(tc.want, f); d != "" {
				t.Errorf("figures (-want +got):\n%s", d)
			}
			if got := len(f.MustBeZero()) > 0; got != (len(tc.want.MustBeZero()) > 0) {
				t.Errorf("must-be-zero %v", f.MustBeZero())
			}
		})
	}
}

// TestPlanControls: the cancelled jobs and the pauses come from the seed,
// the jobs distinct and in the run's middle, one pause in each share of
// the horizon.
func TestPlanControls(t *testing.T) {
	t.Parallel()
	a, b := planCancels(42, 1000, 10), planCancels(42, 1000, 10)
	if !slices.Equal(a, b) || len(a) != 10 || !slices.IsSorted(a) {
		t.Fatalf("cancels %v, %v: want the same 10 sorted indexes twice", a, b)
	}
	for i, x := range a {
		if x < 100 || x >= 800 || i > 0 && x == a[i-1] {
			t.Fatalf("cancels %v: want distinct indexes in [100, 800)", a)
		}
	}
	if c := planCancels(43, 1000, 10); slices.Equal(a, c) {
		t.Errorf("seeds 42 and 43 cancel the same jobs %v", a)
	}
	if got := planCancels(1, 5, 10); len(got) != 4 {
		t.Errorf("5 jobs, 10 cancels: %v, want the 4 of indexes 0 to 3", got)
	}
	if got := planCancels(1, 1000, 0); got != nil {
		t.Errorf("no cancels: %v", got)
	}
	h := 40 * time.Second
	p := planPauses(42, h, 4)
	for k, at := range p {
		lo, hi := h*time.Duration(k)/4, h*time.Duration(k+1)/4
		if at < lo || at >= hi {
			t.Errorf("pause %d at %v, want in [%v, %v)", k, at, lo, hi)
		}
	}
}

// TestConfigControls: the controls' defaults and bounds.
func TestConfigControls(t *testing.T) {
	t.Parallel()
	c := Config{Jobs: 50, Cancels: 10, TypePauses: 1, LeaseTTL: time.Second}
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	if c.Cancels != 5 || c.TypePauseFor != 2*time.Second {
		t.Errorf("cancels %d, pause %v: want 5 (a tenth of the jobs) and 2 lease TTLs", c.Cancels, c.TypePauseFor)
	}
	for _, bad := range []Config{
		{Cancels: -1},
		{TypePauses: 101},
		{TypePauseFor: 200 * time.Millisecond, LeaseTTL: time.Second},
		{TypePauseFor: 2 * time.Minute},
	} {
		if err := bad.Finish(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err %v, want ErrConfig", bad, err)
		}
	}
}

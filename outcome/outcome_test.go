package outcome_test

import (
	"regexp"
	"testing"

	"github.com/leasehold/leasehold/outcome"
)

// TestOutcomeSet: every name is spelled once, in one style, and each group
// is part of All.
func TestOutcomeSet(t *testing.T) {
	style := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	seen := map[outcome.Name]bool{}
	for _, n := range outcome.All() {
		if seen[n] {
			t.Errorf("%q is listed twice in All", n)
		}
		seen[n] = true
		if !style.MatchString(string(n)) {
			t.Errorf("%q is not lower case words joined by underscores", n)
		}
	}
	for _, g := range [][]outcome.Name{outcome.Claims(), outcome.Attempts(), outcome.CompensationSteps()} {
		for _, n := range g {
			if !outcome.Known(string(n)) {
				t.Errorf("%q is in a group but not in All", n)
			}
		}
	}
	if outcome.Known("dead-lettered") || outcome.Known("") {
		t.Error("Known accepts a name outside the set")
	}
}

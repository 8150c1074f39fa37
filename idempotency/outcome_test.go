package idempotency

import "testing"

func TestOutcomeString(t *testing.T) {
	t.Parallel()
	want := map[Outcome]string{0: "error", Acquired: "acquired", Takeover: "takeover", Held: "held",
		Duplicate: "duplicate", Mismatch: "mismatch", Undecodable: "undecodable", Undecodable + 1: "outcome(7)"}
	for o, w := range want {
		if got := o.String(); got != w {
			t.Errorf("Outcome(%d).String() = %q, want %q", uint8(o), got, w)
		}
	}
}

package audit

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/idempotency"
)

// TestAccountExpired: a record whose key has no Redis record is expired when
// it was written longer ago than the retention, unaccounted otherwise, and
// unaccounted whatever its age when no retention is given.
func TestAccountExpired(t *testing.T) {
	began := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		retention time.Duration
		age       time.Duration
		want      Outcome
	}{
		{"older than the retention", time.Minute, 2 * time.Minute, Expired},
		{"within the retention", time.Minute, 30 * time.Second, Unaccounted},
		{"no retention given", 0, 48 * time.Hour, Unaccounted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &auditor{c: Config{Retention: tc.retention}, dead: map[pos]string{}, seen: map[uint64]struct{}{}, began: began}
			p := pending{e: Entry{Key: "k", Time: began.Add(-tc.age)}, hasKey: true}
			if got := a.account(p, &idempotency.Info{State: idempotency.Absent}, nil).Outcome; got != tc.want {
				t.Fatalf("outcome %q, want %q", got, tc.want)
			}
		})
	}
}

package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
)

// TestAttemptMismatch: the attempt-history check passes a history that
// agrees with its record and names each way one can disagree.
func TestAttemptMismatch(t *testing.T) {
	t.Parallel()
	at := time.Unix(1795702025, 0)
	attempt := func(n int, fence uint64, end string) idempotency.Attempt {
		return idempotency.Attempt{Attempt: n, Fence: fence, Worker: "host/1", Started: at, End: end}
	}
	good := inspect.KeyInfo{State: idempotency.Completed, Fence: 30, Attempt: 3, History: []idempotency.Attempt{
		attempt(1, 10, "taken_over"), attempt(2, 20, "retry"), attempt(3, 30, "completed")}}
	if why := attemptMismatch(good, 16); why != "" {
		t.Fatalf("an agreeing history: %s", why)
	}
	bounded := good
	bounded.History = good.History[1:]
	if why := attemptMismatch(bounded, 2); why != "" {
		t.Fatalf("a history at its bound: %s", why)
	}
	for name, c := range map[string]struct {
		edit func(*inspect.KeyInfo)
		want string
	}{
		"an attempt missing":   {func(k *inspect.KeyInfo) { k.History = k.History[1:] }, "keeps 2 attempts"},
		"numbered wrong":       {func(k *inspect.KeyInfo) { k.History[1].Attempt = 5 }, "entry 1 is attempt 5"},
		"fences not rising":    {func(k *inspect.KeyInfo) { k.History[1].Fence = 5 }, "not above"},
		"no start":             {func(k *inspect.KeyInfo) { k.History[0].Started = time.Time{} }, "no start"},
		"another last fence":   {func(k *inspect.KeyInfo) { k.Fence = 31 }, "the record's 31"},
		"finished without end": {func(k *inspect.KeyInfo) { k.History[2].End = "" }, "has no end"},
	} {
		k := good
		k.History = append([]idempotency.Attempt(nil), good.History...)
		c.edit(&k)
		if why := attemptMismatch(k, 16); !strings.Contains(why, c.want) {
			t.Errorf("%s: %q, want it to say %q", name, why, c.want)
		}
	}
}

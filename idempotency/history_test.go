package idempotency

import (
	"testing"
)

// TestHistoryOrderTakeoverBound: the history keeps attempts oldest first; a
// takeover ends the previous attempt as taken over unless it ended, the
// owner's own late account replaces it (TakenOver stays), compensation
// steps join their attempt, and only the last WithHistory attempts stay.
func TestHistoryOrderTakeoverBound(t *testing.T) {
	t.Parallel()
	e := setup(t, []Opt{WithHistory(3)})
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.s.HistoryStart(ctx, "h", Attempt{Attempt: 1, Fence: 10, Owner: "aa", Worker: "w1", TraceID: "t1", SpanID: "s1"}, 0))
	must(e.s.HistoryStart(ctx, "h", Attempt{Attempt: 2, Fence: 20, Owner: "bb", Worker: "w2"}, 10))
	must(e.s.HistoryCompensation(ctx, "h", 10, CompensationStep{Step: "charge", Handler: "refund", Outcome: "compensated"}))
	must(e.s.HistoryEnd(ctx, "h", 10, EndLeaseLost))
	must(e.s.HistoryEnd(ctx, "h", 20, EndCompleted))
	hs, err := e.s.History(ctx, "h")
	must(err)
	if len(hs) != 2 {
		t.Fatalf("history = %+v", hs)
	}
	a, b := hs[0], hs[1]
	if a.Fence != 10 || a.Attempt != 1 || a.End != EndLeaseLost || !a.TakenOver || a.TraceID != "t1" || a.SpanID != "s1" ||
		a.Worker != "w1" || a.Started.IsZero() || a.Ended.IsZero() || len(a.Compensations) != 1 || a.Compensations[0].Outcome != "compensated" {
		t.Fatalf("first attempt = %+v", a)
	}
	if b.Fence != 20 || b.End != EndCompleted || b.TakenOver || b.Ended.Before(b.Started) {
		t.Fatalf("second attempt = %+v", b)
	}
	for f := uint64(30); f <= 50; f += 10 {
		must(e.s.HistoryStart(ctx, "h", Attempt{Fence: f}, 0))
	}
	hs, err = e.s.History(ctx, "h")
	must(err)
	if len(hs) != 3 || hs[0].Fence != 30 || hs[2].Fence != 50 {
		t.Fatalf("bounded history = %+v, want fences 30, 40, 50", hs)
	}
	ttl := e.c.PTTL(ctx, e.s.historyKey(e.s.Tag("h"), "h")).Val()
	if ttl <= 0 || ttl > e.s.Retention()*2 {
		t.Fatalf("history TTL %s, want the retention's", ttl)
	}
}

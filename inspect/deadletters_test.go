package inspect_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/testkit"
)

// pagedSource is a dead-letter topic of one partition in memory; it records
// the queries it got.
type pagedSource struct {
	recs []inspect.DeadLetter
	got  []inspect.DeadLetterQuery
}

func (s *pagedSource) DeadLetterPage(_ context.Context, q inspect.DeadLetterQuery) (inspect.DeadLetterPage, error) {
	s.got = append(s.got, q)
	_, from, err := inspect.ParseDeadLetterCursor(q.Cursor)
	if err != nil {
		return inspect.DeadLetterPage{}, err
	}
	page := inspect.DeadLetterPage{Topic: "jobs.dlq"}
	for _, r := range s.recs[from:] {
		if len(page.Records) == q.Limit {
			page.Next = inspect.DeadLetterCursor(0, r.Offset)
			break
		}
		page.Records = append(page.Records, r)
	}
	return page, nil
}

// TestDeadLettersBoundedPaged: the Inspector bounds the page, refuses a
// cursor it did not make before asking the source, pages to the end, and
// says when it has no dead-letter topic to read.
func TestDeadLettersBoundedPaged(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	src := &pagedSource{}
	for i := range 5 {
		src.recs = append(src.recs, inspect.DeadLetter{Offset: int64(i), Reason: "permanent", Type: "t", Key: "k"})
	}
	in := inspect.New(c, inspect.WithPrefix(prefix), inspect.WithDeadLetters(src))
	ctx := t.Context()
	var all []inspect.DeadLetter
	q := inspect.DeadLetterQuery{Limit: 2}
	for range 10 {
		page, err := in.DeadLetters(ctx, q)
		must(t, err)
		all = append(all, page.Records...)
		if q.Cursor = page.Next; q.Cursor == "" {
			break
		}
	}
	if len(all) != 5 || all[4].Offset != 4 {
		t.Fatalf("pages held %+v, want the 5 records once", all)
	}
	if byReason, byType := inspect.DeadLetterCounts(all); byReason["permanent"] != 5 || byType["t"] != 5 {
		t.Fatalf("counts %v %v", byReason, byType)
	}
	n := len(src.got)
	for _, l := range []int{0, inspect.MaxDeadLetterPage + 1} {
		_, err := in.DeadLetters(ctx, inspect.DeadLetterQuery{Limit: l})
		must(t, err)
	}
	if a, b := src.got[n].Limit, src.got[n+1].Limit; a != inspect.DefaultDeadLetterPage || b != inspect.MaxDeadLetterPage {
		t.Fatalf("limits passed on %d, %d: want %d, %d", a, b, inspect.DefaultDeadLetterPage, inspect.MaxDeadLetterPage)
	}
	if _, err := in.DeadLetters(ctx, inspect.DeadLetterQuery{Cursor: "0:x"}); !errors.Is(err, inspect.ErrBadCursor) || len(src.got) != n+2 {
		t.Fatalf("bad cursor: %v (source asked %d times, want %d)", err, len(src.got), n+2)
	}
	if _, err := inspect.New(c).DeadLetters(ctx, q); !errors.Is(err, inspect.ErrNoDeadLetters) {
		t.Fatalf("no source: %v, want ErrNoDeadLetters", err)
	}
	must(t, in.Close(ctx))
	if _, err := in.DeadLetters(ctx, q); !errors.Is(err, inspect.ErrClosed) {
		t.Fatalf("closed: %v, want ErrClosed", err)
	}
}

// TestCompensationsShape: a dead-lettered journal in the shape the console
// and the CLI show (key without its hash tag, fence, since, steps), on real
// Redis; the limit is bounded.
func TestCompensationsShape(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	must(t, compensation.Register(e.reg, "undo", func(context.Context, string) error { return errors.New("down") }))
	c := e.claim(t, "order-9", idempotency.Acquired)
	j := e.comp.Journal(c.Lease)
	must(t, j.Step(ctx, "charge", func(context.Context) error { return nil }, "undo", "arg"))
	if err := j.Compensate(ctx); !errors.Is(err, compensation.ErrDeadLettered) {
		t.Fatalf("Compensate: %v, want dead-lettered", err)
	}
	js, err := e.in.Compensations(ctx, 10)
	must(t, err)
	if len(js) != 1 || js[0].Key != "order-9" || js[0].Fence != c.Fence || js[0].Since == nil || js[0].Since.IsZero() ||
		len(js[0].Steps) != 1 || js[0].Steps[0].Name != "charge" || js[0].Steps[0].Handler != "undo" || js[0].Steps[0].Error == "" {
		t.Fatalf("Compensations = %+v", js)
	}
	for _, l := range []int{0, inspect.MaxCompensationPage + 1} {
		if _, err := e.in.Compensations(ctx, l); err == nil {
			t.Fatalf("Compensations(%d): no error", l)
		}
	}
}

// TestCompensationsPending: the list shows a journal whose compensation is
// due (its lease expired, nothing compensated it yet) as pending, after the
// dead-lettered ones, without a dead-lettered time; a journal whose job still
// holds its lease is not listed.
func TestCompensationsPending(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	must(t, compensation.Register(e.reg, "undo", func(context.Context, string) error { return nil }))
	lost := e.claim(t, "order-lost", idempotency.Acquired)
	must(t, e.comp.Journal(lost.Lease).Step(ctx, "charge", func(context.Context) error { return nil }, "undo", "a"))
	running := e.claim(t, "order-running", idempotency.Acquired)
	must(t, e.comp.Journal(running.Lease).Step(ctx, "charge", func(context.Context) error { return nil }, "undo", "b"))

	js, err := e.in.Compensations(ctx, 10)
	must(t, err)
	if len(js) != 0 {
		t.Fatalf("Compensations while both jobs hold their leases = %+v, want none", js)
	}
	if _, err := e.in.Expire(ctx, "order-lost", lost.Fence); err != nil {
		t.Fatal(err)
	}
	// Expire leaves the key a millisecond to live: list once it is gone.
	testkit.Eventually(t, 5*time.Second, "the expired lease key gone", func() bool {
		return e.rdb.Exists(ctx, e.m.Key(lost.Lease.Name())).Val() == 0
	})
	js, err = e.in.Compensations(ctx, 10)
	must(t, err)
	if len(js) != 1 || js[0].Key != "order-lost" || js[0].Fence != lost.Fence || js[0].Status != inspect.StatusPending ||
		js[0].Since != nil || len(js[0].Steps) != 1 || js[0].Steps[0].Name != "charge" {
		t.Fatalf("Compensations after the lease expired = %+v, want order-lost pending", js)
	}
}

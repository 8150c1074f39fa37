package fence_test

import (
	"errors"
	"testing"

	"github.com/leasehold/leasehold/fence"
)

// TestTakeRefusesZombie: the owner of fence 5 wrote the row; fence 6 takes
// the key over. Without Take, the zombie's next write still lands (the new
// owner has not written the row yet: the stored fence is still 5). Once the
// new owner has taken the resource at the start of its run, the zombie's
// writes are refused, though the new owner has still written nothing.
func TestTakeRefusesZombie(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := t.Context()
	if err := write(ctx, db, "untaken", 5); err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, db, "untaken", 5); err != nil {
		t.Fatalf("without Take, the zombie's write to a row the new owner has not written: %v (Apply alone admits it)", err)
	}

	if err := write(ctx, db, "taken", 5); err != nil {
		t.Fatal(err)
	}
	if err := fence.Take(ctx, db, "taken", 6); err != nil {
		t.Fatalf("Take(6): %v", err)
	}
	if err := fence.Take(ctx, db, "taken", 6); err != nil {
		t.Fatalf("Take(6) again: %v", err)
	}
	var se *fence.StaleError
	if err := write(ctx, db, "taken", 5); !errors.As(err, &se) || se.Current != 6 {
		t.Fatalf("the zombie's write after Take(6): %v, want a StaleError naming 6", err)
	}
	var val int64
	if err := db.QueryRow(ctx, `SELECT val FROM doc WHERE id = 'taken'`).Scan(&val); err != nil || val != 5 {
		t.Fatalf("row = %d, %v; want the first write's 5", val, err)
	}
	if err := write(ctx, db, "taken", 6); err != nil {
		t.Fatalf("the new owner's write: %v", err)
	}
	if err := fence.Take(ctx, db, "taken", 4); !errors.Is(err, fence.ErrStaleFence) {
		t.Fatalf("Take(4) after 6: %v, want ErrStaleFence", err)
	}
	if err := fence.Take(ctx, db, "", 4); !errors.Is(err, fence.ErrInvalidResource) {
		t.Fatalf("Take of an empty resource: %v", err)
	}
	if f, err := fence.Current(ctx, db, "taken"); err != nil || f != 6 {
		t.Fatalf("Current = %d, %v; want 6", f, err)
	}
}

package fence_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestStd: the database/sql functions guard like the pgx ones (pgx's stdlib
// driver on the test server): migrate, a fenced write, a stale one rolled
// back with its statements, Take refusing an older owner, Current.
func TestStd(t *testing.T) {
	t.Parallel()
	db := stdlib.OpenDBFromPool(testkit.Postgres(t))
	t.Cleanup(func() { _ = db.Close() })
	ctx := t.Context()
	for range 2 { // idempotent
		if err := fence.MigrateStd(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE doc (id text PRIMARY KEY, val bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	write := func(f uint64) error {
		return fence.WriteStd(ctx, db, "r", f, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO doc (id, val) VALUES ('r', $1) ON CONFLICT (id) DO UPDATE SET val = EXCLUDED.val`, int64(f))
			return err
		})
	}
	if err := write(10); err != nil {
		t.Fatal(err)
	}
	if err := write(10); err != nil {
		t.Fatalf("the same fence again: %v", err)
	}
	var se *fence.StaleError
	if err := write(9); !errors.As(err, &se) || se.Current != 10 || se.Fence != 9 {
		t.Fatalf("write(9) after 10: %v, want a StaleError 9 < 10", err)
	}
	if err := fence.TakeStd(ctx, db, "r", 11); err != nil {
		t.Fatal(err)
	}
	if err := write(10); !errors.Is(err, fence.ErrStaleFence) {
		t.Fatalf("write(10) after TakeStd(11): %v", err)
	}
	var val int64
	if err := db.QueryRowContext(ctx, `SELECT val FROM doc WHERE id = 'r'`).Scan(&val); err != nil || val != 10 {
		t.Fatalf("val = %d, %v; want 10", val, err)
	}
	if f, err := fence.CurrentStd(ctx, db, "r"); err != nil || f != 11 {
		t.Fatalf("CurrentStd = %d, %v; want 11", f, err)
	}
	if f, err := fence.CurrentStd(ctx, db, "none"); err != nil || f != 0 {
		t.Fatalf("CurrentStd of an unknown resource = %d, %v", f, err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := fence.ApplyStd(ctx, tx, "r", 0); !errors.Is(err, fence.ErrInvalidFence) {
		t.Fatalf("ApplyStd(0): %v", err)
	}
}

package fence_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	db := testkit.Postgres(t)
	ctx := t.Context()
	if err := fence.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := fence.Migrate(ctx, db); err != nil { // idempotent
		t.Fatalf("second migrate: %v", err)
	}
	if _, err := db.Exec(ctx, `CREATE TABLE doc (id text PRIMARY KEY, val bigint NOT NULL);
		CREATE TABLE writes (seq bigserial PRIMARY KEY, fence bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// write runs one fenced write: the guard, then the guarded update and a log
// row, committed together.
func write(ctx context.Context, db *pgxpool.Pool, resource string, f uint64) error {
	return fence.Write(ctx, db, resource, f, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO doc (id, val) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET val = EXCLUDED.val`, resource, int64(f)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO writes (fence) VALUES ($1)`, int64(f))
		return err
	})
}

// TestStaleWriteRollsBack: a rejected writer's own statements in the same
// transaction do not land.
func TestStaleWriteRollsBack(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := t.Context()
	if err := write(ctx, db, "r", 10); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE doc SET val = -1 WHERE id = 'r'`); err != nil {
		t.Fatal(err)
	}
	if err := fence.Apply(ctx, tx, "r", 9); !errors.Is(err, fence.ErrStaleFence) {
		t.Fatalf("Apply(9) after 10: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var val int64
	if err := db.QueryRow(ctx, `SELECT val FROM doc WHERE id = 'r'`).Scan(&val); err != nil || val != 10 {
		t.Fatalf("val = %d, %v; want 10", val, err)
	}
	var logged int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM writes`).Scan(&logged); err != nil || logged != 1 {
		t.Fatalf("%d writes logged (%v), want 1", logged, err)
	}
}

func TestApplySequential(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := t.Context()
	for _, step := range []struct {
		fence uint64
		stale bool
	}{{5, false}, {5, false}, {7, false}, {6, true}, {1, true}, {8, false}} {
		err := write(ctx, db, "r", step.fence)
		if got := errors.Is(err, fence.ErrStaleFence); got != step.stale || (err != nil && !step.stale) {
			t.Fatalf("fence %d: err = %v, want stale=%v", step.fence, err, step.stale)
		}
		if step.stale {
			var se *fence.StaleError
			if !errors.As(err, &se) {
				t.Fatalf("fence %d: %T is not *StaleError", step.fence, err)
			}
			if diff := cmp.Diff(fence.StaleError{Resource: "r", Fence: step.fence, Current: 7}, *se); diff != "" {
				t.Errorf("stale detail (-want +got):\n%s", diff)
			}
		}
	}
	cur, err := fence.Current(ctx, db, "r")
	if err != nil || cur != 8 {
		t.Fatalf("Current = %d, %v; want 8", cur, err)
	}
	if cur, err := fence.Current(ctx, db, "other"); err != nil || cur != 0 {
		t.Fatalf("Current(other) = %d, %v; want 0", cur, err)
	}
}

func TestApplyRejectsInvalid(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := t.Context()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := fence.Apply(ctx, tx, "r", 0); !errors.Is(err, fence.ErrInvalidFence) {
		t.Errorf("fence 0: %v", err)
	}
	if err := fence.Apply(ctx, tx, "r", 1<<63); !errors.Is(err, fence.ErrInvalidFence) {
		t.Errorf("fence 2^63: %v", err)
	}
	if err := fence.Apply(ctx, tx, "", 1); !errors.Is(err, fence.ErrInvalidResource) {
		t.Errorf("empty resource: %v", err)
	}
	if err := fence.Apply(ctx, tx, string(make([]byte, fence.MaxResourceLen+1)), 1); !errors.Is(err, fence.ErrInvalidResource) {
		t.Errorf("long resource: %v", err)
	}
}

// TestConcurrentInterleavedFences races writers whose fences arrive in a
// random order: every commit must carry a fence no older than the commits
// before it, the newest fence must win, and afterwards every older fence is
// rejected.
func TestConcurrentInterleavedFences(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := t.Context()
	const writers = 40
	fences := make([]uint64, writers)
	for i := range fences {
		fences[i] = uint64(1_000_000 + i*3)
	}
	rand.Shuffle(len(fences), func(i, j int) { fences[i], fences[j] = fences[j], fences[i] })
	var newest uint64
	for _, f := range fences {
		newest = max(newest, f)
	}

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted []uint64
		rejected int
	)
	start := make(chan struct{})
	for _, f := range fences {
		wg.Go(func() {
			<-start
			err := write(ctx, db, "contended", f)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted = append(accepted, f)
			case errors.Is(err, fence.ErrStaleFence):
				rejected++
			default:
				t.Errorf("fence %d: %v", f, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(accepted) == 0 || len(accepted)+rejected != writers {
		t.Fatalf("accepted %d + rejected %d != %d writers", len(accepted), rejected, writers)
	}
	t.Logf("writers=%d accepted=%d rejected=%d", writers, len(accepted), rejected)

	// Commit order (the log's sequence, assigned under the row lock) never
	// goes back to an older fence.
	rows, err := db.Query(ctx, `SELECT fence FROM writes ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	var order []int64
	for rows.Next() {
		var f int64
		if err := rows.Scan(&f); err != nil {
			t.Fatal(err)
		}
		order = append(order, f)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(order) != len(accepted) {
		t.Fatalf("log has %d writes, %d accepted", len(order), len(accepted))
	}
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			t.Fatalf("commit %d has fence %d after %d: an older fence overwrote a newer one", i, order[i], order[i-1])
		}
	}
	var val int64
	if err := db.QueryRow(ctx, `SELECT val FROM doc WHERE id = 'contended'`).Scan(&val); err != nil {
		t.Fatal(err)
	}
	if uint64(val) != newest {
		t.Fatalf("final value %d, want the newest fence %d", val, newest)
	}
	for _, f := range fences {
		err := write(ctx, db, "contended", f)
		if f == newest {
			if err != nil {
				t.Errorf("newest fence %d rewritten: %v", f, err)
			}
			continue
		}
		if !errors.Is(err, fence.ErrStaleFence) {
			t.Errorf("older fence %d after %d: err = %v, want ErrStaleFence", f, newest, err)
		}
	}
}

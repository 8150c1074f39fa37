package fence

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Table is the name of the fence table, resolved through the connection's
// search_path like any unqualified table name.
const Table = "leasehold_fences"

// MaxResourceLen bounds the length of a resource name, in bytes.
const MaxResourceLen = 512

// Execer is what [Migrate] needs: *pgx.Conn, *pgxpool.Pool and pgx.Tx all
// satisfy it.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

const createTable = `CREATE TABLE IF NOT EXISTS ` + Table + ` (
	resource   text        PRIMARY KEY,
	fence      bigint      NOT NULL CHECK (fence > 0),
	updated_at timestamptz NOT NULL DEFAULT now()
)`

// applySQL records the fence when it is not older than the one stored. When
// the stored fence is newer, ON CONFLICT DO UPDATE still locks the row but the
// WHERE clause updates nothing and no row is returned.
const applySQL = `INSERT INTO ` + Table + ` AS t (resource, fence) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence, updated_at = now()
WHERE t.fence <= EXCLUDED.fence
RETURNING t.fence`

// Migrate creates the fence table if it does not exist. It is safe to run
// concurrently and repeatedly.
func Migrate(ctx context.Context, db Execer) error {
	if _, err := db.Exec(ctx, createTable); err != nil {
		return fmt.Errorf("fence: migrate: %w", err)
	}
	return nil
}

// Apply admits the caller's write to resource inside tx when fence is greater
// than or equal to the newest fence recorded for resource, recording fence as
// the newest. It returns an error wrapping [ErrStaleFence] (a [*StaleError])
// when a newer fence is recorded; the caller must then roll back tx. Call it
// before the write it guards: it takes the resource's row lock, which orders
// concurrent writers of the resource until tx ends. Equal fences pass: one
// owner may write a resource many times. To refuse an older owner's writes
// from the start of a run, before the first write, see [Take].
func Apply(ctx context.Context, tx pgx.Tx, resource string, fence uint64) error {
	return upsert(ctx, pgxRows(tx), pgx.ErrNoRows, "apply", resource, fence)
}

// Take records fence as the newest for resource at the start of a run,
// before the run's first write to it, so that from then on every write with
// an older fence is refused ([Apply] answers [ErrStaleFence]), whatever the
// older owner wrote or had admitted before. It returns a [*StaleError] when
// a newer fence is already recorded: then a newer owner exists and the run
// must stop. Given a pool or a connection, Take is one statement that
// commits on its own (the usual call); given a transaction, it holds the
// resource's row lock and counts only once the transaction commits. Taking
// a resource again with the same fence is a no-op.
func Take(ctx context.Context, q Querier, resource string, fence uint64) error {
	return upsert(ctx, pgxRows(q), pgx.ErrNoRows, "take", resource, fence)
}

// row is one row of a query, as pgx and database/sql both return it.
type row interface{ Scan(dest ...any) error }

// queryRow runs a query that returns at most one row.
type queryRow func(ctx context.Context, sql string, args ...any) row

func pgxRows(q Querier) queryRow {
	return func(ctx context.Context, sql string, args ...any) row { return q.QueryRow(ctx, sql, args...) }
}

// upsert records fence for resource unless a newer one is recorded, through
// q; noRows is the driver's "no rows" error; op names the caller in errors.
func upsert(ctx context.Context, q queryRow, noRows error, op, resource string, fence uint64) error {
	if resource == "" || len(resource) > MaxResourceLen {
		return fmt.Errorf("%w: length %d (want 1..%d)", ErrInvalidResource, len(resource), MaxResourceLen)
	}
	if fence == 0 || fence > math.MaxInt64 {
		return fmt.Errorf("%w: %d", ErrInvalidFence, fence)
	}
	var got int64
	err := q(ctx, applySQL, resource, int64(fence)).Scan(&got)
	if err == nil {
		return nil
	}
	if !errors.Is(err, noRows) {
		return fmt.Errorf("fence: %s %q: %w", op, resource, err)
	}
	// Rejected. The row is locked by the upsert (within a transaction), so
	// this read is the value that beat us; it only serves the error message.
	var current int64
	if err := q(ctx, currentSQL, resource).Scan(&current); err != nil {
		return fmt.Errorf("fence: %s %q: read newest fence: %w (%w)", op, resource, err, ErrStaleFence)
	}
	return &StaleError{Resource: resource, Fence: fence, Current: uint64(current)} //nolint:gosec // the column is CHECK (fence > 0)
}

const currentSQL = `SELECT fence FROM ` + Table + ` WHERE resource = $1`

// current reads the newest fence of resource through q, 0 when none.
func current(ctx context.Context, q queryRow, noRows error, resource string) (uint64, error) {
	var f int64
	err := q(ctx, currentSQL, resource).Scan(&f)
	if errors.Is(err, noRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("fence: current %q: %w", resource, err)
	}
	return uint64(f), nil //nolint:gosec // the column is CHECK (fence > 0)
}

// Querier is what [Take] and [Current] need: *pgx.Conn, *pgxpool.Pool and pgx.Tx all
// satisfy it.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Beginner is what [Write] needs: *pgx.Conn and *pgxpool.Pool satisfy it.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Write runs fn in a transaction guarded by [Apply]: it begins a
// transaction, applies the fence, runs fn (any SQL writes) and commits. Any
// error, [ErrStaleFence] included, rolls the transaction back and is returned.
func Write(ctx context.Context, db Beginner, resource string, fence uint64, fn func(tx pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("fence: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, Rollback is a no-op
	if err := Apply(ctx, tx, resource, fence); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Current returns the newest fence recorded for resource, or 0 when none is.
func Current(ctx context.Context, q Querier, resource string) (uint64, error) {
	return current(ctx, pgxRows(q), pgx.ErrNoRows, resource)
}

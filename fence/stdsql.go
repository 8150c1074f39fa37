package fence

import (
	"context"
	"database/sql"
	"fmt"
)

// The functions whose names end in Std are the same guard for database/sql,
// with any PostgreSQL driver (pgx's stdlib, lib/pq): same table, same
// statements, same errors.

// StdExecer is what [MigrateStd] needs: *sql.DB, *sql.Conn and *sql.Tx
// satisfy it.
type StdExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// StdQuerier is what [TakeStd] and [CurrentStd] need: *sql.DB, *sql.Conn
// and *sql.Tx satisfy it.
type StdQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func stdRows(q StdQuerier) queryRow {
	return func(ctx context.Context, query string, args ...any) row {
		return q.QueryRowContext(ctx, query, args...)
	}
}

// MigrateStd is [Migrate] for database/sql.
func MigrateStd(ctx context.Context, db StdExecer) error {
	if _, err := db.ExecContext(ctx, createTable); err != nil {
		return fmt.Errorf("fence: migrate: %w", err)
	}
	return nil
}

// ApplyStd is [Apply] for database/sql: it admits the write to resource
// inside tx when fence is not older than the newest recorded, or returns a
// [*StaleError] and the caller rolls tx back.
func ApplyStd(ctx context.Context, tx *sql.Tx, resource string, fence uint64) error {
	return upsert(ctx, stdRows(tx), sql.ErrNoRows, "apply", resource, fence)
}

// TakeStd is [Take] for database/sql: it records fence as the newest for
// resource before the run's first write, so that every older fence is
// refused from then on.
func TakeStd(ctx context.Context, q StdQuerier, resource string, fence uint64) error {
	return upsert(ctx, stdRows(q), sql.ErrNoRows, "take", resource, fence)
}

// WriteStd is [Write] for database/sql: begin, [ApplyStd], fn, commit; any
// error rolls back and is returned.
func WriteStd(ctx context.Context, db *sql.DB, resource string, fence uint64, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fence: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, Rollback is a no-op
	if err := ApplyStd(ctx, tx, resource, fence); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// CurrentStd is [Current] for database/sql.
func CurrentStd(ctx context.Context, q StdQuerier, resource string) (uint64, error) {
	return current(ctx, stdRows(q), sql.ErrNoRows, resource)
}

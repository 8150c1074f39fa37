package fence_test

import (
	"context"
	"errors"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
)

// A job debits an account only while its fence is the newest for that
// account; a zombie holding an older fence rolls back.
func ExampleApply() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://127.0.0.1:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	var jobFence uint64 = 1732240000000001 // job.Fence()

	debit := func(ctx context.Context) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		if err := fence.Apply(ctx, tx, "account:42", jobFence); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - 10 WHERE id = 42`); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	if err := debit(ctx); errors.Is(err, fence.ErrStaleFence) {
		log.Print("a newer owner wrote account 42; this attempt is void")
	}
}

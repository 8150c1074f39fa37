package fence_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
)

// Write is the guard in one call: it begins a transaction, applies the
// fence, runs the writes and commits. A job passes job.Fence(); a resource
// should be written under one idempotency key (here the job's).
func ExampleWrite() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := fence.Migrate(ctx, pool); err != nil { // once, at deployment or start-up
		log.Fatal(err)
	}

	key, jobFence := "order-42", uint64(1732240000000001) // job.Key, job.Fence()
	err = fence.Write(ctx, pool, "order:"+key, jobFence, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE orders SET status = 'shipped' WHERE id = $1`, key)
		return err
	})
	var stale *fence.StaleError
	switch {
	case errors.As(err, &stale):
		// A newer owner of the job has written: this attempt is void, and
		// its other effects are for compensation to undo.
		log.Printf("refused: fence %d, newest %d", stale.Fence, stale.Current)
	case err != nil:
		log.Fatal(err)
	}
}

// A refused write carries the fence it offered and the newer one found;
// it matches ErrStaleFence.
func ExampleStaleError() {
	var err error = &fence.StaleError{Resource: "order:order-42", Fence: 7, Current: 9}
	fmt.Println(err)
	fmt.Println(errors.Is(err, fence.ErrStaleFence))
	// Output:
	// fence: stale fence 7 for "order:order-42" (newest is 9)
	// true
}

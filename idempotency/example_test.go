package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/lease"
)

// Claim a key, run the job under its lease, record the result; a redelivery
// of the same message is then a Duplicate that replays it.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer func() { _ = rdb.Close() }()
	prefix := fmt.Sprintf("example:%d:", time.Now().UnixNano())
	defer func() {
		keys, _ := rdb.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	}()

	m, err := lease.NewManager(rdb, lease.WithPrefix(prefix))
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = m.Shutdown(ctx) }()
	store, err := idempotency.New(ctx, rdb, m, idempotency.WithPrefix(prefix))
	if err != nil {
		log.Fatal(err)
	}

	payload := []byte(`{"order":"o-42","amount":1200}`)
	fp, _ := store.Fingerprint(payload)
	for delivery := 1; delivery <= 2; delivery++ {
		c, err := store.Claim(ctx, "order-o-42", fp)
		switch {
		case errors.Is(err, idempotency.ErrUnavailable):
			return // do not run, do not acknowledge: retry later
		case err != nil:
			log.Fatal(err)
		}
		switch c.Outcome {
		case idempotency.Acquired, idempotency.Takeover:
			// Run the job under c.Lease.Context(), passing c.Fence to
			// downstream writes.
			if err := store.Complete(ctx, c, []byte("charged")); err != nil {
				log.Fatal(err)
			}
			fmt.Printf("delivery %d: ran the job (attempt %d)\n", delivery, c.Attempt)
		case idempotency.Duplicate:
			fmt.Printf("delivery %d: duplicate, replayed %q\n", delivery, c.Record.Result)
		case idempotency.Held:
			fmt.Printf("delivery %d: held by another worker for %v\n", delivery, c.Remaining)
		}
	}
	// Output:
	// delivery 1: ran the job (attempt 1)
	// delivery 2: duplicate, replayed "charged"
}

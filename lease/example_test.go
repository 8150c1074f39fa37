package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/lease"
)

// A job runs under a lease: its context ends if the lease is lost, and its
// final write is fenced.
func ExampleManager() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer func() { _ = client.Close() }()

	m, err := lease.NewManager(client, lease.WithPrefix("example:"), lease.WithTTL(3*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = m.Shutdown(ctx) }()

	l, err := m.Acquire(ctx, "report-2026-11")
	var held *lease.HeldError
	switch {
	case errors.As(err, &held):
		fmt.Println("someone else is running it; retry in", held.Remaining.Round(time.Second))
		return
	case err != nil:
		log.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()

	// The work runs under l.Context(): cancelled with lease.ErrLost (or a
	// cause that matches it) if the lease is lost.
	select {
	case <-l.Context().Done():
		fmt.Println("lost:", context.Cause(l.Context()))
	case <-time.After(10 * time.Millisecond):
		fmt.Println("done, fence above zero:", l.Fence() > 0)
	}
	// Output: done, fence above zero: true
}

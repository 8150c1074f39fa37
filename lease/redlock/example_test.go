package redlock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/lease/redlock"
)

// A lease Manager over three independent masters. Only the constructor
// differs from the single-Redis setup; Acquire, the lease's Context, Fence
// and Release work the same.
func Example() {
	b, err := redlock.NewFromAddrs([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"})
	if err != nil {
		panic(err)
	}
	defer func() { _ = b.Close() }()
	m, err := lease.NewManagerWithBackend(b, lease.WithTTL(15*time.Second))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	// New masters, and masters that lost their data, take no locks for one
	// TTL (Redlock's restart rule).
	if err := b.WaitReady(ctx, m.TTL()); err != nil {
		panic(err)
	}
	if err := m.Start(ctx); err != nil {
		panic(err)
	}
	defer func() { _ = m.Shutdown(ctx) }()

	l, err := m.Acquire(ctx, "report:2026-11")
	if err != nil {
		panic(err)
	}
	defer func() { _ = l.Release(ctx) }()
	fmt.Println("fence for downstream writes:", l.Fence())
}

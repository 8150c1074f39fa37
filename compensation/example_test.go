package compensation_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/lease"
)

type refund struct {
	ChargeID string `json:"charge_id"`
}

// A job charges a card as a saga step. If its lease is lost before it
// commits, the charge is refunded by whichever process gets there first: the
// job itself, the new owner of the key, or the recovery sweep.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	leases, err := lease.NewManager(rdb)
	if err != nil {
		log.Fatal(err)
	}
	if err := leases.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer leases.Shutdown(ctx) //nolint:errcheck

	// Every process registers the same handlers under the same names.
	reg := compensation.NewRegistry()
	payRefund := compensation.MustRegister(reg, "pay.refund", func(ctx context.Context, a refund) error {
		step, _ := compensation.StepFromContext(ctx)
		// Idempotent, and fine when the charge never happened (step.InDoubt).
		fmt.Println("refund", a.ChargeID, "idempotency key", step.IdempotencyKey())
		return nil
	})
	runner, err := compensation.NewRunner(rdb, leases, reg)
	if err != nil {
		log.Fatal(err)
	}
	if err := runner.Start(ctx); err != nil { // the periodic recovery sweep
		log.Fatal(err)
	}
	defer runner.Shutdown(ctx) //nolint:errcheck

	l, err := leases.Acquire(ctx, "order-42")
	if err != nil {
		log.Fatal(err)
	}
	// Takeover: undo what earlier owners of the key left uncommitted.
	if err := runner.CompensatePrevious(ctx, l.Name(), l.Fence()); err != nil {
		log.Fatal(err)
	}
	j := runner.Journal(l)
	err = compensation.StepWith(l.Context(), j, "charge", func(ctx context.Context) error {
		return nil // charge the card
	}, payRefund, refund{ChargeID: "order-42/charge"})
	if err == nil {
		err = j.Seal(ctx) // then the fenced commit, then j.Close
	}
	if errors.Is(err, lease.ErrLost) {
		// Lost lease or rejected commit: compensate (detached from ctx).
		if err := j.Compensate(ctx); err != nil {
			log.Print(err) // dead-lettered: see runner.List and runner.Retry
		}
	}
}

package deadletter_test

import (
	"context"
	"errors"
	"log"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/deadletter"
	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/lease"
)

// A consumer builds one Writer and calls Write for each record it cannot
// process; it finishes the record (commits its offset) only once Write
// returned without error.
func ExampleWriter_Write() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer func() { _ = rdb.Close() }()
	leases, err := lease.NewManager(rdb, lease.WithPrefix("lh:"))
	if err != nil {
		log.Fatal(err)
	}
	if err := leases.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = leases.Shutdown(context.WithoutCancel(ctx)) }()
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()

	w, err := deadletter.New(deadletter.Config{Topic: "jobs.dlq", Client: cl, Redis: rdb, Locks: leasing.Fencer{Manager: leases},
		ConnOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:9092")}})
	if err != nil {
		log.Fatal(err)
	}
	var rec *kgo.Record // a record polled from "jobs"
	res, err := w.Write(ctx, rec, deadletter.ReasonPermanent, errors.New("the payment provider refused the card"))
	if err != nil {
		return // ctx ended first: leave the record to the partition's next owner
	}
	log.Printf("dead-lettered (%v)", res)
}

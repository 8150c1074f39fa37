package leasehold_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
)

// Register binds a handler to a job type, with options for that type only:
// how many attempts, how long between them, how long one run may take, and
// a lease TTL of its own.
func ExampleWorker_Register() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer func() { _ = rdb.Close() }()
	w, err := leasehold.New(rdb, leasehold.WithKafka(kgo.SeedBrokers("127.0.0.1:9092")))
	if err != nil {
		log.Fatal(err)
	}
	err = w.Register("invoice.render", func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
		// ... render the invoice named by job.Payload ...
		return []byte("s3://invoices/" + job.Key + ".pdf"), nil
	},
		leasehold.WithMaxAttempts(3),                       // then dead-lettered
		leasehold.WithBackoff(time.Second, 30*time.Second), // between attempts
		leasehold.WithTimeout(10*time.Minute),              // one run
		leasehold.WithJobLeaseTTL(time.Minute),             // taken over a minute after its worker dies
	)
	if err != nil {
		log.Fatal(err) // an invalid type, a duplicate (ErrDuplicateType), or a lease TTL too short
	}
	// Register every type before w.Run or w.Start.
}

// A handler stores its progress with Heartbeat; the next attempt (after a
// failure, a crash, or a lost lease) reads it back with LastHeartbeat and
// resumes there.
func ExampleJob_Heartbeat() {
	type progress struct {
		NextRow int `json:"next_row"`
	}
	const rows = 1_000_000
	handler := func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
		var p progress
		if last := job.LastHeartbeat(); last != nil {
			if err := json.Unmarshal(last, &p); err != nil {
				return nil, leasehold.Permanent(err)
			}
		}
		for p.NextRow < rows {
			if err := ctx.Err(); err != nil {
				return nil, context.Cause(ctx) // matches ErrLeaseLost when the lease is gone
			}
			// ... import rows p.NextRow to p.NextRow+999, fenced with job.Fence() ...
			p.NextRow += 1000
			details, err := json.Marshal(p)
			if err != nil {
				return nil, err
			}
			// Throttled: cheap to call often. It fails once the lease is lost.
			if err := job.Heartbeat(ctx, details); err != nil {
				return nil, err
			}
		}
		return []byte(fmt.Sprintf("imported %d rows", rows)), nil
	}
	_ = handler // w.Register("rows.import", handler)
}

// StepWith makes a handler a saga: each step's compensation is journaled
// before the step runs, and the worker runs the compensations in reverse
// order if the attempt fails, loses its lease or has its commit rejected.
func ExampleStepWith() {
	type seat struct {
		Flight string `json:"flight"`
		Seat   string `json:"seat"`
	}
	// Every process registers the same compensations under the same names.
	// The handle types the steps' arguments: a step given another type does
	// not compile.
	reg := compensation.NewRegistry()
	release := compensation.MustRegister(reg, "seat.release", func(ctx context.Context, s seat) error {
		// Idempotent, and fine when the hold never happened (the step was in doubt).
		return nil // ... release s.Seat on s.Flight ...
	})

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer func() { _ = rdb.Close() }()
	w, err := leasehold.New(rdb,
		leasehold.WithKafka(kgo.SeedBrokers("127.0.0.1:9092")),
		leasehold.WithCompensation(reg), // without it, Step returns ErrNoCompensation
	)
	if err != nil {
		log.Fatal(err)
	}
	err = w.Register("trip.book", func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
		out, back := seat{"LH400", "12A"}, seat{"LH401", "14C"}
		for _, s := range []seat{out, back} {
			err := leasehold.StepWith(ctx, job, "hold "+s.Flight, func(ctx context.Context) error {
				return nil // ... hold the seat at the airline ...
			}, release, s)
			if err != nil {
				// The second hold failed: the worker releases the first.
				return nil, err
			}
		}
		return []byte("booked"), nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

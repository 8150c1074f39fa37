package leaseholdtest_test

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/leaseholdtest"
)

type importJob struct {
	Rows int `json:"rows"`
}

type progress struct {
	NextRow int `json:"next_row"`
}

type releaseArgs struct {
	Batch string `json:"batch"`
}

// A handler's unit test without Redis or Kafka: the first attempt reserves
// quota as a saga step, heartbeats its progress and loses its lease halfway;
// its step is undone, and the next attempt (a takeover with a higher fence)
// resumes from the last checkpoint.
func Example() {
	reg := compensation.NewRegistry()
	release := compensation.MustRegister(reg, "quota.release", func(ctx context.Context, a releaseArgs) error {
		step, _ := compensation.StepFromContext(ctx)
		fmt.Printf("undo: release %s (in doubt: %v)\n", a.Batch, step.InDoubt)
		return nil
	})

	// The handler under test.
	handler := leasehold.Typed(func(ctx context.Context, job *leasehold.Job, in importJob) (string, error) {
		p, resumed, err := leasehold.LastHeartbeatAs[progress](job)
		if err != nil {
			return "", leasehold.Permanent(err)
		}
		err = leasehold.StepWith(ctx, job, "reserve quota", func(context.Context) error {
			return nil // ... reserve quota for in.Rows rows ...
		}, release, releaseArgs{Batch: fmt.Sprintf("%s/%d", job.Key, job.Fence())})
		if err != nil {
			return "", err
		}
		for p.NextRow < in.Rows {
			// ... import rows p.NextRow to p.NextRow+999, fenced with job.Fence() ...
			p.NextRow += 1000
			if err := leasehold.RecordHeartbeat(ctx, job, p); err != nil {
				return "", err // the lease is lost: stop
			}
		}
		return fmt.Sprintf("%d rows (resumed: %v)", in.Rows, resumed), nil
	})

	ctx := context.Background()
	env := leaseholdtest.New(
		leaseholdtest.WithKey("import-7"),
		leaseholdtest.WithPayload([]byte(`{"rows":4000}`)),
		leaseholdtest.WithCompensation(reg),
	)
	env.OnHeartbeat(func(a *leaseholdtest.Attempt, _ []byte) {
		if a.Job().Attempt == 1 && len(a.Heartbeats()) == 2 {
			env.LoseLease() // as if renewals had failed
		}
	})

	first := env.Run(ctx, handler)
	fmt.Println("attempt 1:", first.Outcome(), "after", len(first.Heartbeats()), "heartbeats")
	if err := first.Compensate(ctx); err != nil { // what the worker does on a lost lease
		fmt.Println(err)
	}

	second := env.Run(ctx, handler)
	beats, _ := leaseholdtest.HeartbeatsAs[progress](second)
	fmt.Printf("attempt 2: %s %s, fence %d, takeover %v, first checkpoint %d\n",
		second.Outcome(), second.Result, second.Job().Fence(), second.Job().Takeover, beats[0].NextRow)
	for _, s := range second.Steps() {
		fmt.Printf("attempt 2 step %q: done %v, undo %s %s\n", s.Name, s.Done, s.Handler, s.Args)
	}
	// Output:
	// attempt 1: lease_lost after 2 heartbeats
	// undo: release import-7/1 (in doubt: false)
	// attempt 2: completed "4000 rows (resumed: true)", fence 2, takeover true, first checkpoint 3000
	// attempt 2 step "reserve quota": done true, undo quota.release {"batch":"import-7/2"}
}

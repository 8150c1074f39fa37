// Command myworker is a team's own leasehold worker binary, and the template
// for one: it registers its job type and hands over to package workercmd,
// which gives it the command line of cmd/worker (run with every flag and
// environment variable, inspect, leases, expire, reset, dlq, capacity,
// compensations, enqueue, ...). deploy/ builds and deploys it.
//
//	go run ./cmd/worker dev-broker --topics reports:6,reports.dlq:1
//	LEASEHOLD_TOPICS=reports go run ./examples/myworker run --brokers 127.0.0.1:9092
//	LEASEHOLD_TOPICS=reports go run ./examples/myworker enqueue --brokers 127.0.0.1:9092 --type report.build --count 3
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/workercmd"
)

func main() {
	workercmd.Main(workercmd.Register(func(_ context.Context, w *leasehold.Worker, _ *workercmd.Setup) error {
		return w.Register("report.build", leasehold.Typed(buildReport))
	}))
}

// report is the payload of a report.build job ({"n": N}, as `myworker
// enqueue --type report.build` sends it).
type report struct {
	N int `json:"n"`
}

// buildReport stands for a long job: it works for a second, then returns
// the result that the worker caches under the job's idempotency key.
func buildReport(ctx context.Context, job *leasehold.Job, r report) (string, error) {
	select {
	case <-ctx.Done():
		return "", context.Cause(ctx)
	case <-time.After(time.Second):
	}
	return fmt.Sprintf("report %d built under fence %d", r.N, job.Fence()), nil
}

package leasehold_test

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold"
)

// RecordHeartbeat stores a checkpoint of the handler's own type; the next
// attempt (after a failure, a crash or a lost lease) reads it back with
// LastHeartbeatAs and resumes there.
func ExampleRecordHeartbeat() {
	type progress struct {
		NextRow int `json:"next_row"`
	}
	const rows = 1_000_000
	handler := func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
		p, resumed, err := leasehold.LastHeartbeatAs[progress](job)
		if err != nil {
			return nil, leasehold.Permanent(err) // details of another shape
		}
		if resumed {
			job.Logger().InfoContext(ctx, "resuming", "next_row", p.NextRow)
		}
		for p.NextRow < rows {
			// ... import rows p.NextRow to p.NextRow+999, fenced with job.Fence() ...
			p.NextRow += 1000
			if err := leasehold.RecordHeartbeat(ctx, job, p); err != nil {
				return nil, err // the lease is lost: stop
			}
		}
		return fmt.Appendf(nil, "imported %d rows", rows), nil
	}
	_ = handler // w.Register("rows.import", handler); unit-test it with package leaseholdtest
}

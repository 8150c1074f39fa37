package jobtrace

import "context"

// LimitHeld adds delta to the records held for their limit group
// (leasehold.limit.held). A nil *Metrics records nothing.
func (m *Metrics) LimitHeld(ctx context.Context, delta int64) {
	if m == nil {
		return
	}
	m.limitHeld.Add(ctx, delta)
}

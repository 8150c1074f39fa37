package benchkit

import (
	"context"
	"slices"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// RoundTimer is an OpenTelemetry span processor that times the lease
// renewer's rounds: it records the duration of every lease.renew span whose
// lease.count attribute equals the number of leases held, that is every round
// that renewed all of them. Pass it to sdktrace.WithSpanProcessor and the
// provider to lease.WithTracerProvider. It is safe for concurrent use.
type RoundTimer struct {
	n int

	mu     sync.Mutex
	ds     []time.Duration
	counts []int
}

var _ sdktrace.SpanProcessor = (*RoundTimer)(nil)

// NewRoundTimer returns a RoundTimer for rounds over n leases.
func NewRoundTimer(n int) *RoundTimer { return &RoundTimer{n: n} }

// Rounds returns how many rounds over all n leases have ended.
func (r *RoundTimer) Rounds() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ds)
}

// Durations returns the durations of the rounds over all n leases, in the
// order they ended.
func (r *RoundTimer) Durations() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ds)
}

// Counts returns the lease.count of every lease.renew span seen, whether or
// not it covered all n leases: what to report when full rounds do not come.
func (r *RoundTimer) Counts() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.counts)
}

// OnEnd records s if it is a lease.renew span.
func (r *RoundTimer) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.Name() != "lease.renew" {
		return
	}
	for _, a := range s.Attributes() {
		if a.Key != "lease.count" {
			continue
		}
		c := int(a.Value.AsInt64())
		r.mu.Lock()
		r.counts = append(r.counts, c)
		if c == r.n {
			r.ds = append(r.ds, s.EndTime().Sub(s.StartTime()))
		}
		r.mu.Unlock()
	}
}

// OnStart does nothing: rounds are timed when they end.
func (r *RoundTimer) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// Shutdown does nothing and returns nil.
func (r *RoundTimer) Shutdown(context.Context) error { return nil }

// ForceFlush does nothing and returns nil.
func (r *RoundTimer) ForceFlush(context.Context) error { return nil }

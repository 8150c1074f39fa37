package leasehold

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/tracing"
)

// delivery is one polled record on its way through claim, run and commit.
type delivery struct {
	rec      *kgo.Record
	tracker  *partTracker
	key      string
	typ      string
	orderKey string
	held     int // consecutive Held answers, for the held backoff
	due      time.Time
	index    int // heap index

	tj   *tracing.Job    // the current attempt's span (WithTracing)
	tctx context.Context // its context
}

func (d *delivery) info() ClaimInfo {
	return ClaimInfo{Key: d.key, Type: d.typ, Topic: d.rec.Topic, Partition: d.rec.Partition, Offset: d.rec.Offset}
}

// claimInfo is d's info with the claim decided for it.
func claimInfo(d *delivery, c *claim) ClaimInfo {
	info := d.info()
	info.Outcome, info.Fence, info.Attempt = c.Outcome, c.Fence, c.Attempt
	return info
}

// schedule holds deliveries waiting to be claimed: parked ones (held keys,
// retries after backoff, claims that failed while Redis was down), ordered by
// due time, and, with per-key ordering, the records queued behind a key that
// is in flight.
type schedule struct {
	mu      sync.Mutex
	ready   delHeap
	ordered bool
	busy    map[string][]*delivery // ordering key -> records waiting behind the one in flight
	wake    func()
}

func newSchedule(ordered bool, wake func()) *schedule {
	return &schedule{ordered: ordered, busy: make(map[string][]*delivery), wake: wake}
}

// admit decides what to do with a freshly polled delivery: it returns true if
// it may be claimed now, false if it queued behind its ordering key.
func (s *schedule) admit(d *delivery) bool {
	if !s.ordered {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.busy[d.orderKey]; ok {
		s.busy[d.orderKey] = append(q, d)
		return false
	}
	s.busy[d.orderKey] = nil
	return true
}

// park schedules d to be claimed again at due.
func (s *schedule) park(d *delivery, due time.Time) {
	s.mu.Lock()
	d.due = due
	heap.Push(&s.ready, d)
	s.mu.Unlock()
	s.wake()
}

// finished releases d's ordering key: the next record queued behind it
// becomes ready.
func (s *schedule) finished(d *delivery) {
	if !s.ordered {
		return
	}
	s.mu.Lock()
	q, ok := s.busy[d.orderKey]
	if !ok {
		s.mu.Unlock()
		return
	}
	if len(q) == 0 {
		delete(s.busy, d.orderKey)
		s.mu.Unlock()
		return
	}
	next := q[0]
	s.busy[d.orderKey] = q[1:]
	next.due = time.Now()
	heap.Push(&s.ready, next)
	s.mu.Unlock()
	s.wake()
}

// takeDue pops up to n deliveries whose time has come.
func (s *schedule) takeDue(n int, now time.Time) []*delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*delivery
	for len(out) < n && s.ready.Len() > 0 && !s.ready[0].due.After(now) {
		out = append(out, heap.Pop(&s.ready).(*delivery))
	}
	return out
}

// nextDue returns the earliest due time, or the zero time when nothing waits.
func (s *schedule) nextDue() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready.Len() == 0 {
		return time.Time{}
	}
	return s.ready[0].due
}

// dropRemoved forgets deliveries whose partition is no longer assigned; the
// partition's new owner consumes them from the committed offset.
func (s *schedule) dropRemoved(alive func(*partTracker) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var dropped []*delivery
	kept := s.ready[:0]
	for _, d := range s.ready {
		if alive(d.tracker) {
			kept = append(kept, d)
		} else {
			dropped = append(dropped, d)
		}
	}
	for i := len(kept); i < len(s.ready); i++ {
		s.ready[i] = nil
	}
	s.ready = kept
	for i, d := range s.ready {
		d.index = i
	}
	heap.Init(&s.ready)
	for k, q := range s.busy {
		keptQ := q[:0]
		for _, d := range q {
			if alive(d.tracker) {
				keptQ = append(keptQ, d)
			}
		}
		s.busy[k] = keptQ
	}
	if !s.ordered {
		return
	}
	// A dropped parked delivery held its ordering key: hand the key on.
	for _, d := range dropped {
		q, ok := s.busy[d.orderKey]
		if !ok {
			continue
		}
		if len(q) == 0 {
			delete(s.busy, d.orderKey)
			continue
		}
		next := q[0]
		s.busy[d.orderKey] = q[1:]
		next.due = time.Now()
		heap.Push(&s.ready, next)
	}
}

// len counts parked and queued deliveries.
func (s *schedule) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.ready.Len()
	for _, q := range s.busy {
		n += len(q)
	}
	return n
}

type delHeap []*delivery

func (h delHeap) Len() int           { return len(h) }
func (h delHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h delHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *delHeap) Push(x any) {
	d := x.(*delivery)
	d.index = len(*h)
	*h = append(*h, d)
}
func (h *delHeap) Pop() any {
	old := *h
	n := len(old)
	d := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	d.index = -1
	return d
}

package leasehold

import (
	"bytes"
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/jobtrace"
	"github.com/leasehold/leasehold/internal/limit"
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
	index    int         // heap index
	lim      *limit.Slot // the limit slot taken for its claim (limitslots.go)
	limWait  string      // the limit group it is parked by, if any
	ordering bool        // it holds its ordering key (admit, handOnOrder); guarded by schedule.mu

	tj   *jobtrace.Job   // the current attempt's span
	tctx context.Context // its context

	// Share mode: the dead-letter copy decided for it (deadLetterUntil),
	// under shareState.mu, for shutdown to write should the worker stop
	// before it is (shareEndHeld).
	dlqReason string
	dlqCause  error
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
// due time; with per-key ordering, the records queued behind a key that is in
// flight; and the copies of an idempotency key waiting on the key's probe.
//
// Key groups: of the records of one idempotency key, one at a time (the
// probe) is claimed, run or parked; the others wait in its group without
// claiming. When the probe's claim finds the key finished (a duplicate), the
// waiting copies of the same type and payload replay that answer; when the
// probe finishes otherwise (it ran, or was dead-lettered or revoked), the
// first waiting copy becomes the probe and is claimed at once. So a flood
// of duplicates of a held key costs one claim per backoff step, not one per
// record.
type schedule struct {
	mu      sync.Mutex
	ready   delHeap
	ordered bool
	busy    map[string][]*delivery // ordering key -> records waiting behind the one in flight
	keys    map[string]*keyGroup   // idempotency key -> its probe and the copies waiting on it
	wake    func()
}

// keyGroup is the probe of one idempotency key and the copies waiting on it.
type keyGroup struct {
	probe   *delivery
	waiting []*delivery
}

func newSchedule(ordered bool, wake func()) *schedule {
	return &schedule{ordered: ordered, busy: make(map[string][]*delivery), keys: make(map[string]*keyGroup), wake: wake}
}

// join sorts a batch about to be claimed into key groups: it returns the
// deliveries to claim (each its key's probe) and keeps the others waiting on
// their key's probe.
func (s *schedule) join(batch []*delivery) []*delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	probes := batch[:0]
	for _, d := range batch {
		g := s.keys[d.key]
		switch {
		case g == nil:
			s.keys[d.key] = &keyGroup{probe: d}
		case g.probe != d:
			g.waiting = append(g.waiting, d)
			continue
		}
		probes = append(probes, d)
	}
	return probes
}

// replaying takes out of probe's group the waiting copies that may replay
// the duplicate answer probe's claim got: those of the same type and
// payload (a copy with another payload is claimed on its own, and is
// dead-lettered as a mismatch if its fingerprint differs).
func (s *schedule) replaying(probe *delivery) []*delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.keys[probe.key]
	if g == nil || g.probe != probe {
		return nil
	}
	var same []*delivery
	rest := g.waiting[:0]
	for _, d := range g.waiting {
		if d.typ == probe.typ && bytes.Equal(d.rec.Value, probe.rec.Value) {
			same = append(same, d)
		} else {
			rest = append(rest, d)
		}
	}
	clear(g.waiting[len(rest):])
	g.waiting = rest
	return same
}

// handOn ends d's turn as its key's probe, if it is one (under s.mu): the
// first copy waiting on it becomes the probe, due now. It reports whether a
// copy was made ready.
func (s *schedule) handOn(d *delivery) bool {
	g := s.keys[d.key]
	if g == nil || g.probe != d {
		return false
	}
	if len(g.waiting) == 0 {
		delete(s.keys, d.key)
		return false
	}
	next := g.waiting[0]
	g.waiting[0] = nil
	g.probe, g.waiting = next, g.waiting[1:]
	next.due = time.Now()
	heap.Push(&s.ready, next)
	return true
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
	d.ordering = true
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

// finished releases d's idempotency key, if d is its probe (the next copy
// waiting on it is claimed), and its ordering key (the next record queued
// behind it becomes ready).
func (s *schedule) finished(d *delivery) {
	s.mu.Lock()
	woke := s.handOn(d)
	if s.ordered && s.handOnOrder(d) {
		woke = true
	}
	s.mu.Unlock()
	if woke {
		s.wake()
	}
}

// handOnOrder releases d's ordering key (under s.mu), if d holds it: the
// next record queued behind it becomes ready, due now, and holds the key.
// It reports whether one did. A record that never held its key (one
// dead-lettered before admit, while another record of the key is in
// flight) releases nothing.
func (s *schedule) handOnOrder(d *delivery) bool {
	if !d.ordering {
		return false
	}
	d.ordering = false
	q, ok := s.busy[d.orderKey]
	if !ok {
		return false
	}
	if len(q) == 0 {
		delete(s.busy, d.orderKey)
		return false
	}
	next := q[0]
	s.busy[d.orderKey] = q[1:]
	next.ordering = true
	next.due = time.Now()
	heap.Push(&s.ready, next)
	return true
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
// partition's new owner consumes them from the committed offset. A dropped
// probe hands its key on to the first live copy waiting on it, and a dropped
// parked or waiting delivery its ordering key to the next record behind it.
// It returns the deliveries dropped, whose attempts the caller ends.
func (s *schedule) dropRemoved(alive func(*partTracker) bool) (dropped []*delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.ready[:0]
	for _, d := range s.ready {
		if alive(d.tracker) {
			kept = append(kept, d)
		} else {
			dropped = append(dropped, d)
		}
	}
	clear(s.ready[len(kept):])
	s.ready = kept
	for i, d := range s.ready {
		d.index = i
	}
	heap.Init(&s.ready)
	parked := len(dropped)
	for _, g := range s.keys {
		live := g.waiting[:0]
		for _, d := range g.waiting {
			if alive(d.tracker) {
				live = append(live, d)
			} else {
				dropped = append(dropped, d)
			}
		}
		clear(g.waiting[len(live):])
		g.waiting = live
	}
	for _, d := range dropped[:parked] {
		s.handOn(d)
	}
	for k, q := range s.busy {
		keptQ := q[:0]
		for _, d := range q {
			if alive(d.tracker) {
				keptQ = append(keptQ, d)
			} else {
				dropped = append(dropped, d) // holds no ordering key: handOnOrder skips it
			}
		}
		s.busy[k] = keptQ
	}
	if s.ordered {
		for _, d := range dropped {
			s.handOnOrder(d)
		}
	}
	return dropped
}

// takeAll empties the schedule, when the worker stops, and returns the
// deliveries it held: parked, waiting on their key's probe or queued behind
// their ordering key.
func (s *schedule) takeAll() []*delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*delivery, 0, s.ready.Len())
	for s.ready.Len() > 0 {
		out = append(out, heap.Pop(&s.ready).(*delivery))
	}
	for _, g := range s.keys {
		out = append(out, g.waiting...)
	}
	for _, q := range s.busy {
		out = append(out, q...)
	}
	clear(s.keys)
	clear(s.busy)
	return out
}

// len counts parked and queued deliveries and the copies waiting on their
// key's probe.
func (s *schedule) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.ready.Len()
	for _, q := range s.busy {
		n += len(q)
	}
	for _, g := range s.keys {
		n += len(g.waiting)
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

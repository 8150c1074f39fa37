package console

import (
	"slices"
	"sync"
)

// Bounds of the fences a console remembers.
const (
	maxSeenKeys   = 10_000
	maxSeenFences = 8
)

// seenFences remembers, per idempotency key, the last fences this console
// saw (in a page of running jobs, a key view, an expire), so that a key's
// view can still show the journal of an attempt whose lease was lost and
// whose journal was compensated since: a settled journal leaves the key's
// journal index, and nothing else in Redis names its fence once a takeover
// wrote a newer one. Bounded: the oldest keys are forgotten first.
type seenFences struct {
	mu    sync.Mutex
	m     map[string][]uint64
	order []string // keys, oldest first
}

func (s *seenFences) add(key string, fences ...uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string][]uint64)
	}
	fs, ok := s.m[key]
	if !ok {
		if len(s.order) >= maxSeenKeys {
			delete(s.m, s.order[0])
			s.order = s.order[1:]
		}
		s.order = append(s.order, key)
	}
	for _, f := range fences {
		if f != 0 && !slices.Contains(fs, f) {
			fs = append(fs, f)
		}
	}
	if len(fs) > maxSeenFences {
		fs = fs[len(fs)-maxSeenFences:]
	}
	s.m[key] = fs
}

func (s *seenFences) get(key string) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.m[key])
}

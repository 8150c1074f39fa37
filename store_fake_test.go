package leasehold

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/deadletter"
	"github.com/leasehold/leasehold/lease"
)

// fakeStore is an in-memory store: every claim answers what the test set for
// its key, every write is recorded. It lets dispatch and run be table-tested
// without Redis (the Redis store is tested end to end by the other tests).
type fakeStore struct {
	mu       sync.Mutex
	answers  map[string]claim // key -> the claim's answer (run is filled in)
	batchErr error            // ClaimBatch fails as a whole
	pingErrs int              // Ping fails this many times, then answers
	pings    int
	attempts map[string]*fakeAttempt
}

func newFakeStore() *fakeStore {
	return &fakeStore{answers: make(map[string]claim), attempts: make(map[string]*fakeAttempt)}
}

var _ store = (*fakeStore)(nil)

// answer sets the claim answer for key; a running outcome gets a fakeAttempt
// configured by a.
func (s *fakeStore) answer(key string, c claim, a *fakeAttempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.Outcome == OutcomeAcquired || c.Outcome == OutcomeTakeover {
		if a == nil {
			a = &fakeAttempt{}
		}
		a.init()
		s.attempts[key] = a
		c.run = a
	}
	s.answers[key] = c
}

func (s *fakeStore) ClaimBatch(_ context.Context, reqs []claimRequest) ([]claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.batchErr != nil {
		return nil, s.batchErr
	}
	out := make([]claim, len(reqs))
	for i, r := range reqs {
		c, ok := s.answers[r.Key]
		if !ok {
			c = claim{Err: errors.New("fake store: no answer set for " + r.Key)}
		}
		out[i] = c
	}
	return out, nil
}

func (s *fakeStore) Ping(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pings++
	if s.pings <= s.pingErrs {
		return ErrUnavailable
	}
	return nil
}

// fakeAttempt is a running attempt's handle. The error fields set what the
// writes answer; the others record what the worker did.
type fakeAttempt struct {
	completeErrs []error // answered by successive Complete calls, then nil
	failErr      error
	landed       bool          // Committed's answer
	gate         chan struct{} // when set, Complete waits for it to close
	entered      chan struct{} // when set, Complete sends on it as it starts

	mu        sync.Mutex
	ctx       context.Context
	lose      context.CancelCauseFunc
	completed [][]byte
	failed    []error
	terminal  bool
	details   [][]byte
	abandoned bool
}

var _ attempt = (*fakeAttempt)(nil)

func (a *fakeAttempt) init() {
	a.ctx, a.lose = context.WithCancelCause(context.Background())
}

// loseLease cancels the attempt's lease context as the lease manager does.
func (a *fakeAttempt) loseLease() { a.lose(lease.ErrLost) }

func (a *fakeAttempt) Context() context.Context { return a.ctx }
func (a *fakeAttempt) TTL() time.Duration       { return time.Second }
func (a *fakeAttempt) Lease() *lease.Lease      { return nil }

func (a *fakeAttempt) Complete(_ context.Context, result []byte) error {
	if a.entered != nil {
		a.entered <- struct{}{}
	}
	if a.gate != nil {
		<-a.gate
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.completed = append(a.completed, result)
	if n := len(a.completed); n <= len(a.completeErrs) {
		return a.completeErrs[n-1]
	}
	return nil
}

func (a *fakeAttempt) Fail(_ context.Context, cause error, terminal bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failed = append(a.failed, cause)
	a.terminal = terminal
	return a.failErr
}

func (a *fakeAttempt) SaveDetails(_ context.Context, d []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.details = append(a.details, d)
	return nil
}

func (a *fakeAttempt) Committed(context.Context) (bool, error) { return a.landed, nil }

func (a *fakeAttempt) Abandon() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.abandoned = true
}

// writes returns what the worker wrote through the attempt.
func (a *fakeAttempt) writes() (completes int, failed []error, terminal, abandoned bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.completed), append([]error(nil), a.failed...), a.terminal, a.abandoned
}

// fakeDeadLetters records the dead-letter copies the worker wrote.
type fakeDeadLetters struct {
	mu      sync.Mutex
	reasons []string
}

var _ deadLetterWriter = (*fakeDeadLetters)(nil)

func (f *fakeDeadLetters) Write(_ context.Context, _ *kgo.Record, reason string, _ error) (deadletter.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reasons = append(f.reasons, reason)
	return deadletter.Written, nil
}

package compensation_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// Test TTLs: short, so that expiry-driven scenarios take a second or two.
const (
	testTTL  = time.Second
	testPoll = 20 * time.Millisecond
)

func TestMain(m *testing.M) {
	if scenario := os.Getenv(childEnv); scenario != "" {
		os.Exit(runChild(scenario))
	}
	goleak.VerifyTestMain(m)
}

// env is one test's Redis namespace.
type env struct {
	t      *testing.T
	client redis.UniversalClient
	prefix string
}

func sharedForBench(b *testing.B) (redis.UniversalClient, string) {
	c, prefix := testkit.SharedRedis(b)
	return c, prefix
}

func setup(t *testing.T) *env {
	t.Helper()
	c, prefix := testkit.SharedRedis(t)
	return &env{t: t, client: c, prefix: prefix}
}

// journalCase is one owner's saga journal, as most runner tests start.
type journalCase struct {
	env *env
	m   *lease.Manager
	r   *compensation.Runner
	l   *lease.Lease
	j   *compensation.Journal
}

// setupJournal acquires key under a new lease manager and opens its journal
// on a runner over rc's handlers (opts added to the test defaults).
func setupJournal(t *testing.T, key string, rc *recorder, opts ...compensation.Opt) *journalCase {
	t.Helper()
	e := setup(t)
	m := e.manager(false)
	r := e.runner(m, rc.registry(t), opts...)
	l, err := m.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return &journalCase{env: e, m: m, r: r, l: l, j: r.Journal(l)}
}

// manager starts a lease manager in the test's namespace; it is shut down
// (leaving its leases to expire when leave is set) at cleanup.
func (e *env) manager(leave bool) *lease.Manager {
	e.t.Helper()
	return newManager(e.t, e.client, e.prefix, leave)
}

func newManager(t testing.TB, c redis.UniversalClient, prefix string, leave bool) *lease.Manager {
	m, err := lease.NewManager(c, lease.WithPrefix(prefix), lease.WithTTL(testTTL),
		lease.WithLeaveOnShutdown(leave))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Shutdown(ctx)
	})
	return m
}

func (e *env) runner(m *lease.Manager, reg *compensation.Registry, opts ...compensation.Opt) *compensation.Runner {
	e.t.Helper()
	return newRunner(e.t, e.client, e.prefix, m, reg, opts...)
}

func newRunner(t testing.TB, c redis.UniversalClient, prefix string, m *lease.Manager, reg *compensation.Registry, opts ...compensation.Opt) *compensation.Runner {
	base := []compensation.Opt{compensation.WithPrefix(prefix), compensation.WithBackoff(5*time.Millisecond, 50*time.Millisecond),
		compensation.WithPollInterval(testPoll), compensation.WithStepTimeout(5 * time.Second)}
	r, err := compensation.NewRunner(c, m, reg, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); err != nil {
			t.Errorf("runner shutdown: %v", err)
		}
	})
	return r
}

// undoArgs are the arguments of the test compensation handlers.
type undoArgs struct {
	Step int `json:"step"`
}

// recorder counts compensation calls per step and can make them fail.
type recorder struct {
	mu       sync.Mutex
	calls    []compensation.StepInfo
	failures map[int]int // step -> failures left (negative: always)
}

func newRecorder() *recorder { return &recorder{failures: map[int]int{}} }

func (rc *recorder) handler(ctx context.Context, a undoArgs) error {
	info, ok := compensation.StepFromContext(ctx)
	if !ok {
		return errors.New("no step info in context")
	}
	if info.Step != a.Step {
		return fmt.Errorf("args for step %d reached step %d", a.Step, info.Step)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.calls = append(rc.calls, info)
	if n := rc.failures[a.Step]; n != 0 {
		if n > 0 {
			rc.failures[a.Step] = n - 1
		}
		return fmt.Errorf("undo step %d: provider unavailable", a.Step)
	}
	return nil
}

func (rc *recorder) setFailures(step, n int) {
	rc.mu.Lock()
	rc.failures[step] = n
	rc.mu.Unlock()
}

// steps returns the step numbers of the calls, in call order.
func (rc *recorder) steps() []int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]int, len(rc.calls))
	for i, c := range rc.calls {
		out[i] = c.Step
	}
	return out
}

func (rc *recorder) registry(t testing.TB) *compensation.Registry {
	reg := compensation.NewRegistry()
	if err := compensation.Register(reg, "undo", rc.handler); err != nil {
		t.Fatal(err)
	}
	return reg
}

// runSteps journals n steps under l, each a no-op effect.
func runSteps(t testing.TB, j *compensation.Journal, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		if err := j.Step(context.Background(), fmt.Sprintf("step-%d", i), func(context.Context) error { return nil },
			"undo", undoArgs{Step: i}); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}

func stepStates(info compensation.JournalInfo) []string {
	out := make([]string, len(info.Steps))
	for i, s := range info.Steps {
		out[i] = s.State
	}
	return out
}

package leasehold

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/limit"
	"github.com/leasehold/leasehold/internal/testkit"
)

// pruneWatch records, on a worker's Redis client, the HSCAN pages of the
// registry key read and the groups limit_prune.lua removed from it, round
// by round of the worker's renewer (endRound, a hook after the worker's).
type pruneWatch struct {
	key string

	mu      sync.Mutex
	scans   int   // pages read this round
	removed int   // groups removed this round
	rounds  []int // groups removed, a round ended
	total   int   // groups removed in every round ended
	most    int   // most groups removed in a round
	paged   int   // most pages read in a round
}

func (p *pruneWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *pruneWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook counts the registry's HSCAN pages and the groups each prune
// script answered it removed.
func (p *pruneWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		a := cmd.Args()
		p.mu.Lock()
		defer p.mu.Unlock()
		switch {
		case cmd.Name() == "hscan" && len(a) > 1 && a[1] == p.key:
			p.scans++
		case (cmd.Name() == "evalsha" || cmd.Name() == "eval") && len(a) > 3 && a[3] == p.key:
			if n, err := cmd.(*redis.Cmd).Int(); err == nil {
				p.removed += n
			}
		}
		return err
	}
}

// endRound closes the counts of a renew round.
func (p *pruneWatch) endRound(context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rounds = append(p.rounds, p.removed)
	p.total += p.removed
	p.most, p.paged = max(p.most, p.removed), max(p.paged, p.scans)
	p.removed, p.scans = 0, 0
}

// reset forgets the rounds ended.
func (p *pruneWatch) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rounds, p.total, p.most, p.paged = nil, 0, 0, 0
}

// ended returns the number of rounds ended.
func (p *pruneWatch) ended() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.rounds)
}

// TestLimitRegistryPruned: a worker runs a job of a limited type, and the
// registry gets 5,000 groups no worker registered for longer than
// limit.PruneAge, and one another worker registered an hour ago. The worker
// empties it of the stale groups over its renew rounds, reading one HSCAN
// page a round and so removing at most about limit.PrunePage groups a round
// (COUNT is a hint), and keeps the recent group and its own.
func TestLimitRegistryPruned(t *testing.T) {
	t.Parallel()
	const stale = 5000
	h := setup(t, 1)
	ctx := t.Context()
	watch := &pruneWatch{key: limit.RegistryKey(h.prefix)}
	rdb := redis.NewClient(h.rdb.(*redis.Client).Options())
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(watch)
	ran := make(chan struct{}, 1)
	w := h.start(t, rdb, func(w *Worker) {
		must(t, w.Register("test.pruned", func(context.Context, *Job) ([]byte, error) {
			ran <- struct{}{}
			return []byte("ok"), nil
		}, WithConcurrencyLimit(1)))
	})
	leasing.OnRenewRound(w.store.(*redisStore).m, watch.endRound)
	// The first round ended may count the pages of rounds before the hook:
	// the counts start after it, before the registry is filled.
	testkit.Eventually(t, 30*time.Second, "a renew round", func() bool { return watch.ended() >= 1 })
	watch.reset()

	now := time.Now()
	for start := 0; start < stale; start += 1000 {
		groups := make(map[string]limit.Spec, 1000)
		for i := start; i < start+1000; i++ {
			groups[fmt.Sprintf("key:tenant-%d", i)] = limit.Spec{Limit: 1}
		}
		must(t, limit.Register(ctx, h.rdb, h.prefix, groups, now.Add(-limit.PruneAge-time.Hour)))
	}
	must(t, limit.Register(ctx, h.rdb, h.prefix, map[string]limit.Spec{"key:recent": {Limit: 1}}, now.Add(-time.Hour)))
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.pruned", Key: "pruned-1"})})
	select {
	case <-ran:
	case <-time.After(60 * time.Second):
		t.Fatal("the job of the limited type did not run")
	}

	want := []string{"key:recent", "type:test.pruned"}
	registered := func() []string {
		m, err := h.rdb.HGetAll(ctx, watch.key).Result()
		must(t, err)
		return slices.Sorted(maps.Keys(m))
	}
	testkit.Eventually(t, 60*time.Second, "the stale groups pruned", func() bool {
		return slices.Equal(registered(), want)
	})
	// Two more rounds ended: the worker went on pruning, and kept both.
	rounds := watch.ended()
	testkit.Eventually(t, 30*time.Second, "two more renew rounds", func() bool { return watch.ended() >= rounds+2 })
	if got := registered(); !slices.Equal(got, want) {
		t.Fatalf("registry after more rounds = %v, want %v", got, want)
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	t.Logf("limit_prune_rounds=%d limit_prune_removed_by_round=%v limit_prune_removed=%d limit_prune_pages_most=%d",
		len(watch.rounds), watch.rounds, watch.total, watch.paged)
	if watch.paged > 1 || watch.most > 2*limit.PrunePage {
		t.Errorf("a round read %d registry pages and one removed %d groups; want one page (COUNT %d) at most",
			watch.paged, watch.most, limit.PrunePage)
	}
}

// TestLimitRunningGroupRegisteredAgain: a running job's group is
// registered again every limitRefresh while the job runs, not at each
// round, so that a job running longer than limit.PruneAge keeps its group
// listed.
func TestLimitRunningGroupRegisteredAgain(t *testing.T) {
	t.Parallel()
	var l limiter
	l.init()
	now := time.Now()
	s := &limit.Slot{Group: "key:long", Member: "k|i", TTL: time.Minute, Spec: limit.Spec{Limit: 3}}
	l.running[s] = now // taken now, its group touched
	alive := func(*partTracker) bool { return true }
	for _, r := range []struct {
		at   time.Duration
		want bool
	}{
		{limitRefresh - time.Second, false},
		{limitRefresh, true},
		{limitRefresh + time.Minute, false},
		{2 * limitRefresh, true},
	} {
		slots, touched := l.round(t.Context(), alive, now.Add(r.at))
		if len(slots) != 1 {
			t.Fatalf("round at +%s: %d running slots, want 1", r.at, len(slots))
		}
		if spec, ok := touched[s.Group]; ok != r.want || (ok && spec != s.Spec) {
			t.Fatalf("round at +%s: registers %v (%+v), want %t with %+v", r.at, ok, spec, r.want, s.Spec)
		}
	}
}

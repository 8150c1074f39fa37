package lease_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// TestCluster runs the lease Manager unchanged over a real six-node Redis
// Cluster (go-redis ClusterClient). One cluster serves every subtest, in
// order; the failover subtest, which kills a master, runs last.
func TestCluster(t *testing.T) {
	c := testkit.StartCluster(t)
	t.Run("LeasesAcrossSlots", func(t *testing.T) { clusterLeasesAcrossSlots(t, c) })
	t.Run("MutualExclusion", func(t *testing.T) { clusterMutualExclusion(t, c) })
	t.Run("FencedWriteSameSlot", func(t *testing.T) { clusterFencedWrite(t, c) })
	t.Run("FenceAcrossFailover", func(t *testing.T) { clusterFenceAcrossFailover(t, c) })
}

func clusterPrefix() string { return "ct" + strings.ToLower(rand.Text()[:8]) + ":" }

// clusterManager starts a Manager over a fresh ClusterClient with a TTL of
// 2s and its own key prefix.
func clusterManager(t *testing.T, c *testkit.Cluster, prefix string) (*lease.Manager, *redis.ClusterClient) {
	t.Helper()
	cl := c.Client(t)
	return start(t, cl, lease.WithPrefix(prefix), lease.WithTTL(2*time.Second)), cl
}

// clusterLeasesAcrossSlots: leases whose keys land on all three masters are
// acquired, kept past several TTLs by the batched renewer (whose pipeline the
// ClusterClient splits per node), and released.
func clusterLeasesAcrossSlots(t *testing.T, c *testkit.Cluster) {
	prefix := clusterPrefix()
	m, cl := clusterManager(t, c, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 300
	leases := make([]*lease.Lease, n)
	for i := range leases {
		leases[i] = acquire(t, m, fmt.Sprintf("job-%d", i))
	}
	var mu sync.Mutex
	perMaster := map[string]int{}
	if err := cl.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		keys, err := node.Keys(ctx, prefix+"*").Result()
		mu.Lock()
		perMaster[node.Options().Addr] = len(keys)
		mu.Unlock()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	total := 0
	for addr, k := range perMaster {
		if k == 0 {
			t.Errorf("master %s holds no lease keys: %v", addr, perMaster)
		}
		total += k
	}
	if len(perMaster) != 3 || total != n {
		t.Fatalf("lease keys per master = %v, want %d over 3 masters", perMaster, n)
	}

	time.Sleep(5 * time.Second) // 2.5 TTLs: only renewals keep them
	for _, l := range leases {
		if l.Err() != nil {
			t.Fatalf("lease %s lost while renewed: %v", l.Name(), l.Err())
		}
	}
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	left := 0
	_ = cl.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		keys, err := node.Keys(ctx, prefix+"*").Result()
		mu.Lock()
		left += len(keys)
		mu.Unlock()
		return err
	})
	if left != 0 {
		t.Fatalf("%d lease keys left after release", left)
	}
}

// clusterMutualExclusion: two Managers (separate clients) contend for a few
// names; an observer never sees two holders, and fences grow.
func clusterMutualExclusion(t *testing.T, c *testkit.Cluster) {
	prefix := clusterPrefix()
	m1, _ := clusterManager(t, c, prefix)
	m2, _ := clusterManager(t, c, prefix)
	const names = 6
	var (
		inside   [names]atomic.Int32
		mu       sync.Mutex
		last     [names]uint64
		acquired atomic.Int64
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stop := time.Now().Add(2 * time.Second)
	for w := range 16 {
		m := []*lease.Manager{m1, m2}[w%2]
		wg.Go(func() {
			for i := w % names; time.Now().Before(stop); i = (i + 1) % names {
				l, err := m.Acquire(ctx, fmt.Sprintf("mx-%d", i))
				if errors.Is(err, lease.ErrHeld) {
					continue
				}
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				if n := inside[i].Add(1); n != 1 {
					t.Errorf("mx-%d: %d holders", i, n)
				}
				mu.Lock()
				if l.Fence() <= last[i] {
					t.Errorf("mx-%d: fence %d after %d", i, l.Fence(), last[i])
				}
				last[i] = l.Fence()
				mu.Unlock()
				acquired.Add(1)
				time.Sleep(time.Millisecond)
				inside[i].Add(-1)
				if err := l.Release(ctx); err != nil {
					t.Errorf("release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if acquired.Load() < 100 {
		t.Fatalf("only %d acquisitions: contention not exercised", acquired.Load())
	}
}

// clusterFencedWrite: a fenced script whose keys share the lease's hash tag
// runs on the Cluster; one whose key does not is refused by Redis (CROSSSLOT),
// which is why every key of a job carries its tag.
func clusterFencedWrite(t *testing.T, c *testkit.Cluster) {
	prefix := clusterPrefix()
	m, cl := clusterManager(t, c, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := redis.NewScript(fencePrelude(t) + "\nredis.call('SET', KEYS[2], ARGV[3])\nreturn 1\n")
	l := acquire(t, m, "{order-7}")
	data := prefix + "data:{order-7}"
	if got, err := leasing.Fenced(ctx, m, l, s, []string{data}, "v1"); err != nil || got != int64(1) {
		t.Fatalf("fenced write in the lease's slot = %v, %v", got, err)
	}
	if _, err := leasing.Fenced(ctx, m, l, s, []string{prefix + "data:elsewhere"}, "v2"); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("fenced write outside the lease's slot: err = %v, want CROSSSLOT", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := acquire(t, m, "{order-7}")
	// A zombie that missed the release: the script itself refuses its token
	// and fence on the node that holds the new lease.
	zombie := lease.NewRedisBackend(cl, prefix)
	if res, err := zombie.Fenced(ctx, l.Name(), leasing.Token(l), l.Fence(), s, []string{data}, []any{"zombie"}); err != nil || res != int64(scripts.StatusLost) {
		t.Fatalf("fenced write with the old token and fence = %v, %v; want StatusLost", res, err)
	}
	if v, err := cl.Get(ctx, data).Result(); err != nil || v != "v1" {
		t.Fatalf("data = %q, %v; want v1 untouched by the zombie", v, err)
	}
	_ = l2.Release(ctx)
}

// clusterFenceAcrossFailover: a master fails over and loses the last writes
// it acknowledged (the lease it granted never reached its replica: Redis
// replication is asynchronous). The new owner's
// fence is still greater than the lost one, because the fence includes the
// server's TIME in microseconds and the promoted replica's clock is not
// behind; fence/ in PostgreSQL therefore accepts the new owner and refuses
// the old one.
func clusterFenceAcrossFailover(t *testing.T, c *testkit.Cluster) {
	prefix := clusterPrefix()
	m, cl := clusterManager(t, c, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pg := testkit.Postgres(t)
	if err := fence.Migrate(ctx, pg); err != nil {
		t.Fatal(err)
	}
	apply := func(f uint64) error {
		return pgx.BeginFunc(ctx, pg, func(tx pgx.Tx) error { return fence.Apply(ctx, tx, "account:42", f) })
	}

	const name = "{transfer-42}"
	key := m.Key(name)
	marker := prefix + "marker:{transfer-42}"

	// A first owner whose writes did replicate.
	l0 := acquire(t, m, name)
	if err := apply(l0.Fence()); err != nil {
		t.Fatal(err)
	}
	if err := l0.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// The second owner's acquisition (and a marker written beside it) reach
	// the master only; its fenced effect downstream happens all the same.
	var l1 *lease.Lease
	fo, err := c.FailoverLosingWrites(ctx, key, func() error {
		var err error
		if l1, err = m.Acquire(ctx, name); err != nil {
			return err
		}
		if err := cl.Set(ctx, marker, "1", 0).Err(); err != nil {
			return err
		}
		return apply(l1.Fence())
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{key, marker} {
		if n, err := fo.Promoted.Client(t).Exists(ctx, k).Result(); err != nil || n != 0 {
			t.Fatalf("promoted replica has %s (%d, %v): the writes were not lost, the test shows nothing", k, n, err)
		}
	}
	cl.ReloadState(ctx)

	// The old owner learns it lost the lease (no key, or renewals failing
	// through the failover until its deadline).
	waitDone(t, l1, 10*time.Second)
	if !errors.Is(l1.Err(), lease.ErrLost) {
		t.Fatalf("old owner's cause = %v, want ErrLost", l1.Err())
	}

	var l2 *lease.Lease
	for l2 == nil {
		l2, err = m.Acquire(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("acquire after failover: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if l2.Fence() <= l1.Fence() {
		t.Fatalf("fence went backwards across the failover: %d after the lost %d", l2.Fence(), l1.Fence())
	}
	if err := apply(l2.Fence()); err != nil {
		t.Fatalf("fence/ refused the new owner: %v", err)
	}
	if err := apply(l1.Fence()); !errors.Is(err, fence.ErrStaleFence) {
		t.Fatalf("fence/ accepted the old owner after the new one: err = %v", err)
	}
	t.Logf("fences: replicated %d, lost in failover %d, after failover %d", l0.Fence(), l1.Fence(), l2.Fence())

	// Leave a healthy cluster: the old master rejoins as a replica.
	if err := fo.Killed.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
}

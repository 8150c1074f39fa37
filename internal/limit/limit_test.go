package limit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/limit"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func acquire(ctx context.Context, t *testing.T, c *redis.Client, prefix string, r limit.Request) limit.Answer {
	t.Helper()
	a, err := limit.Acquire(ctx, c, prefix, []limit.Request{r})
	if err != nil || a[0].Err != nil {
		t.Fatalf("acquire: %v %v", err, a)
	}
	return a[0]
}

// A group with limit 2 gives two slots, refuses a third until one is
// released, and prunes a slot whose deadline passed (a holder that died).
func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	spec := limit.Spec{Limit: 2}
	req := func(m string, ttl time.Duration) limit.Request {
		return limit.Request{Group: "g", Member: m, TTL: ttl, Spec: spec}
	}
	if a := acquire(ctx, t, c, prefix, req("a", time.Minute)); a.Status != scripts.LimitAcquired || a.Running != 1 {
		t.Fatalf("a: %+v", a)
	}
	if a := acquire(ctx, t, c, prefix, req("b", 300*time.Millisecond)); a.Status != scripts.LimitAcquired {
		t.Fatalf("b: %+v", a)
	}
	a := acquire(ctx, t, c, prefix, req("c", time.Minute))
	if a.Status != scripts.LimitFull || a.Wait <= 0 || a.Wait > 300*time.Millisecond {
		t.Fatalf("c with the group full: %+v", a)
	}
	// b's holder stops renewing: its slot is pruned after its TTL.
	testkit.Eventually(t, 5*time.Second, "b's slot pruned", func() bool {
		return acquire(ctx, t, c, prefix, req("c", time.Minute)).Status == scripts.LimitAcquired
	})
	if err := limit.Release(ctx, c, prefix, []limit.Slot{{Group: "g", Member: "a"}}); err != nil {
		t.Fatal(err)
	}
	if a := acquire(ctx, t, c, prefix, req("d", time.Minute)); a.Status != scripts.LimitAcquired {
		t.Fatalf("d after a's release: %+v", a)
	}
	n, err := limit.Renew(ctx, c, prefix, []limit.Slot{{Group: "g", Member: "c", TTL: time.Minute}, {Group: "g", Member: "d", TTL: time.Minute},
		{Group: "g", Member: "a", TTL: time.Minute}})
	if err != nil || n != 2 {
		t.Fatalf("renew = %d, %v; want 2 (a was released and is not added back)", n, err)
	}
	info, err := limit.Read(ctx, c, prefix, "g")
	if err != nil || len(info) != 1 || info[0].Running != 2 {
		t.Fatalf("read = %+v, %v", info, err)
	}
}

// A hold refuses every slot of its group until it ends; other groups are
// not held.
func TestHold(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	if _, err := limit.Hold(ctx, c, prefix, "g", 400*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	left, err := limit.Hold(ctx, c, prefix, "g", 10*time.Millisecond)
	if err != nil || left < 300*time.Millisecond {
		t.Fatalf("a shorter hold replaced a longer one: left %v, %v", left, err)
	}
	a := acquire(ctx, t, c, prefix, limit.Request{Group: "g", Member: "x", TTL: time.Minute})
	if a.Status != scripts.LimitHeld || a.Wait <= 0 {
		t.Fatalf("held group: %+v", a)
	}
	if a := acquire(ctx, t, c, prefix, limit.Request{Group: "h", Member: "x", TTL: time.Minute}); a.Status != scripts.LimitAcquired {
		t.Fatalf("another group: %+v", a)
	}
	testkit.Eventually(t, 5*time.Second, "the hold ends", func() bool {
		return acquire(ctx, t, c, prefix, limit.Request{Group: "g", Member: "x", TTL: time.Minute}).Status == scripts.LimitAcquired
	})
}

// A rate of 10/s with a burst of 2 lets two jobs start at once, then one
// each 100ms.
func TestRate(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	spec := limit.Spec{Rate: 10, Burst: 2}
	for i, m := range []string{"a", "b"} {
		if a := acquire(ctx, t, c, prefix, limit.Request{Group: "r", Member: m, TTL: time.Minute, Spec: spec}); a.Status != scripts.LimitAcquired {
			t.Fatalf("burst job %d: %+v", i, a)
		}
	}
	a := acquire(ctx, t, c, prefix, limit.Request{Group: "r", Member: "c", TTL: time.Minute, Spec: spec})
	if a.Status != scripts.LimitRated || a.Wait <= 0 || a.Wait > 200*time.Millisecond {
		t.Fatalf("third job: %+v", a)
	}
}

// registryReads counts the registry fields Redis returned to a client
// (HGETALL, HMGET, HSCAN of the registry key).
type registryReads struct {
	key string
	n   atomic.Int64
}

func (r *registryReads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *registryReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			r.count(c)
		}
		return err
	}
}

func (r *registryReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.count(cmd)
		return err
	}
}

func (r *registryReads) count(cmd redis.Cmder) {
	if len(cmd.Args()) < 2 || cmd.Args()[1] != r.key {
		return
	}
	switch c := cmd.(type) {
	case *redis.MapStringStringCmd:
		r.n.Add(int64(len(c.Val())))
	case *redis.SliceCmd:
		r.n.Add(int64(len(c.Val())))
	case *redis.ScanCmd:
		ks, _ := c.Val()
		r.n.Add(int64(len(ks) / 2))
	}
}

// Read's registry reads are bounded: the registry keeps every group ever
// used (a tenant each with WithLimitKey), so listing reads at most about
// maxGroups of them, and reading groups by name reads only theirs.
func TestReadRegistryBounded(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	const groups = 30000
	now := time.Now()
	for start := 0; start < groups; start += 1000 {
		m := make(map[string]limit.Spec, 1000)
		for i := start; i < start+1000; i++ {
			m[fmt.Sprintf("key:tenant-%d", i)] = limit.Spec{Limit: 2}
		}
		if err := limit.Register(ctx, c, prefix, m, now); err != nil {
			t.Fatal(err)
		}
	}
	reads := &registryReads{key: limit.RegistryKey(prefix)}
	c.AddHook(reads)

	in, err := limit.Read(ctx, c, prefix, "key:tenant-7")
	if err != nil || len(in) != 1 || in[0].Spec.Limit != 2 {
		t.Fatalf("read one group = %+v, %v", in, err)
	}
	if n := reads.n.Load(); n != 1 {
		t.Fatalf("reading one group read %d registry fields, want 1", n)
	}
	reads.n.Store(0)
	all, err := limit.Read(ctx, c, prefix)
	if err != nil || len(all) == 0 || len(all) > 10000 {
		t.Fatalf("read every group: %d groups, %v", len(all), err)
	}
	if n := reads.n.Load(); n > 11000 {
		t.Fatalf("listing the groups read %d registry fields of %d, want at most about 10000", n, groups)
	}
}

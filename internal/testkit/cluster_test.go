package testkit

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestCluster forms a cluster, writes through a ClusterClient to all three
// masters, kills the master of one key, checks that its replica took over with
// the replicated data, and restarts the killed node as a replica.
func TestCluster(t *testing.T) {
	c := StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := c.Client(t)

	masters, err := c.Masters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(masters) != 3 {
		t.Fatalf("masters = %d, want 3", len(masters))
	}
	used := map[string]bool{}
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		if err := cl.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		m, err := c.MasterFor(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		used[m.Addr()] = true
	}
	if len(used) != 3 {
		t.Fatalf("100 keys landed on %d masters, want 3", len(used))
	}
	// WAIT makes the write durable on the replica before the kill, so the
	// promoted replica must have it.
	m, err := c.MasterFor(ctx, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := m.Client(t).Do(ctx, "WAIT", 1, 2000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT = %d, %v", n, err)
	}
	fo, err := c.KillMaster(ctx, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if fo.Killed.Running() || fo.Killed != m {
		t.Fatalf("killed %v running=%v, want %v dead", fo.Killed.Addr(), fo.Killed.Running(), m.Addr())
	}
	now, err := c.MasterFor(ctx, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if now != fo.Promoted {
		t.Fatalf("k1 served by %s, want promoted %s", now.Addr(), fo.Promoted.Addr())
	}
	cl.ReloadState(ctx)
	if v, err := cl.Get(ctx, "k1").Int(); err != nil || v != 1 {
		t.Fatalf("k1 after failover = %d, %v", v, err)
	}

	if err := fo.Killed.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if role, err := fo.Killed.Role(ctx); err != nil || role != "slave" {
		t.Fatalf("restarted node role = %q, %v; want slave", role, err)
	}
}

package fleet

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestPublishListStopExpire: two workers publish and are both listed with
// their identity and load; one shuts down and is gone from the next
// listing at once; the other stops publishing without a word (kill -9)
// and drops out when its status expires, a few intervals later. The
// series of both still counts in the fleet's last hour.
func TestPublishListStopExpire(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	ctx := t.Context()
	start := func(name string, running int) *Publisher {
		t.Helper()
		p, err := NewPublisher(Config{Redis: rdb, Prefix: prefix, Interval: 200 * time.Millisecond,
			Identity: Identity{ID: name, Topics: []string{"jobs"}, Group: "g", Concurrency: 4, Version: "test"},
			Load:     func() Load { return Load{Running: running, LeasesHeld: running, Counters: Counters{Succeeded: 10}} }})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Shutdown(context.WithoutCancel(ctx)) })
		return p
	}
	a, b := start("worker-a", 2), start("worker-b", 3)
	ids := func() []string {
		t.Helper()
		v, err := Read(ctx, rdb, prefix, MaxSamples)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, w := range v.Workers {
			out = append(out, w.ID)
		}
		return out
	}
	v, err := Read(ctx, rdb, prefix, MaxSamples)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Workers) != 2 || v.Running != 5 || v.Counters.Succeeded != 20 || v.Workers[0].Concurrency != 4 ||
		v.Workers[0].PID == 0 || v.Workers[0].Host == "" || len(v.Series) == 0 {
		t.Fatalf("view %+v: want both workers, 5 running, 20 succeeded, a series", v)
	}

	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ids(); !slices.Equal(got, []string{"worker-b"}) {
		t.Fatalf("after a's shutdown: %v, want worker-b only", got)
	}

	// b stops publishing and leaves its status behind, as a killed process.
	b.once.Do(func() { close(b.stop) })
	<-b.done
	if got := ids(); !slices.Equal(got, []string{"worker-b"}) {
		t.Fatalf("right after b stopped: %v, want worker-b still (until its TTL)", got)
	}
	testkit.Eventually(t, 10*time.Second, "the killed worker's status expires", func() bool { return len(ids()) == 0 })
	if v, err = Read(ctx, rdb, prefix, MaxSamples); err != nil || len(v.Series) == 0 || v.Series[len(v.Series)-1].Running != 5 {
		t.Fatalf("series after both stopped: %+v, %v: want their last samples (5 running)", v.Series, err)
	}
}

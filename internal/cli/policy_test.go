package cli

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// TestLeastPrivilegeRedis runs `worker run` and `worker inspect` as a Redis
// user with the README's ACL (no CONFIG, no INFO): refused with the fix named
// until --redis-maxmemory-policy (or LEASEHOLD_REDIS_MAXMEMORY_POLICY) states
// the policy, then the worker starts and consumes.
func TestLeastPrivilegeRedis(t *testing.T) {
	t.Parallel()
	const password = "lp-cli-s3cret"
	srv := testkit.StartRedis(t, testkit.WithACLUser("worker", password, testkit.ProjectACLRules("lh:")...))
	url := "redis://worker:" + password + "@" + srv.Addr() + "/0"
	k := testkit.StartKafka(t)
	topic := k.Topic(t, "cli-lp", 1)
	k.CreateTopic(t, topic+".dlq", 1)
	ctx := context.Background()
	env := map[string]string{"REDIS_URL": url}
	args := []string{"run", "--brokers", strings.Join(k.Brokers(), ","), "--topics", topic, "--group", "g-" + topic,
		"--prefix", "lh:", "--lease-ttl", "2s", "--heartbeat-interval", "500ms", "--fetch-max-wait", "250ms"}

	r := run(ctx, t, env, args...)
	wantFailure(t, r, 1, "+info")
	if strings.Contains(r.stderr, password) {
		t.Fatalf("the error shows the password: %q", r.stderr)
	}
	wantFailure(t, run(ctx, t, env, "inspect", "k1"), 1, "--redis-maxmemory-policy")
	wantFailure(t, run(ctx, t, env, append(args, "--redis-maxmemory-policy", "lru")...), 2, `maxmemory-policy "lru"`)
	wantFailure(t, run(ctx, t, env, append(args, "--redis-maxmemory-policy", "allkeys-lru")...), 1, "evict")

	if r := run(ctx, t, env, "inspect", "--redis-maxmemory-policy", "noeviction", "k1"); r.code != 0 ||
		!strings.Contains(r.stdout, "record") {
		t.Fatalf("inspect with a stated policy: %+v", r)
	}
	envPolicy := map[string]string{"REDIS_URL": url, "LEASEHOLD_REDIS_MAXMEMORY_POLICY": "noeviction"}
	rctx, cancel := context.WithCancel(ctx)
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(rctx, args, &Env{Stdout: &out, Stderr: &errb, Getenv: func(n string) string { return envPolicy[n] }})
	}()
	waitLine(t, &errb, regexp.MustCompile(`(worker started)`))
	if r := run(ctx, t, nil, "enqueue", "--brokers", strings.Join(k.Brokers(), ","), "--topic", topic,
		"--count", "3", "--sleep", "10ms", "--progress=false"); r.code != 0 {
		t.Fatalf("enqueue: %+v", r)
	}
	end := k.EndOffsets(t, topic)
	deadline := time.Now().Add(30 * time.Second)
	for k.Committed(t, "g-"+topic, topic)[0] != end[0] {
		if time.Now().After(deadline) {
			t.Fatalf("jobs not consumed as the least-privilege user; log:\n%s", errb.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exit %d: %s", code, errb.String())
	}
}

// TestRunShardsReachStore: run's --shards reaches the idempotency store (64
// shards put every key's tag below 64, where the default spreads them over
// 4096), and 0 leaves the default.
func TestRunShardsReachStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, prefix, rdb := sharedRedisURL(t)
	m, err := lease.NewManager(rdb, lease.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	none := ""
	tags := func(sub string, shards int) (highest int) {
		c := runConfig{shards: shards, maxmemoryPolicy: &none}
		opts, err := c.storeOpts()
		if err != nil {
			t.Fatal(err)
		}
		s, err := idempotency.New(ctx, rdb, m, append(opts, idempotency.WithPrefix(prefix+sub))...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			var n int
			if _, err := fmt.Sscanf(s.Tag(fmt.Sprintf("order-%d", i)), "{i:%d}", &n); err != nil {
				t.Fatal(err)
			}
			highest = max(highest, n)
		}
		return highest
	}
	if h := tags("a:", 64); h >= 64 {
		t.Errorf("--shards 64: a key's tag names shard %d", h)
	}
	if h := tags("b:", 0); h < 64 || h >= idempotency.DefaultShards {
		t.Errorf("--shards 0: the highest of 50 keys' shards is %d, want the default's spread (64 to %d)", h, idempotency.DefaultShards-1)
	}
}

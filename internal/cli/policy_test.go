package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
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

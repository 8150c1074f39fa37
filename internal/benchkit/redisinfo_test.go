package benchkit

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/testkit"
)

// RedisMainCPU reads the main thread's CPU, which grows with the work the
// server does.
func TestRedisMainCPU(t *testing.T) {
	srv := testkit.StartRedis(t)
	// The busy script takes about 50 ms of the server's CPU, and as long
	// as a loaded machine leaves it to get them: no 1s read timeout.
	opts := srv.Options()
	opts.ReadTimeout = time.Minute
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	before, err := RedisMainCPU(ctx, c)
	if err != nil {
		t.Fatalf("RedisMainCPU: %v", err)
	}
	// About 50 ms of server CPU: a script that loops.
	if err := c.Eval(ctx, "local n = 0 for i = 1, 5000000 do n = n + i end return 1", nil).Err(); err != nil {
		t.Fatalf("EVAL: %v", err)
	}
	after, err := RedisMainCPU(ctx, c)
	if err != nil {
		t.Fatalf("RedisMainCPU: %v", err)
	}
	if after-before < 0.005 {
		t.Errorf("main-thread CPU grew by %.4f s over a busy script, want at least 0.005", after-before)
	}

	closed := redis.NewClient(srv.Options())
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := RedisMainCPU(ctx, closed); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("RedisMainCPU on a closed client: %v, want an error", err)
	}
}

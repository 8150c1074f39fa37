package main

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The quickstart runs every job's handler once and answers the duplicate
// from the cache, then returns by itself.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := redisKeys(t, "quickstart:*")
	var out bytes.Buffer
	if err := run(ctx, &out, redisURL()); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, &out)
	}
	for k := range redisKeys(t, "quickstart:*") {
		if !before[k] {
			t.Errorf("the example left the key %s behind", k)
		}
	}
	got := out.String()
	for _, key := range []string{"signup-1", "signup-2", "signup-3"} {
		if n := strings.Count(got, "handler   "+key+": sending"); n != 1 {
			t.Errorf("the handler ran %d times for %s, want once", n, key)
		}
	}
	for _, line := range []string{
		`duplicate signup-1: not run again, cached result {"message_id":"msg-signup-1"}`,
		"worker    handlers succeeded: 3, duplicates replayed: 1",
	} {
		if n := strings.Count(got, line); n != 1 {
			t.Errorf("%q printed %d times, want once", line, n)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", got)
	}
}

// Without Redis the quickstart stops at once and says what to do.
func TestRunWithoutRedis(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run(ctx, io.Discard, "redis://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "does not answer (start one, or set REDIS_URL)") {
		t.Fatalf("run without Redis: %v, want the error that says how to fix it", err)
	}
}

// redisKeys returns the keys that match pattern on the example's Redis.
func redisKeys(t *testing.T, pattern string) map[string]bool {
	t.Helper()
	opts, err := redis.ParseURL(redisURL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer func() { _ = rdb.Close() }()
	keys := map[string]bool{}
	iter := rdb.Scan(context.Background(), 0, pattern, 100).Iterator()
	for iter.Next(context.Background()) {
		keys[iter.Val()] = true
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("list the keys %s: %v", pattern, err)
	}
	return keys
}

func redisURL() string { return cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379") }

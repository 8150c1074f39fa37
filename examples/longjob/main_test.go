package main

import (
	"bytes"
	"cmp"
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The first attempt loses its lease after checkpoint 3 and stops with
// ErrLeaseLost; the second is a takeover with a newer fence that resumes
// from the first attempt's last checkpoint and completes. No chunk is done
// twice and none is skipped.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := redisKeys(t, "longjob:*")
	var out bytes.Buffer
	if err := run(ctx, &out, redisURL()); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, &out)
	}
	for k := range redisKeys(t, "longjob:*") {
		if !before[k] {
			t.Errorf("the example left the key %s behind", k)
		}
	}
	got := out.String()
	defer func() {
		if t.Failed() {
			t.Logf("output:\n%s", got)
		}
	}()

	starts := regexp.MustCompile(`(?m)^attempt (\d+): starts at chunk (\d+) of 8 \(fence (\d+), takeover (true|false)\)$`).
		FindAllStringSubmatch(got, -1)
	if len(starts) != 2 {
		t.Fatalf("%d attempts started, want 2", len(starts))
	}
	if a1, a2 := starts[0], starts[1]; a1[1] != "1" || a1[2] != "1" || a1[4] != "false" || a2[1] != "2" || a2[4] != "true" {
		t.Errorf("attempts started as %q and %q, want attempt 1 at chunk 1 and attempt 2 as a takeover", a1[0], a2[0])
	}
	if f1, f2 := atoi(t, starts[0][3]), atoi(t, starts[1][3]); f2 <= f1 {
		t.Errorf("the takeover's fence %d is not above the first attempt's %d", f2, f1)
	}

	// Checkpoints, in the order stored: attempt 1 stores 1..k, attempt 2
	// k+1..8 and starts at chunk k+1.
	cps := regexp.MustCompile(`(?m)^attempt (\d+): checkpoint (\d+) stored$`).FindAllStringSubmatch(got, -1)
	last1 := 0
	for i, cp := range cps {
		if n := atoi(t, cp[2]); n != i+1 {
			t.Fatalf("checkpoint %d stored in position %d, want each of 1..8 once, in order", n, i+1)
		}
		if cp[1] == "1" {
			last1 = i + 1
		}
	}
	if len(cps) != 8 {
		t.Errorf("%d checkpoints stored, want 8", len(cps))
	}
	if last1 < expireAt {
		t.Errorf("attempt 1 stored checkpoints up to %d, want at least %d", last1, expireAt)
	}
	if resume := atoi(t, starts[1][2]); resume != last1+1 {
		t.Errorf("attempt 2 starts at chunk %d, want %d (after attempt 1's last checkpoint)", resume, last1+1)
	}
	lost := "attempt 1: stops in chunk " + strconv.Itoa(last1+1) + ": "
	if !strings.Contains(got, lost) || !strings.Contains(got, "(errors.Is(err, leasehold.ErrLeaseLost) = true)") {
		t.Errorf("attempt 1 did not stop in chunk %d with an error matching ErrLeaseLost", last1+1)
	}
	if !strings.HasSuffix(got, "completed: report of 8 chunks\n") {
		t.Error("the job did not complete last")
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
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

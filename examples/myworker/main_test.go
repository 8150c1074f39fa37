package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/devkafka"
	"github.com/leasehold/leasehold/internal/freeport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func redisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// The binary, as deploy/Dockerfile builds it, runs report.build jobs that
// its own enqueue command produced, and its inspect command shows each one
// completed with its result.
func TestMyWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test builds the binary and runs it on an embedded Kafka")
	}
	bin := filepath.Join(t.TempDir(), "myworker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// A development Kafka in the test process: the binary, as a team's
	// binary, has no embedded one (kfake stays out of it).
	port, err := freeport.Port(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	addrs, stopKafka, err := devkafka.Start(context.Background(), "127.0.0.1", port,
		map[string]int32{"reports": 6, "reports.dlq": 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopKafka)
	kafka := addrs[0]
	prefix := "myworker:" + strings.ToLower(rand.Text()[:8]) + ":"
	t.Cleanup(func() { deleteKeys(t, prefix) })
	env := append(os.Environ(), "REDIS_URL="+redisURL(), "LEASEHOLD_PREFIX="+prefix, "LEASEHOLD_TOPICS=reports",
		"OTEL_TRACES_EXPORTER=none")

	var logs syncBuffer
	worker := exec.Command(bin, "run", "--brokers", kafka, "--fetch-max-wait", "250ms")
	worker.Env, worker.Stdout, worker.Stderr = env, &logs, &logs
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- worker.Wait() }()
	defer func() {
		_ = worker.Process.Kill()
		t.Logf("worker exit after kill: %v", <-exited)
	}()

	enq := exec.Command(bin, "enqueue", "--brokers", kafka, "--type", "report.build", "--count", "2",
		"--key-prefix", "rep", "--progress=false")
	enq.Env = env
	if out, err := enq.CombinedOutput(); err != nil {
		t.Fatalf("enqueue: %v\n%s", err, out)
	}
	for _, key := range []string{"rep-0", "rep-1"} {
		var out []byte
		waitFor(t, key+" completed", &logs, func() bool {
			ins := exec.Command(bin, "inspect", key)
			ins.Env = env
			out, _ = ins.Output()
			return completed.Match(out)
		})
		if !result.Match(out) {
			t.Errorf("inspect %s shows no result:\n%s", key, out)
		}
	}

	_ = worker.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("run after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run did not stop in 30s after SIGTERM:\n%s", logs.String())
	}
}

// completed and result match inspect's lines of a completed record.
var (
	completed = regexp.MustCompile(`(?m)^record\s+COMPLETED$`)
	result    = regexp.MustCompile(`(?m)^result\s+[1-9][0-9]* bytes$`)
)

// waitFor polls cond for 30s.
func waitFor(t *testing.T, what string, logs *syncBuffer, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in 30s; worker output:\n%s", what, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deleteKeys deletes the keys under prefix.
func deleteKeys(t *testing.T, prefix string) {
	opts, err := redis.ParseURL(redisURL())
	if err != nil {
		t.Error(err)
		return
	}
	rdb := redis.NewClient(opts)
	defer func() { _ = rdb.Close() }()
	ctx := context.Background()
	it := rdb.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for it.Next(ctx) {
		_ = rdb.Del(ctx, it.Val()).Err()
	}
	if err := it.Err(); err != nil {
		t.Error(err)
	}
}

package workercmd_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/devkafka"
	"github.com/leasehold/leasehold/internal/freeport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// helloMain is a program's whole main: its own job type, and its own flag
// (with an environment variable) that the job reads.
const helloMain = `package main

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/workercmd"
)

func main() {
	var greeting *string
	workercmd.Main(
		workercmd.WithFlags(func(f *workercmd.FlagSet) {
			greeting = f.String("greeting", "HELLO_GREETING", "hello", "what hello.say says")
		}),
		workercmd.Register(func(_ context.Context, w *leasehold.Worker, _ *workercmd.Setup) error {
			return w.Register("hello.say", func(_ context.Context, job *leasehold.Job) ([]byte, error) {
				fmt.Printf("%s %s\n", *greeting, job.Payload)
				return nil, nil
			})
		}))
}
`

// buildHello writes helloMain into a directory of the module (under
// testdata, which ./... leaves out), builds it and returns the binary.
func buildHello(t *testing.T) string {
	t.Helper()
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("testdata", "hello-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.RemoveAll(dir)
		_ = os.Remove("testdata") // when empty
	})
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(helloMain), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(helloMain, "\n"); n > 25 {
		t.Errorf("the program is %d lines", n)
	}
	bin := filepath.Join(t.TempDir(), "hello")
	out, err := exec.Command("go", "build", "-o", bin, "./"+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./%s: %v\n%s", dir, err, out)
	}
	return bin
}

// lines collects a process's output and finds lines in it.
type lines struct {
	mu  sync.Mutex
	all []string
	new chan struct{}
}

func readLines(r io.Reader) *lines {
	l := &lines{new: make(chan struct{}, 1)}
	go func() {
		s := bufio.NewScanner(r)
		for s.Scan() {
			l.mu.Lock()
			l.all = append(l.all, s.Text())
			l.mu.Unlock()
			select {
			case l.new <- struct{}{}:
			default:
			}
		}
	}()
	return l
}

// wait returns the first line containing s, failing after 30s.
func (l *lines) wait(t *testing.T, s string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		for _, line := range l.all {
			if strings.Contains(line, s) {
				l.mu.Unlock()
				return line
			}
		}
		l.mu.Unlock()
		select {
		case <-l.new:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no line with %q in 30s:\n%s", s, l.String())
		}
	}
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// devBroker starts an in-memory Kafka in the test process with topics
// (name to partitions) and returns its address. A program built with
// workercmd has no embedded Kafka of its own (kfake stays out of it).
func devBroker(t *testing.T, topics map[string]int32) string {
	t.Helper()
	port, err := freeport.Port(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	addrs, stop, err := devkafka.Start(context.Background(), "127.0.0.1", port, topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addrs[0]
}

func redisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// A program of a few lines built on workercmd gets the worker's command
// line with its own flag: run -h lists it with its environment variable,
// run consumes its job type (the job reads the flag's value from the
// environment), the operator commands see the job's record, and SIGTERM
// ends it with exit code 0.
func TestOwnBinary(t *testing.T) {
	bin := buildHello(t)

	help, err := exec.Command(bin, "run", "-h").Output()
	if err != nil {
		t.Fatalf("run -h: %v", err)
	}
	for _, s := range []string{"usage: hello run [flags]", "-greeting string\n    \twhat hello.say says (env HELLO_GREETING) (default \"hello\")",
		"(env LEASEHOLD_BROKERS)", "(env REDIS_URL)"} {
		if !strings.Contains(string(help), s) {
			t.Errorf("run -h lacks %q:\n%s", s, help)
		}
	}
	usage, _ := exec.Command(bin, "help").Output()
	for _, c := range []string{"run", "inspect", "leases", "expire", "reset", "dlq", "capacity", "compensations", "version"} {
		if !strings.Contains(string(usage), "\n  "+c+" ") {
			t.Errorf("help lacks the command %s:\n%s", c, usage)
		}
	}
	if strings.Contains(string(usage), "payment-stub") || strings.Contains(string(usage), "  demo ") {
		t.Errorf("help lists cmd/worker's demo commands:\n%s", usage)
	}

	prefix := "wcmd:" + strings.ToLower(rand.Text()[:8]) + ":"
	t.Cleanup(func() { deleteKeys(t, prefix) })
	kafka := devBroker(t, map[string]int32{"hello.jobs": 6, "hello.jobs.dlq": 1})
	cmd := exec.Command(bin, "run", "--brokers", kafka, "--topics", "hello.jobs",
		"--group", "hello", "--prefix", prefix, "--fetch-max-wait", "250ms", "--shutdown-timeout", "10s")
	cmd.Env = append(os.Environ(), "HELLO_GREETING=howdy", "REDIS_URL="+redisURL(), "OTEL_TRACES_EXPORTER=none")
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out, logs := readLines(stdout), readLines(stderr)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		t.Logf("exit after kill: %v", <-exited)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.DefaultProduceTopic("hello.jobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := leasehold.Enqueue(ctx, cl, leasehold.NewJob{Type: "hello.say", Key: "greet-1", Payload: []byte(`"world"`)}); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if got := out.wait(t, "world"); got != `howdy "world"` {
		t.Errorf("the job printed %q, want %q (the greeting from HELLO_GREETING)", got, `howdy "world"`)
	}

	// An operator command of the program reads the job's record.
	var info struct {
		Record struct{ State string } `json:"record"`
	}
	deadline := time.Now().Add(15 * time.Second)
	for !strings.EqualFold(info.Record.State, "completed") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		ins := exec.Command(bin, "inspect", "--json", "--prefix", prefix, "greet-1")
		ins.Env = append(os.Environ(), "REDIS_URL="+redisURL())
		b, err := ins.Output()
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		if err := json.Unmarshal(b, &info); err != nil {
			t.Fatalf("inspect --json: %v: %s", err, b)
		}
	}
	if !strings.EqualFold(info.Record.State, "completed") {
		t.Errorf("inspect greet-1: state %q, want completed", info.Record.State)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the deferred Kill
		if err != nil {
			t.Errorf("run after SIGTERM: %v\n%s", err, logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run did not stop in 30s after SIGTERM:\n%s", logs)
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

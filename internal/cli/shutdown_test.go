package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/testkit"
)

// startedRun is a `worker run` under test: its log, a way to send it the
// next signal, and its exit code.
type startedRun struct {
	log    *syncBuffer
	signal func()
	wait   func() int
}

// testDrain runs a 60s job on a `worker run` that start starts with args
// and env, then signals it twice. After the first signal it checks the
// drain: /healthz still 200, /readyz 503, the progress logged (jobs left,
// time left). After the second it checks the forced exit: within seconds,
// exit 1 with one sentence, and the job's lease released (its TTL, 20s,
// is far from over).
func testDrain(t *testing.T, start func(args []string, env map[string]string) startedRun) {
	url, prefix, rdb := sharedRedisURL(t)
	k := testkit.StartKafka(t)
	topic := k.Topic(t, "drain", 1)
	k.CreateTopic(t, topic+".dlq", 1)
	brokers := strings.Join(k.Brokers(), ",")
	w := start([]string{"run", "--brokers", brokers, "--topics", topic, "--group", "g-" + topic, "--prefix", prefix,
		"--http", "127.0.0.1:0", "--shutdown-timeout", "30s", "--lease-ttl", "20s",
		"--heartbeat-interval", "500ms", "--fetch-max-wait", "250ms"}, map[string]string{"REDIS_URL": url})
	addr := waitLine(t, w.log, regexp.MustCompile(`http listening" addr=(\S+)`))
	waitStatus(t, "http://"+addr+"/readyz", 200, w.log)

	ctx := context.Background()
	if r := run(ctx, t, nil, "enqueue", "--brokers", brokers, "--topics", topic, "--count", "1", "--sleep", "60s",
		"--steps", "60", "--key-prefix", "drain", "--progress=false"); r.code != 0 {
		t.Fatalf("enqueue: %+v", r)
	}
	in := inspect.New(rdb, inspect.WithPrefix(prefix))
	defer func() { _ = in.Close(ctx) }()
	leaseOf := func() bool {
		ls, err := listLeases(ctx, in, 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(ls) == 1 && ls[0].Name == "drain-0"
	}
	// The job runs once its lease is held and its first heartbeat stored: a
	// lease alone is the claim's, taken before the worker counts the job
	// as running (a signal then would find no job left to drain).
	running := func() bool {
		if !leaseOf() {
			return false
		}
		ki, err := in.Key(ctx, "drain-0")
		return err == nil && ki.HasDetails
	}
	deadline := time.Now().Add(20 * time.Second)
	for !running() {
		if time.Now().After(deadline) {
			t.Fatalf("the job never started; log:\n%s", w.log)
		}
		time.Sleep(50 * time.Millisecond)
	}

	w.signal()
	deadline = time.Now().Add(10 * time.Second)
	for httpStatus("http://"+addr+"/readyz") == 200 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := httpStatus("http://" + addr + "/readyz"); got != 503 {
		t.Errorf("/readyz during the drain: %d, want 503", got)
	}
	if got := httpStatus("http://" + addr + "/healthz"); got != 200 {
		t.Errorf("/healthz during the drain: %d, want 200", got)
	}
	if n := waitLine(t, w.log, regexp.MustCompile(`shutting down: .* jobs_left=(\d+) time_left=30s`)); n != "1" {
		t.Errorf("shutting down with %s jobs left, want 1", n)
	}
	// Progress every 3s (a tenth of the 30s drain).
	left := waitLine(t, w.log, regexp.MustCompile(`msg=draining jobs_left=1 time_left=(\S+)`))
	if d, err := time.ParseDuration(left); err != nil || d >= 30*time.Second || d < 20*time.Second {
		t.Errorf("draining time_left=%s: want between 20s and 30s", left)
	}
	if got := httpStatus("http://" + addr + "/readyz"); got != 503 {
		t.Errorf("/readyz later in the drain: %d, want 503", got)
	}
	if !leaseOf() {
		t.Errorf("the job's lease is gone during the drain; log:\n%s", w.log)
	}

	w.signal()
	forced := time.Now()
	code := w.wait()
	if took := time.Since(forced); took > 10*time.Second {
		t.Errorf("the forced exit took %v", took)
	}
	if code != 1 {
		t.Errorf("exit code %d after a second signal, want 1", code)
	}
	want := "worker run: forced exit on a second signal: running jobs cancelled: 1; " +
		"their leases were released and their records will be delivered again\n"
	if !strings.HasSuffix(w.log.String(), want) {
		t.Errorf("log does not end with %q:\n%s", want, w.log)
	}
	if leaseOf() {
		t.Error("the job's lease is still held after the forced exit, want it released")
	}
}

// TestRunDrainsThenForcesExit drives Main as cmd/worker does: the first
// signal cancels its context, the second closes Env.Force.
func TestRunDrainsThenForcesExit(t *testing.T) {
	t.Parallel()
	testDrain(t, func(args []string, env map[string]string) startedRun {
		ctx, cancel := context.WithCancel(context.Background())
		force := make(chan struct{})
		var log syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- Main(ctx, args, &Env{Stdout: &log, Stderr: &log, Force: force, Getenv: func(n string) string { return env[n] }})
		}()
		t.Cleanup(cancel)
		signals := 0
		return startedRun{log: &log, signal: func() {
			if signals++; signals == 1 {
				cancel()
			} else {
				close(force)
			}
		}, wait: func() int {
			select {
			case c := <-done:
				return c
			case <-time.After(60 * time.Second):
				t.Fatalf("run did not return; log:\n%s", log.String())
				return 0
			}
		}}
	})
}

// TestBinaryDrainsThenForcesExit runs the built cmd/worker and sends it
// SIGTERM, then SIGINT.
func TestBinaryDrainsThenForcesExit(t *testing.T) {
	t.Parallel()
	bin := workerBinary(t)
	testDrain(t, func(args []string, env map[string]string) startedRun {
		cmd := exec.Command(bin, args...)
		cmd.Env = os.Environ()
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var log syncBuffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		sigs := []syscall.Signal{syscall.SIGTERM, syscall.SIGINT}
		return startedRun{log: &log, signal: func() {
			if err := cmd.Process.Signal(sigs[0]); err != nil {
				t.Fatal(err)
			}
			sigs = sigs[1:]
		}, wait: func() int {
			select {
			case <-exited:
				return cmd.ProcessState.ExitCode()
			case <-time.After(60 * time.Second):
				t.Fatalf("worker did not exit; log:\n%s", log.String())
				return 0
			}
		}}
	})
}

// workerBinary builds cmd/worker into the test's temporary directory, with
// the extra go build flags, and returns its path.
func workerBinary(t *testing.T, flags ...string) string {
	t.Helper()
	testkit.SkipShort(t, "cmd/worker built")
	bin := filepath.Join(t.TempDir(), "worker")
	cmd := exec.Command("go", append(append([]string{"build", "-o", bin}, flags...), "./cmd/worker")...)
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/worker: %v\n%s", err, out)
	}
	return bin
}

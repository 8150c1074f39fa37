package chaos

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/testkit"
)

// buildWorker builds cmd/worker into dir.
func buildWorker(t *testing.T, dir string) string {
	t.Helper()
	testkit.SkipShort(t, "the worker binary built and run (chaos)")
	bin := filepath.Join(dir, "worker")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/leasehold/leasehold/cmd/worker").CombinedOutput()
	if err != nil {
		t.Fatalf("build worker: %v\n%s", err, out)
	}
	return bin
}

// TestWorkerKeepsSecretsOutOfLogsAndSpans runs a real worker against a Redis
// that requires a password (given in the Redis URL), with a PostgreSQL URL
// that carries a password too, debug logging and every span printed to
// stdout, lets it run jobs, and greps everything it wrote for the secrets.
// A second worker with a wrong password must fail without printing it.
func TestWorkerKeepsSecretsOutOfLogsAndSpans(t *testing.T) {
	t.Parallel()
	const (
		redisPass = "rp-8Jd2kQ9zLx"
		pgPass    = "pp-Q7v1mN3sTw"
		wrongPass = "wp-X4c6bV8nHr"
	)
	dir := t.TempDir()
	bin := buildWorker(t, dir)
	srv := testkit.StartRedis(t, testkit.WithPassword(redisPass))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	bport, err := FreePort(ctx)
	if err != nil {
		t.Fatal(err)
	}
	brokerAddr := "127.0.0.1:" + strconv.Itoa(bport)
	broker := &Proc{Name: "dev-broker", Path: bin, LogPath: filepath.Join(dir, "broker.log"),
		Args: []string{"dev-broker", "--listen", brokerAddr}}
	if err := broker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = broker.Stop(5 * time.Second) })
	if err := waitTCP(ctx, broker, brokerAddr); err != nil {
		t.Fatal(err)
	}
	sport, err := FreePort(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stubAddr := "127.0.0.1:" + strconv.Itoa(sport)
	stub := &Proc{Name: "payment-stub", Path: bin, LogPath: filepath.Join(dir, "stub.log"),
		Args: []string{"payment-stub", "--listen", stubAddr}}
	if err := stub.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stub.Stop(5 * time.Second) })

	pgURL, err := url.Parse(DefaultPostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	pgURL.User = url.UserPassword("postgres", pgPass) // trust authentication ignores it
	redisURL := "redis://:" + redisPass + "@" + srv.Addr() + "/0"
	worker := &Proc{Name: "worker", Path: bin, LogPath: filepath.Join(dir, "worker.log"),
		Env: []string{"OTEL_TRACES_EXPORTER=console", "OTEL_TRACES_SAMPLER=always_on"},
		Args: []string{"run", "--brokers", brokerAddr, "--redis", redisURL, "--log-level", "debug",
			"--lease-ttl", "1s", "--pg", pgURL.String(), "--payment-stub", "http://" + stubAddr}}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = worker.Stop(5 * time.Second) })

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokerAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var jobs []leasehold.NewJob
	for i := range 5 {
		jobs = append(jobs, leasehold.NewJob{Type: "demo.sleep", Key: "secret-test-" + strconv.Itoa(i),
			Payload: []byte(`{"duration_ms":50,"steps":2}`), Topic: leasehold.DefaultTopic})
	}
	if _, err := leasehold.EnqueueBatch(ctx, cl, jobs); err != nil {
		t.Fatal(err)
	}
	// Wait until the jobs have run: their spans are printed as they end.
	waitFor(t, 90*time.Second, "job spans in the worker output", func() bool {
		b, _ := os.ReadFile(worker.LogPath)
		return strings.Count(string(b), "secret-test-") >= 5 && strings.Contains(string(b), "process "+leasehold.DefaultTopic)
	})
	if err := worker.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	// The same worker with a wrong password must fail, without printing it.
	bad := &Proc{Name: "bad-worker", Path: bin, LogPath: filepath.Join(dir, "bad-worker.log"),
		Env:  []string{"OTEL_TRACES_EXPORTER=console"},
		Args: []string{"run", "--brokers", brokerAddr, "--redis", "redis://:" + wrongPass + "@" + srv.Addr() + "/0"}}
	if err := bad.Start(); err != nil {
		t.Fatal(err)
	}
	if err := bad.Wait(ctx); err == nil {
		t.Fatal("worker with a wrong Redis password exited cleanly")
	}

	for _, log := range []string{worker.LogPath, bad.LogPath} {
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{redisPass, pgPass, wrongPass} {
			if i := strings.Index(string(b), secret); i >= 0 {
				line := string(b[strings.LastIndexByte(string(b[:i]), '\n')+1:])
				line, _, _ = strings.Cut(line, "\n")
				t.Errorf("%s reveals a secret:\n%s", filepath.Base(log), line)
			}
		}
	}
}

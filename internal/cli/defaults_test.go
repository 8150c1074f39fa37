package cli

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestRefusesUnsafeDefaults: values that the library would quietly replace
// by a shared default, or that make no sense, are usage errors (exit 2) that
// say what to pass, before anything is started.
func TestRefusesUnsafeDefaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"run"}, "no Kafka brokers: pass --brokers host:port (env LEASEHOLD_BROKERS), or --embedded-kafka"},
		{map[string]string{"LEASEHOLD_EMBEDDED_KAFKA": "perhaps"}, []string{"run"}, `LEASEHOLD_EMBEDDED_KAFKA="perhaps": want true or false`},
		{map[string]string{"LEASEHOLD_BROKERS": "127.0.0.1:1"}, []string{"run", "--embedded-kafka"}, "--brokers and --embedded-kafka exclude each other"},
		{nil, []string{"run", "--embedded-listen", "127.0.0.1:0"}, "--embedded-listen needs --embedded-kafka"},
		{nil, []string{"run", "--brokers", "127.0.0.1:1", "--group", ""}, `--group is empty: name the consumer group, or leave the flag out for "leasehold"`},
		{nil, []string{"run", "--brokers", "127.0.0.1:1", "--group", " "}, "--group is empty"},
		{nil, []string{"run", "--brokers", "127.0.0.1:1", "--topics", ""}, `--topics "" names no topic`},
		{nil, []string{"run", "--brokers", "127.0.0.1:1", "--topics", " , "}, `--topics " , " names no topic`},
		{nil, []string{"run", "--brokers", "127.0.0.1:1", "--prefix", ""}, "--prefix is empty"},
		{nil, []string{"run", "--brokers", "127.0.0.1:1", "--shutdown-timeout", "-5s"}, "shutdown timeout -5s: want more than 0"},
		{nil, []string{"run", "--brokers", "127.0.0.1:1", "--shutdown-timeout", "0s"}, "shutdown timeout 0s: want more than 0"},
		{nil, []string{"run", "--brokers", "127.0.0.1:1", "--lease-ttl", "-2s"}, "lease TTL -2s is too short"},
		{nil, []string{"run", "--brokers", "127.0.0.1:1", "--retention", "-1h"}, "retention -1h0m0s is too short"},
		{nil, []string{"run", "--brokers", "127.0.0.1:1", "--shards", "-1"}, "shards -1: want 1 to 16777216, or 0 for the default"},
		{map[string]string{"LEASEHOLD_SHARDS": "16777217"}, []string{"run", "--brokers", "127.0.0.1:1"}, "shards 16777217: want 1 to 16777216"},
		{nil, []string{"enqueue", "--steps", "-3"}, "steps -3: want 1 to 10000"},
		{nil, []string{"enqueue", "--count", "-1"}, "count -1"},
		{nil, []string{"enqueue", "--sleep", "-1s"}, "sleep -1s"},
		{nil, []string{"leases", "--limit", "-5"}, "limit -5: want at least 1"},
		{nil, []string{"compensations", "--limit", "0"}, "limit 0: want at least 1"},
		{nil, []string{"demo", "--timeout", "-1s"}, "timeout -1s: want more than 0"},
		{nil, []string{"demo", "--jobs", "1"}, "jobs 1: want 4 to 1000"}, // it panicked
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			wantFailure(t, run(ctx, t, tc.env, tc.args...), 2, tc.want)
		})
	}
}

// TestRunEmbeddedKafka: --embedded-kafka starts an in-memory Kafka with the
// consumed topics and the dead-letter topic (the worker refuses to start
// when one is missing), says loudly that it keeps nothing, and consumes.
func TestRunEmbeddedKafka(t *testing.T) {
	testkit.SkipShort(t, "an embedded Kafka")
	t.Parallel()
	url, prefix, _ := sharedRedisURL(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	env := map[string]string{"REDIS_URL": url, "LEASEHOLD_EMBEDDED_KAFKA": "true"}
	go func() {
		done <- Main(ctx, []string{"run", "--topics", "emb.a,emb.b", "--dlq", "emb.dead", "--group", "emb",
			"--prefix", prefix, "--http", "127.0.0.1:0", "--heartbeat-interval", "500ms", "--fetch-max-wait", "250ms"},
			&Env{Stdout: &out, Stderr: &errb, Getenv: func(n string) string { return env[n] }})
	}()
	addr := waitLine(t, &errb, regexp.MustCompile(`http listening" addr=(\S+)`))
	if !strings.Contains(errb.String(), "every record and offset is lost when the worker stops") {
		t.Errorf("no warning that the embedded Kafka keeps nothing:\n%s", errb.String())
	}
	brokers := waitLine(t, &errb, regexp.MustCompile(`brokers=\[(\S+)\]`))
	waitStatus(t, "http://"+addr+"/readyz", http.StatusOK, &errb)
	for _, topic := range []string{"emb.b", "emb.dead"} {
		r := run(ctx, t, nil, "enqueue", "--brokers", brokers, "--topics", topic, "--count", "1", "--sleep", "10ms",
			"--steps", "1", "--progress=false")
		if r.code != 0 {
			t.Fatalf("enqueue to %s on the embedded Kafka: %+v", topic, r)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exit %d: %s", code, errb.String())
	}
}

// waitStatus polls url until it answers want, for 20s.
func waitStatus(t *testing.T, url string, want int, log fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	got := 0
	for time.Now().Before(deadline) {
		if got = httpStatus(url); got == want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("GET %s: %d, want %d; log:\n%s", url, got, want, log)
}

// httpStatus returns the status code of GET url, 0 if it cannot connect.
func httpStatus(url string) int {
	resp, err := http.Get(url) //nolint:noctx // a test's short poll
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestDemoWritesOnlyUnderItsPrefix: the demo says which Redis it writes to
// and under which prefix before it writes, and leaves nothing behind in it:
// on a private server, every key it wrote was under that prefix and is gone.
func TestDemoWritesOnlyUnderItsPrefix(t *testing.T) {
	testkit.SkipShort(t, "an embedded Kafka")
	t.Parallel()
	srv := testkit.StartRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	r := run(ctx, t, map[string]string{"REDIS_URL": "redis://" + srv.Addr() + "/0"}, "demo", "--jobs", "4", "--dup", "0.5",
		"--workers", "2", "--min-job", "300ms", "--max-job", "600ms", "--lease-ttl", "600ms", "--timeout", "60s")
	if r.code != 0 {
		t.Fatalf("demo exit %d: %s\n%s", r.code, r.stderr, r.stdout)
	}
	first, _, _ := strings.Cut(r.stdout, "\n")
	want := regexp.MustCompile(`redis: REDIS_URL ` + regexp.QuoteMeta(srv.Addr()) +
		`; the demo writes only keys under the prefix lh:demo:[a-z0-9]+: there and deletes them when it ends \(--keep keeps them\)`)
	if !want.MatchString(first) {
		t.Errorf("first line %q: want it to match %v", first, want)
	}
	n, err := srv.Client(t).DBSize(ctx).Result()
	if err != nil || n != 0 {
		keys, _ := srv.Client(t).Keys(ctx, "*").Result()
		t.Errorf("after the demo the server holds %d keys (%v), want 0: %v", n, keys, err)
	}
}

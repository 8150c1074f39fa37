package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// TestBadAddressesAreUsageErrors: an address that is not host:port is bad
// usage (exit 2), found before anything dials.
func TestBadAddressesAreUsageErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--brokers", "not-a-host:abc"}, `--brokers "not-a-host:abc": the port is not a number from 1 to 65535; want host:port`},
		{[]string{"run", "--brokers", "127.0.0.1:9092,kafka"}, `--brokers "kafka": address kafka: missing port in address`},
		{[]string{"run", "--brokers", ":9092"}, `--brokers ":9092": no host`},
		{[]string{"run", "--brokers", "127.0.0.1:1", "--http", "localhost"}, `--http "localhost"`},
		{[]string{"run", "--brokers", "127.0.0.1:1", "--kafka-dial-map", "127.0.0.1:1"}, `--kafka-dial-map "127.0.0.1:1": want advertised=dial pairs`},
		{[]string{"run", "--brokers", "127.0.0.1:1", "--kafka-dial-map", "127.0.0.1:1=proxy"}, `--kafka-dial-map "proxy": address proxy: missing port`},
		{[]string{"enqueue", "--brokers", "h:0"}, `--brokers "h:0": the port is not a number from 1 to 65535`},
		{[]string{"enqueue", "--brokers", "h:70000"}, `--brokers "h:70000"`},
		{[]string{"payment-stub", "--listen", "127.0.0.1:80x"}, `--listen "127.0.0.1:80x"`},
		{[]string{"enqueue", "--topics", "a,b"}, `--topics "a,b": want exactly one topic`},
		{[]string{"enqueue", "--topics", "a", "--topic", "b"}, `--topic "b" and --topics "a" differ`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			wantFailure(t, run(ctx, t, nil, tc.args...), 2, tc.want)
		})
	}
}

// TestEnqueueTopicSpellings: enqueue takes --topics and LEASEHOLD_TOPICS as
// run does; --topic and LEASEHOLD_TOPIC still work, with a note that they
// are deprecated. A missing topic fails before anything says "enqueued".
// The notes and hints name the program (here a team's own, acme-worker).
func TestEnqueueTopicSpellings(t *testing.T) {
	t.Parallel()
	k := testkit.StartKafka(t)
	topic := k.Topic(t, "spell", 1)
	brokers := strings.Join(k.Brokers(), ",")
	ctx := context.Background()
	for _, tc := range []struct {
		env        map[string]string
		args       []string
		deprecated string
	}{
		{nil, []string{"--topics", topic}, ""},
		{map[string]string{"LEASEHOLD_TOPICS": topic}, nil, ""},
		{nil, []string{"--topic", topic}, "acme-worker enqueue: --topic is deprecated: use --topics\n"},
		{map[string]string{"LEASEHOLD_TOPIC": topic}, nil, "acme-worker enqueue: LEASEHOLD_TOPIC is deprecated: use LEASEHOLD_TOPICS\n"},
		{map[string]string{"LEASEHOLD_TOPIC": "elsewhere"}, []string{"--topics", topic}, ""},
	} {
		args := append([]string{"enqueue", "--brokers", brokers, "--count", "1", "--progress=false"}, tc.args...)
		r := runAs(ctx, t, "acme-worker", tc.env, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "enqueued 1 records (1 jobs, 0 duplicates) to "+topic) || r.stderr != tc.deprecated {
			t.Errorf("env %v args %v: %+v; want stderr %q", tc.env, tc.args, r, tc.deprecated)
		}
	}
	r := runAs(ctx, t, "acme-worker", nil, "enqueue", "--brokers", brokers, "--topics", topic+"-missing", "--count", "1", "--progress=false")
	wantFailure(t, r, 1, "topic "+topic+"-missing does not exist: create it first (acme-worker run consumes")
	if r.stdout != "" {
		t.Errorf("a failed enqueue printed %q", r.stdout)
	}
}

// TestLeasesNaturalOrderAndJSON: leases lists keys in natural order (n-2
// before n-10) and, like inspect, prints JSON with --json.
func TestLeasesNaturalOrderAndJSON(t *testing.T) {
	t.Parallel()
	url, prefix, rdb := sharedRedisURL(t)
	env := map[string]string{"REDIS_URL": url, "LEASEHOLD_PREFIX": prefix}
	ctx := context.Background()
	s := workerStore(t, rdb, prefix)
	fpr, err := idempotency.PayloadFingerprint([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	var fence2 uint64
	for _, k := range []string{"n-10", "n-2", "n-1", "m-3"} {
		c, err := s.Claim(ctx, k, fpr)
		if err != nil || c.Outcome != idempotency.Acquired {
			t.Fatalf("claim %s: %v %v", k, c.Outcome, err)
		}
		if k == "n-2" {
			fence2 = c.Lease.Fence()
			if err := s.SaveDetails(ctx, c, []byte(`{"step":2}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []string{"m-3", "n-1", "n-2", "n-10"}

	r := run(ctx, t, env, "leases")
	var text []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) > 0 && (strings.HasPrefix(f[0], "n-") || strings.HasPrefix(f[0], "m-")) {
			text = append(text, f[0])
		}
	}
	if r.code != 0 || !slices.Equal(text, want) {
		t.Errorf("leases lists %v, want %v: %+v", text, want, r)
	}

	r = run(ctx, t, env, "leases", "--json")
	var list struct{ Leases []leaseJSON }
	if err := json.Unmarshal([]byte(r.stdout), &list); r.code != 0 || err != nil {
		t.Fatalf("leases --json: %v: %+v", err, r)
	}
	var keys []string
	for _, l := range list.Leases {
		keys = append(keys, l.Key)
		if l.Key == "n-2" && (l.Fence != fence2 || l.State != "PROCESSING" || l.Attempt != 1 || l.Details == nil ||
			*l.Details != `{"step":2}` || l.RemainingMS <= 0 || l.Owner == "" || !strings.HasPrefix(l.LeaseKey, prefix)) {
			t.Errorf("leases --json entry of n-2: %+v", l)
		}
	}
	if !slices.Equal(keys, want) {
		t.Errorf("leases --json lists %v, want %v", keys, want)
	}

	r = run(ctx, t, env, "inspect", "--json", "n-2")
	var got inspectJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil {
		t.Fatalf("inspect --json: %v: %+v", err, r)
	}
	if got.Key != "n-2" || got.Lease == nil || got.Lease.Fence != fence2 || got.Record.State != "PROCESSING" ||
		got.Record.Details == nil || *got.Record.Details != `{"step":2}` || got.ClusterTag == "" {
		t.Errorf("inspect --json n-2: %s", r.stdout)
	}
	r = run(ctx, t, env, "inspect", "--json", "never-seen")
	if !strings.Contains(r.stdout, `"lease": null`) || !strings.Contains(r.stdout, `"state": "ABSENT"`) {
		t.Errorf("inspect --json of an unknown key: %+v", r)
	}
}

func TestNatLess(t *testing.T) {
	t.Parallel()
	in := []string{"job-10", "job-2", "job-02", "job-1", "a", "job-", "job-1a", "job-1-3", "job-1-10", "b2", "b10", "18446744073709551616x", "9x"}
	want := []string{"9x", "18446744073709551616x", "a", "b2", "b10", "job-", "job-1", "job-1-3", "job-1-10", "job-1a", "job-2", "job-02", "job-10"}
	got := slices.Clone(in)
	slices.SortFunc(got, func(a, b string) int {
		switch {
		case natLess(a, b):
			return -1
		case natLess(b, a):
			return 1
		}
		return 0
	})
	if !slices.Equal(got, want) {
		t.Errorf("natural order %v, want %v", got, want)
	}
}

// TestVersion: `worker version` (and --version) prints the module, the Go
// version and, in a binary built from a git checkout, the revision.
func TestVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, arg := range []string{"version", "--version"} {
		r := run(ctx, t, nil, arg)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "worker github.com/leasehold/leasehold ") ||
			!strings.Contains(r.stdout, "go "+runtime.Version()+" ") {
			t.Errorf("%s: %+v", arg, r)
		}
	}
	// -buildvcs=true: GOFLAGS may turn VCS stamping off (it does on the
	// development machine).
	out, err := exec.Command(workerBinary(t, "-buildvcs=true"), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("worker version: %v: %s", err, out)
	}
	m := regexp.MustCompile(`(?m)^revision ([0-9a-f]{40})`).FindSubmatch(out)
	if m == nil || !strings.Contains(string(out), "\ncommitted 20") {
		t.Fatalf("worker version of a built binary names no revision and commit time:\n%s", out)
	}
	cmd := exec.Command("git", "cat-file", "-e", string(m[1])+"^{commit}")
	cmd.Dir = filepath.Join("..", "..")
	if err := cmd.Run(); err != nil {
		t.Errorf("revision %s is not a commit of this repository: %v", m[1], err)
	}
}

// TestDemoViewFitsTerminal: the demo's terminal view keeps within the
// terminal's width and height, however many jobs run and events come.
func TestDemoViewFitsTerminal(t *testing.T) {
	t.Parallel()
	var s screen
	s.header = []string{strings.Repeat("h", 120), strings.Repeat("i", 90)}
	s.table = strings.Repeat("T", 100)
	for i := range 30 {
		s.rows = append(s.rows, fmt.Sprintf("  w1 job-%02d %s", i, strings.Repeat("#", 90)))
	}
	for i := range 12 {
		s.events = append(s.events, fmt.Sprintf("  event %d %s", i, strings.Repeat("é", 100)))
	}
	for _, size := range [][2]int{{40, 10}, {80, 24}, {120, 40}, {200, 60}, {10, 3}} {
		cols, lines := size[0], size[1]
		out := s.fit(cols, lines)
		if len(out) > max(lines-1, 1) {
			t.Errorf("%dx%d: %d lines", cols, lines, len(out))
		}
		for _, l := range out {
			if n := len([]rune(l)); n > max(cols-1, 1) {
				t.Errorf("%dx%d: a line of %d columns: %q", cols, lines, n, l)
			}
		}
		joined := strings.Join(out, "\n")
		if lines >= 24 && !strings.Contains(joined, "event 11") {
			t.Errorf("%dx%d: the latest event is not shown:\n%s", cols, lines, joined)
		}
		if lines < 45 && lines >= 10 && !strings.Contains(joined, "more running") {
			t.Errorf("%dx%d: the jobs left out are not counted:\n%s", cols, lines, joined)
		}
		if lines == 60 && (!strings.Contains(joined, "job-29") || strings.Contains(joined, "more running")) {
			t.Errorf("%dx%d: not every job is shown:\n%s", cols, lines, joined)
		}
	}

	// draw, on a 50x12 terminal.
	var b syncBuffer
	v := newDemoView(&b, false, func(string) string { return "" })
	v.tty = true
	v.size = func() (int, int) { return 50, 12 }
	v.setPlan(24, 6, "job-01", "job-12")
	for i := range 20 {
		v.note("a long event line number %d that goes on well past the edge of a narrow terminal", i)
	}
	v.draw()
	screen := strings.TrimPrefix(b.String(), "\x1b[H\x1b[2J")
	lines := strings.Split(strings.TrimSuffix(screen, "\n"), "\n")
	if len(lines) > 11 {
		t.Errorf("draw on 50x12: %d lines", len(lines))
	}
	for _, l := range lines {
		if len([]rune(l)) > 49 {
			t.Errorf("draw on 50x12: a line of %d columns: %q", len([]rune(l)), l)
		}
	}
}

// TestErrorsReadAsOneSentence: a Redis whose maxmemory-policy evicts keys
// is reported as one sentence with the fix, without the packages'
// stuttered prefixes, by every command that meets it.
func TestErrorsReadAsOneSentence(t *testing.T) {
	t.Parallel()
	srv := testkit.StartRedis(t, testkit.WithRedisConfig("maxmemory-policy allkeys-lru"))
	env := map[string]string{"REDIS_URL": "redis://" + srv.Addr() + "/0"}
	ctx := context.Background()
	for _, args := range [][]string{
		{"run", "--brokers", "127.0.0.1:1"},
		{"leases"},
		{"inspect", "k"},
	} {
		r := run(ctx, t, env, args...)
		wantFailure(t, r, 1, "maxmemory-policy")
		if !strings.Contains(r.stderr, "noeviction") {
			t.Errorf("%v: %q does not say the fix (noeviction)", args, r.stderr)
		}
		if regexp.MustCompile(`\b(leasehold|lease|idempotency): `).MatchString(r.stderr) {
			t.Errorf("%v: %q has package prefixes", args, r.stderr)
		}
	}
	// The chain seen in the issue.
	chain := "leasehold: redis unavailable: leasehold: lease: start: lease: redis maxmemory-policy evicts keys: allkeys-lru"
	err := fmt.Errorf("leasehold: redis unavailable: leasehold: %w",
		fmt.Errorf("lease: start: %w", fmt.Errorf("%w: allkeys-lru", lease.ErrEvictionPolicy)))
	if err.Error() != chain {
		t.Fatalf("chain %q", err)
	}
	if got, want := userMessage(ctx, err), "redis maxmemory-policy is allkeys-lru, which evicts keys"; !strings.HasPrefix(got, want) {
		t.Errorf("userMessage = %q, want it to start %q", got, want)
	}
	if got, want := destutter("leasehold: kafka: leasehold: read topic metadata from Kafka: dial tcp 127.0.0.1:1: connect: connection refused"),
		"kafka: read topic metadata from Kafka: dial tcp 127.0.0.1:1: connect: connection refused"; got != want {
		t.Errorf("destutter = %q, want %q", got, want)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if got := userMessage(cctx, fmt.Errorf("x: %w", context.Canceled)); got != "interrupted before the command finished" {
		t.Errorf("userMessage of an interruption = %q", got)
	}
}

// TestDemoViewDrawsDuringDrain: while the demo's workers drain (after
// Ctrl-C), the terminal view keeps being redrawn.
func TestDemoViewDrawsDuringDrain(t *testing.T) {
	t.Parallel()
	var b syncBuffer
	v := newDemoView(&b, false, func(string) string { return "" })
	v.tty = true
	v.size = func() (int, int) { return 80, 24 }
	v.setPlan(4, 0, "job-01", "job-02")
	drawWhile(v, 5*time.Millisecond, func() {
		testkit.Eventually(t, 10*time.Second, "the view redrawn during the drain", func() bool {
			return strings.Count(b.String(), "leasehold demo") >= 3
		})
	})
}

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestDLQListReplay: a real worker dead-letters a job that failed
// terminally and a record of an unknown type; `worker dlq list` shows them,
// filtered by reason, type and key; `worker dlq replay` of the failed job
// refuses until the key is reset (its FAILED record would only be replayed),
// then produces it back once with its original headers, and the worker runs
// it; a second replay produces nothing.
func TestDLQListReplay(t *testing.T) {
	t.Parallel()
	url, prefix, rdb := sharedRedisURL(t)
	k := testkit.StartKafka(t)
	topic := k.Topic(t, "cli-dlq", 2)
	dlq := topic + ".dlq"
	k.CreateTopic(t, dlq, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var fixed atomic.Bool
	var ran atomic.Int32
	w, err := leasehold.New(rdb, leasehold.WithKafka(kgo.SeedBrokers(k.Brokers()...), kgo.FetchMaxWait(200*time.Millisecond)),
		leasehold.WithTopics(topic), leasehold.WithDeadLetterTopic(dlq), leasehold.WithGroup("g-"+topic),
		leasehold.WithKeyPrefix(prefix), leasehold.WithLeaseTTL(2*time.Second), leasehold.WithCommitInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register("test.pay", func(_ context.Context, j *leasehold.Job) ([]byte, error) {
		if !fixed.Load() {
			return nil, leasehold.Permanent(errors.New("handler bug"))
		}
		ran.Add(1)
		return []byte("paid"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Shutdown(context.Background()) })

	prod := k.Client(t, kgo.DefaultProduceTopic(topic))
	for _, j := range []leasehold.NewJob{
		{Type: "test.pay", Key: "pay-1", Payload: []byte(`{"amount":5}`), Headers: map[string]string{"tenant": "acme"}},
		{Type: "test.nope", Key: "nope-1", Payload: []byte("x")},
	} {
		if _, err := leasehold.Enqueue(ctx, prod, j); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 30*time.Second, "two dead letters", func() bool { return w.Stats().DeadLettered == 2 })

	env := map[string]string{"REDIS_URL": url, "LEASEHOLD_PREFIX": prefix, "LEASEHOLD_BROKERS": strings.Join(k.Brokers(), ","),
		"LEASEHOLD_TOPICS": topic}
	list := func(args ...string) []inspect.DeadLetter {
		t.Helper()
		r := run(ctx, t, env, append([]string{"dlq", "list", "--json"}, args...)...)
		if r.code != 0 {
			t.Fatalf("dlq list %v: %+v", args, r)
		}
		var out []inspect.DeadLetter
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if line == "" {
				continue
			}
			var d inspect.DeadLetter
			if err := json.Unmarshal([]byte(line), &d); err != nil {
				t.Fatalf("dlq list --json line %q: %v", line, err)
			}
			out = append(out, d)
		}
		return out
	}
	if all := list(); len(all) != 2 {
		t.Fatalf("dlq list: %d records, want 2: %+v", len(all), all)
	}
	byReason := list("--reason", leasehold.ReasonPermanent)
	if len(byReason) != 1 || byReason[0].Key != "pay-1" || byReason[0].OrigTopic != topic || !strings.Contains(byReason[0].Error, "handler bug") {
		t.Fatalf("dlq list --reason %s: %+v", leasehold.ReasonPermanent, byReason)
	}
	if got := list("--type", "test.nope"); len(got) != 1 || got[0].Key != "nope-1" || got[0].Reason != leasehold.ReasonUnknownType {
		t.Fatalf("dlq list --type test.nope: %+v", got)
	}
	if got := list("--key", "pay-1", "--reason", leasehold.ReasonUnknownType); len(got) != 0 {
		t.Fatalf("dlq list with filters matching nothing: %+v", got)
	}
	// Pages: --limit 1 names the cursor of the rest; the two pages hold both records once.
	r := run(ctx, t, env, "dlq", "list", "--limit", "1")
	_, cur, ok := strings.Cut(r.stdout, "more: --cursor ")
	if r.code != 0 || !ok || !strings.Contains(r.stdout, "1 dead-lettered records") {
		t.Fatalf("dlq list --limit 1: want one record and a cursor: %+v", r)
	}
	first, rest := list("--limit", "1"), list("--cursor", strings.TrimSpace(cur))
	if len(first) != 1 || len(rest) != 1 || first[0].Key == rest[0].Key {
		t.Fatalf("dlq list by pages: %+v then %+v", first, rest)
	}
	wantFailure(t, run(ctx, t, env, "dlq", "list", "--cursor", "x"), 1, "bad cursor")
	if r := run(ctx, t, env, "dlq", "list"); r.code != 0 || !strings.Contains(r.stdout, "2 dead-lettered records") ||
		!strings.Contains(r.stdout, "pay-1") {
		t.Fatalf("dlq list (table): %+v", r)
	}

	// The handler is fixed; the key is FAILED, so a replay needs a reset first.
	fixed.Store(true)
	end := k.EndOffsets(t, topic)
	// The hint names the program it runs in (a team's own binary here).
	r = runAs(ctx, t, "acme-worker", env, "dlq", "replay", "--key", "pay-1")
	if r.code != 0 || !strings.Contains(r.stdout, "needs-reset") || !strings.Contains(r.stdout, "acme-worker reset pay-1") {
		t.Fatalf("dlq replay of a FAILED key: %+v", r)
	}
	if r := run(ctx, t, env, "dlq", "replay", "--key", "pay-1", "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, "needs-reset") {
		t.Fatalf("dlq replay --dry-run: %+v", r)
	}
	if r := run(ctx, t, env, "reset", "pay-1"); r.code != 0 {
		t.Fatalf("reset: %+v", r)
	}
	if r := run(ctx, t, env, "dlq", "replay", "--key", "pay-1", "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, "would-replay") {
		t.Fatalf("dlq replay --dry-run after reset: %+v", r)
	}
	if got := k.EndOffsets(t, topic); !equalOffsets(got, end) {
		t.Fatalf("refused and dry-run replays produced: end offsets %v, were %v", got, end)
	}
	r = run(ctx, t, env, "dlq", "replay", "--reason", leasehold.ReasonPermanent)
	if r.code != 0 || !strings.Contains(r.stdout, "1 replayed") {
		t.Fatalf("dlq replay: %+v", r)
	}
	if !strings.Contains(r.stderr, "dead letter replayed") {
		t.Errorf("replay not logged: %q", r.stderr)
	}
	testkit.Eventually(t, 30*time.Second, "the replayed job runs", func() bool { return ran.Load() == 1 })

	// The copy went to the original partition with the original headers.
	var copied *kgo.Record
	for _, rec := range k.ReadAll(t, topic) {
		if string(header(rec, leasehold.HeaderKey)) == "pay-1" && rec.Offset >= end[rec.Partition] {
			copied = rec
		}
	}
	if copied == nil || string(header(copied, "tenant")) != "acme" || string(header(copied, leasehold.HeaderType)) != "test.pay" ||
		string(copied.Value) != `{"amount":5}` || copied.Partition != byReason[0].OrigPartition {
		t.Fatalf("replayed copy %+v", copied)
	}
	for _, h := range copied.Headers {
		if strings.HasPrefix(h.Key, "dlq-") {
			t.Fatalf("replayed copy kept the dead-letter header %s", h.Key)
		}
	}

	// Replayed once: a second replay produces nothing, the list says so.
	before := k.EndOffsets(t, topic)
	r = run(ctx, t, env, "dlq", "replay", "--key", "pay-1")
	if r.code != 0 || !strings.Contains(r.stdout, "0 replayed, 1 already replayed") {
		t.Fatalf("second dlq replay: %+v", r)
	}
	if got := k.EndOffsets(t, topic); !equalOffsets(got, before) {
		t.Fatalf("a second replay produced: end offsets %v, were %v", got, before)
	}
	if got := list("--key", "pay-1"); len(got) != 1 || got[0].Replay != "done" {
		t.Fatalf("dlq list after the replay: %+v", got)
	}
	// Once the group has committed every record of the topic, each has been
	// settled: a second run would have happened by then.
	final := k.EndOffsets(t, topic)
	testkit.Eventually(t, 30*time.Second, "the topic's records committed", func() bool {
		got := k.Committed(t, "g-"+topic, topic)
		for p, e := range final {
			if got[p] != e {
				return false
			}
		}
		return true
	})
	if n := ran.Load(); n != 1 {
		t.Fatalf("the replayed job ran %d times, want 1", n)
	}

	wantFailure(t, run(ctx, t, env, "dlq"), 2, "want 'dlq list")
	wantFailure(t, run(ctx, t, env, "dlq", "list", "--limit", "0"), 2, "limit 0")
	wantFailure(t, run(ctx, t, env, "dlq", "list", "--dry-run"), 2, "--dry-run is for dlq replay")
}

func header(r *kgo.Record, k string) []byte {
	for _, h := range r.Headers {
		if h.Key == k {
			return h.Value
		}
	}
	return nil
}

func equalOffsets(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, o := range a {
		if b[p] != o {
			return false
		}
	}
	return true
}

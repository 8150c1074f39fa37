package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/audit"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestAudit: a real worker runs 20 jobs, a duplicate of one, and a job
// that fails terminally (dead-lettered); `worker audit` accounts for every
// record and exits 0. Then two gaps are made up: the Redis record of a
// completed key is deleted, and a record is produced while no worker runs
// (never run); the audit lists both as unaccounted and exits 1.
func TestAudit(t *testing.T) {
	t.Parallel()
	url, prefix, rdb := sharedRedisURL(t)
	k := testkit.StartKafka(t)
	topic := k.Topic(t, "cli-audit", 2)
	dlq := topic + ".dlq"
	k.CreateTopic(t, dlq, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	w, err := leasehold.New(rdb, leasehold.WithKafka(kgo.SeedBrokers(k.Brokers()...), kgo.FetchMaxWait(200*time.Millisecond)),
		leasehold.WithTopics(topic), leasehold.WithDeadLetterTopic(dlq), leasehold.WithGroup("g-"+topic),
		leasehold.WithKeyPrefix(prefix), leasehold.WithLeaseTTL(2*time.Second), leasehold.WithCommitInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register("test.job", func(_ context.Context, j *leasehold.Job) ([]byte, error) {
		if j.Key == "bad-1" {
			return nil, leasehold.Permanent(errors.New("handler bug"))
		}
		return []byte("ok"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	prod := k.Client(t, kgo.DefaultProduceTopic(topic))
	enqueue := func(key string) {
		t.Helper()
		if _, err := leasehold.Enqueue(ctx, prod, leasehold.NewJob{Type: "test.job", Key: key, Payload: []byte(key)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		enqueue(fmt.Sprintf("job-%d", i))
	}
	enqueue("job-3") // a duplicate
	enqueue("bad-1")
	testkit.Eventually(t, 30*time.Second, "every job settled", func() bool {
		s := w.Stats()
		return s.DeadLettered == 1 && s.Succeeded >= 20 && s.Replayed >= 1
	})
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	env := map[string]string{"REDIS_URL": url, "LEASEHOLD_PREFIX": prefix, "LEASEHOLD_BROKERS": strings.Join(k.Brokers(), ","),
		"LEASEHOLD_TOPICS": topic}
	r := run(ctx, t, env, "audit", "--json")
	rep := decodeAudit(t, r)
	if r.code != 0 || rep.Records != 22 || rep.Counts[audit.Completed] != 20 || rep.Counts[audit.Duplicate] != 1 ||
		rep.Counts[audit.DeadLettered] != 1 {
		t.Fatalf("clean audit: code %d, report %+v (stderr %q)", r.code, rep, r.stderr)
	}

	// The gaps: a completed key's record deleted, a record never run.
	if _, err := workerStore(t, rdb, prefix).Reset(ctx, "job-7", true); err != nil {
		t.Fatal(err)
	}
	enqueue("never-run")
	r = run(ctx, t, env, "audit", "--json")
	rep = decodeAudit(t, r)
	if r.code != 1 || rep.Counts[audit.Unaccounted] != 2 || len(rep.Unaccounted) != 2 {
		t.Fatalf("audit with gaps: code %d, report %+v", r.code, rep)
	}
	got := map[string]bool{}
	for _, e := range rep.Unaccounted {
		got[e.Key] = true
	}
	if !got["job-7"] || !got["never-run"] || !strings.Contains(r.stderr, "2 of 23 records unaccounted") {
		t.Errorf("unaccounted %+v, stderr %q: want job-7 and never-run", rep.Unaccounted, r.stderr)
	}

	// With the worker's group, the record produced after its last commit
	// is pending (not consumed yet); the deleted record stays unaccounted.
	r = run(ctx, t, env, "audit", "--json", "--group", "g-"+topic)
	rep = decodeAudit(t, r)
	if r.code != 1 || rep.Counts[audit.Pending] != 1 || len(rep.Unaccounted) != 1 || rep.Unaccounted[0].Key != "job-7" {
		t.Fatalf("audit with the group: code %d, report %+v", r.code, rep)
	}

	// The text form lists them; a range that leaves them out is clean.
	r = run(ctx, t, env, "audit")
	if r.code != 1 || !strings.Contains(r.stdout, "never-run") || !strings.Contains(r.stdout, "2 unaccounted") {
		t.Errorf("text audit: %+v", r)
	}
	r = run(ctx, t, env, "audit", "--records", "--until", "2026-01-01T00:00:00Z")
	if r.code != 0 || !strings.Contains(r.stdout, ": 0 records") {
		t.Errorf("empty range: %+v", r)
	}
	wantFailure(t, run(ctx, t, env, "audit", "--from", "x"), 2, "--from")
	wantFailure(t, run(ctx, t, env, "audit", "--from", "0", "--since", "1h"), 2, "not both")
}

func decodeAudit(t *testing.T, r result) audit.Report {
	t.Helper()
	var rep audit.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("audit --json: %v (stdout %q, stderr %q)", err, r.stdout, r.stderr)
	}
	return rep
}

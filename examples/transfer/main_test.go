package main

import (
	"bytes"
	"cmp"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// transfer-1 charges once and credits once under its fence; transfer-2's
// charge is refunded by its compensation when the credit fails for good; a
// write with an older fence is refused by the guard; and the run leaves no
// keys and no schema behind.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	keysBefore := redisKeys(t, "transfer:*")
	schemasBefore := schemas(t)
	var out bytes.Buffer
	if err := run(ctx, &out, redisURL(), pgURL()); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, &out)
	}
	got := out.String()
	defer func() {
		if t.Failed() {
			t.Logf("output:\n%s", got)
		}
	}()

	for _, want := range []struct {
		re string
		n  int
	}{
		{`(?m)^provider: charged ada 30 \(charge transfer-1/\d+\)$`, 1},
		{`(?m)^handler:  transfer-1 credited 30 to bob \(fence \d+\)$`, 1},
		{`(?m)^worker:   transfer-1 completed$`, 1},
		{`(?m)^provider: charged ada 50 \(charge transfer-2/\d+\)$`, 1},
		{`(?m)^provider: refunded ada 50 \(charge transfer-2/\d+\)$`, 1},
		{`(?m)^provider: refunded ada 30`, 0},
		{`(?m)^worker:   compensated the steps of transfer-2 \(err <nil>\)$`, 1},
		{`(?m)^worker:   transfer-2 failed: .*no account "zed"$`, 1},
		{`(?m)^worker:   transfer-2 dead-lettered \(permanent-failure\)$`, 1},
		{`(?m)^zombie:   transfer-1 with fence \d+: fence: stale fence .*\(errors.Is\(err, fence.ErrStaleFence\) = true\)$`, 1},
		{`(?m)^result:   bob's balance 130, ada charged 30 in all$`, 1},
	} {
		if n := len(regexp.MustCompile(want.re).FindAllString(got, -1)); n != want.n {
			t.Errorf("%d lines match %s, want %d", n, want.re, want.n)
		}
	}
	// The charge that was refunded is the one made under transfer-2's fence.
	charged := regexp.MustCompile(`charged ada 50 \(charge (\S+)\)`).FindStringSubmatch(got)
	if charged == nil || !strings.Contains(got, "refunded ada 50 (charge "+charged[1]+")") {
		t.Error("the refund is not for transfer-2's charge")
	}

	for k := range redisKeys(t, "transfer:*") {
		if !keysBefore[k] {
			t.Errorf("the example left the key %s behind", k)
		}
	}
	for s := range schemas(t) {
		if !schemasBefore[s] {
			t.Errorf("the example left the schema %s behind", s)
		}
	}
}

func redisURL() string { return cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379") }

func pgURL() string {
	return cmp.Or(os.Getenv("PG_URL"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
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

// schemas returns the example's schemas on the PostgreSQL server.
func schemas(t *testing.T) map[string]bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL())
	if err != nil {
		t.Fatalf("PostgreSQL at PG_URL does not answer: %v", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'transfer_example_%'`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}

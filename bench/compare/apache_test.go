package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsumeRunCommits runs the bare consumer and the SET NX consumer of
// -kafka apache against an embedded broker: each must finish every record
// and leave the group's committed offsets at the end of the topic.
func TestConsumeRunCommits(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	a := &apacheKafka{addrs: kc.ListenAddrs(), topics: map[string]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 2000
	prefix := fmt.Sprintf("t%d", time.Now().UnixNano())
	topic := "compare-test." + prefix
	if err := a.seed(ctx, topic, 3, n, "bench.noop", prefix); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer func() { _ = rdb.Close() }()
	for _, tc := range []struct {
		name string
		job  func(context.Context, *kgo.Record) error
	}{
		{"bare", nil},
		{"setnx", setnxJob(rdb, "test")},
	} {
		group := topic + "." + tc.name
		if _, err := consumeRun(ctx, rdb, a.addrs, topic, group, n, n/10, 8, tc.job); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(a.addrs...))
		if err != nil {
			t.Fatal(err)
		}
		offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		var committed int64
		offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
		if committed != n {
			t.Errorf("%s: group %s committed offsets summing to %d; want %d (every record)", tc.name, group, committed, n)
		}
	}
	keys, err := rdb.Keys(ctx, "idempotency:v1:"+prefix+"-*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != n {
		t.Errorf("SET NX consumer left %d keys; want %d", len(keys), n)
	}
	if len(keys) > 0 {
		_ = rdb.Del(context.WithoutCancel(ctx), keys...).Err()
	}
}

func TestWriteApacheTable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "doc.md")
	doc := "a\n" + tableBegin + "\nkfake\n" + tableEnd + "\nb\n" + apacheBegin + "\nstale figures\n" + apacheEnd + "\nc\n"
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var f figures
	for _, v := range []float64{3000, 1000, 2000} {
		f.add("leasehold_apache_jobs_per_s", v, 0, "jobs/s")
		f.add("bare_consumer_apache_jobs_per_s", 100*v, 0, "jobs/s")
		f.add("leasehold_vs_bare_consumer_apache", 0.01, 2, "x")
	}
	if err := writeApacheTable(file, &f, conditions{loadStart: 9, loadEnd: 10}, []string{"-kafka", "apache", "-table=x"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"kfake", "| 2000 (1000 to 3000) |", "| 200000 (100000 to 300000) |", "0.0100x",
		"`make compare ARGS='-kafka apache'`", "other work shared the machine"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "stale figures") || !strings.HasSuffix(got, apacheEnd+"\nc\n") {
		t.Errorf("apache section not replaced in place:\n%s", got)
	}
}

package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/console"
	"github.com/leasehold/leasehold/internal/testkit"
)

// dlqWorld is a dead-letter topic of two partitions holding n[p] records
// each, of reason "handler_failed" and a value of size bytes.
func dlqWorld(t *testing.T, n [2]int, size int) (*testkit.Kafka, string) {
	t.Helper()
	k := testkit.StartKafka(t)
	dlq := k.Topic(t, "bound", 1) + ".dlq"
	k.CreateTopic(t, dlq, 2)
	prod := k.Client(t, kgo.DefaultProduceTopic(dlq), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p, count := range n {
		for i := range count {
			recs = append(recs, &kgo.Record{Partition: int32(p), Key: []byte(fmt.Sprint(p, "-", i)), Value: make([]byte, size),
				Headers: []kgo.RecordHeader{{Key: leasehold.HeaderDLQReason, Value: []byte("handler_failed")}}})
		}
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return k, dlq
}

type dlqAnswer struct {
	Records []struct {
		Partition int32 `json:"partition"`
		Offset    int64 `json:"offset"`
	} `json:"records"`
	Next    string `json:"next"`
	Scanned int    `json:"scanned"`
	Cut     bool   `json:"cut"`
}

func getDeadLetters(t *testing.T, c *client, query string) dlqAnswer {
	t.Helper()
	code, body := c.do("GET", "/api/deadletters?"+query, "", nil)
	var a dlqAnswer
	if err := json.Unmarshal([]byte(body), &a); code != http.StatusOK || err != nil {
		t.Fatalf("GET api/deadletters?%s: %d %s", query, code, body)
	}
	return a
}

// TestDeadLetterReadsBounded: one request reads at most
// Config.DeadLetterScan records, matching its filter or not: a filter that
// matches nothing no longer reads the whole topic, and its pages, each cut
// at the bound, continue one another to the end (across partitions); the
// pages without a filter hold every record once.
func TestDeadLetterReadsBounded(t *testing.T) {
	t.Parallel()
	k, dlq := dlqWorld(t, [2]int{25, 5}, 10)
	rdb, prefix := testkit.SharedRedis(t)
	srv := newServer(t, console.Config{Redis: rdb, KeyPrefix: prefix, Topics: []string{"bound"}, DLQ: dlq,
		Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers()...)}, DeadLetterScan: 10})
	c := newClient(t, srv)
	for _, filter := range []string{"reason=nomatch", ""} {
		cursor, pages, scanned := "", 0, 0
		seen := map[string]bool{}
		for {
			a := getDeadLetters(t, c, filter+"&limit=500&cursor="+url.QueryEscape(cursor))
			pages++
			scanned += a.Scanned
			if a.Scanned > 10 || a.Cut != (a.Next != "") {
				t.Fatalf("%s page %d: scanned %d (bound 10), cut %v, next %q", filter, pages, a.Scanned, a.Cut, a.Next)
			}
			for _, r := range a.Records {
				id := fmt.Sprint(r.Partition, "@", r.Offset)
				if seen[id] {
					t.Errorf("%s: record %s on two pages", filter, id)
				}
				seen[id] = true
			}
			if a.Next == "" || pages > 10 {
				break
			}
			cursor = a.Next
		}
		// 25 + 5 records, 10 a page: partition 0's last 5 and partition 1's
		// 5 make the third page.
		want := 30
		if filter != "" {
			want = 0
		}
		if pages != 3 || scanned != 30 || len(seen) != want {
			t.Errorf("%q: %d pages, %d records read, %d shown; want 3 pages, 30 read, %d shown", filter, pages, scanned, len(seen), want)
		}
	}
}

// TestDeadLetterReadsBoundedBytes: Config.DeadLetterScanBytes stops a read
// at the record that reaches it.
func TestDeadLetterReadsBoundedBytes(t *testing.T) {
	t.Parallel()
	k, dlq := dlqWorld(t, [2]int{20, 0}, 1000)
	rdb, prefix := testkit.SharedRedis(t)
	srv := newServer(t, console.Config{Redis: rdb, KeyPrefix: prefix, Topics: []string{"bound"}, DLQ: dlq,
		Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers()...)}, DeadLetterScanBytes: 4500})
	a := getDeadLetters(t, newClient(t, srv), "reason=nomatch")
	if a.Scanned != 5 || !a.Cut || a.Next == "" || len(a.Records) != 0 {
		t.Errorf("records of 1 KB, bound 4500 bytes: scanned %d, cut %v, next %q, %d records; want 5 scanned and a cursor",
			a.Scanned, a.Cut, a.Next, len(a.Records))
	}
}

// TestDeadLetterReadsOneAtATime: while one request reads the dead-letter
// topic (its fetch held by the broker), another waits, then gets 503 with
// Retry-After without reaching Kafka; once the first is done, reads go on.
func TestDeadLetterReadsOneAtATime(t *testing.T) {
	t.Parallel()
	if !testkit.IsFake() {
		t.Skip("holds a fetch in kfake")
	}
	k, dlq := dlqWorld(t, [2]int{3, 0}, 10)
	entered, release := make(chan struct{}), make(chan struct{})
	var hold, unhold sync.Once
	free := func() { unhold.Do(func() { close(release) }) }
	t.Cleanup(free)
	k.Fake().ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.Fake().KeepControl()
		hold.Do(func() { close(entered); <-release })
		return nil, nil, false
	})
	rdb, prefix := testkit.SharedRedis(t)
	srv := newServer(t, console.Config{Redis: rdb, KeyPrefix: prefix, Topics: []string{"bound"}, DLQ: dlq,
		Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers()...)}})
	c := newClient(t, srv)
	first := make(chan string, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/api/deadletters", nil)
		resp, err := c.hc.Do(req)
		if err != nil {
			first <- err.Error()
			return
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		first <- fmt.Sprint(resp.StatusCode, " ", string(body))
	}()
	<-entered
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/api/deadletters?reason=x", nil)
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a second read while one runs: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	free()
	if got := <-first; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"scanned":3`) {
		t.Errorf("the first read: %s", got)
	}
	if a := getDeadLetters(t, c, "reason=x"); a.Scanned != 3 {
		t.Errorf("a read after the first: scanned %d, want 3", a.Scanned)
	}
}

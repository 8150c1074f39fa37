package console_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/console"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/tracing"
)

// TestKeyViewHistoryAndTraceLinks: the key view shows the key's attempts
// from its history, each linked to its trace, and the job's type from it; the key's trace search uses
// the key attribute in the spans' form (hashed by default, never the raw
// key) and the service name given.
func TestKeyViewHistoryAndTraceLinks(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	m, err := lease.NewManager(rdb, lease.WithPrefix(prefix), lease.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	s, err := idempotency.New(ctx, rdb, m, idempotency.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	const tid = "0af7651916cd43dd8448eb211c80319c"
	if err := s.HistoryStart(ctx, "order-9", idempotency.Attempt{Attempt: 1, Fence: 7, Owner: "ab12cd34", Worker: "host/1", TraceID: tid, Type: "payments.transfer"}, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.HistoryEnd(ctx, "order-9", 7, idempotency.EndLeaseLost); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, console.Config{Redis: rdb, KeyPrefix: prefix, JaegerURL: "http://jaeger:16686", JaegerService: "payments"})
	c := newClient(t, srv)
	code, body := c.do("GET", "/api/key?key=order-9", "", nil)
	if code != 200 {
		t.Fatalf("key: %d %s", code, body)
	}
	var v struct {
		Type     string `json:"type"`
		TraceURL string `json:"trace_url"`
		History  []struct {
			Type     string `json:"type"`
			Fence    string `json:"fence"`
			End      string `json:"end"`
			TraceURL string `json:"trace_url"`
		} `json:"history"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	// No worker runs in this console's process: the type comes from the
	// history alone.
	if v.Type != "payments.transfer" || len(v.History) != 1 || v.History[0].Type != "payments.transfer" {
		t.Fatalf("key view type %q, history %+v: want payments.transfer from the history", v.Type, v.History)
	}
	if len(v.History) != 1 || v.History[0].Fence != "7" || v.History[0].End != idempotency.EndLeaseLost ||
		v.History[0].TraceURL != "http://jaeger:16686/trace/"+tid {
		t.Fatalf("history = %+v", v.History)
	}
	u, err := url.Parse(v.TraceURL)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := (*tracing.Tracer)(nil).KeyAttribute("order-9")
	tags := u.Query().Get("tags")
	if u.Query().Get("service") != "payments" || !strings.Contains(tags, want) || strings.Contains(tags, `"order-9"`) ||
		!strings.Contains(tags, tracing.AttrIdempotencyKey) {
		t.Fatalf("trace search %s: want service payments and the key attribute %q", v.TraceURL, want)
	}
}

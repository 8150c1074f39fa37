package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/console"
)

// TestDeadLettersThroughInspector: api/deadletters reads a page through the
// Inspector (an empty topic: no records, no next page) and refuses a cursor
// it did not make and a limit out of bounds.
func TestDeadLettersThroughInspector(t *testing.T) {
	t.Parallel()
	wd := setup(t)
	srv := newServer(t, console.Config{Redis: wd.rdb, KeyPrefix: wd.prefix, Topics: []string{wd.topic}, DLQ: wd.dlq,
		Group: wd.group, Kafka: []kgo.Opt{kgo.SeedBrokers(wd.kafka.Brokers()...)}})
	c := newClient(t, srv)
	if code, body := c.do("GET", "/api/deadletters?limit=5", "", nil); code != http.StatusOK ||
		!strings.Contains(body, `"records":[]`) || !strings.Contains(body, `"next":""`) || !strings.Contains(body, `"limit":5`) {
		t.Fatalf("dead letters of an empty topic: %d %s", code, body)
	}
	for _, q := range []string{"cursor=x", "limit=0", "limit=501"} {
		if code, body := c.do("GET", "/api/deadletters?"+q, "", nil); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", q, code, body)
		}
	}
}

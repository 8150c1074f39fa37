package deadletter

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FuzzNewRecord feeds arbitrary headers and payloads to the dead-letter
// copy: it keeps the record's key and payload and carries each dlq-* header
// once, whatever headers the record arrived with, with the error cut to its
// bound.
func FuzzNewRecord(f *testing.F) {
	f.Add("order-1", []byte(`{"from":"a","to":"b","amount":1}`), "trace", []byte("x"), "dlq-reason", []byte("old"))
	f.Add("", []byte{}, "idempotency-key", []byte("smuggled"), "job-type", []byte("other"))
	f.Add("a b", []byte{0xff}, "dlq-original-offset", []byte("-1"), "", []byte(nil))
	f.Add("k", bytes.Repeat([]byte("e"), 3000), "dlq-original-cluster", []byte("c"), "dlq-original-topic-id", []byte("id"))
	f.Fuzz(func(t *testing.T, key string, payload []byte, h1 string, v1 []byte, h2 string, v2 []byte) {
		in := &kgo.Record{Topic: "jobs", Partition: 3, Offset: 42, Key: []byte(key), Value: payload,
			Headers: []kgo.RecordHeader{{Key: h1, Value: v1}, {Key: HeaderKey, Value: []byte(key)}, {Key: h2, Value: v2}}}
		dl := newRecord("jobs.dlq", in, ReasonInvalidKey, errors.New(string(payload)))
		if !bytes.Equal(dl.Value, in.Value) || !bytes.Equal(dl.Key, in.Key) || dl.Topic != "jobs.dlq" {
			t.Fatal("dead-letter copy changed the record's key, value or topic")
		}
		for _, h := range []string{HeaderReason, HeaderError, HeaderTopic, HeaderPartition, HeaderOffset} {
			if n := countHeader(dl.Headers, h); n != 1 {
				t.Fatalf("dead-letter copy has %d %s headers, want 1", n, h)
			}
		}
		for _, h := range []string{HeaderCluster, HeaderTopicID} {
			if n := countHeader(dl.Headers, h); n != 0 {
				t.Fatalf("dead-letter copy kept %d %s headers of the record, want none", n, h)
			}
		}
		if got, _ := header(dl.Headers, HeaderError); len(got) > maxErrorLen {
			t.Fatalf("%s header of %d bytes, more than %d", HeaderError, len(got), maxErrorLen)
		}
		if got, _ := header(dl.Headers, HeaderOffset); string(got) != strconv.Itoa(42) {
			t.Fatalf("%s = %q", HeaderOffset, got)
		}
		// The stand-in keeps the coordinates, so a scan finds it like the copy.
		o := origin{cluster: "c"}
		if st := truncated(withOrigin(dl, o), errors.New("too large")); !isCopy(st, in, o) || len(st.Value) != 0 {
			t.Fatal("the stand-in is not found as the record's copy, or keeps the value")
		}
	})
}

// TestReasons: every reason is listed once.
func TestReasons(t *testing.T) {
	rs := Reasons()
	if len(rs) != 12 || len(slices.Compact(slices.Sorted(slices.Values(rs)))) != len(rs) {
		t.Errorf("Reasons() = %v: want 12 distinct reasons", rs)
	}
}

func countHeader(hs []kgo.RecordHeader, key string) int {
	n := 0
	for _, h := range hs {
		if h.Key == key {
			n++
		}
	}
	return n
}

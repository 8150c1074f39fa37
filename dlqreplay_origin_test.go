package leasehold

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReplayRefusesUnreadableOrigin: a dead-letter record whose
// dlq-original-partition header is missing, not a number, negative or past
// int32 is not replayed (no-origin) and reads as partition -1. It read as
// partition 0 before (a missing header, text, an empty value), and past
// int32 as 2147483647: the replay went to partition 0 of the topic whatever
// the key's partition, or to a partition that does not exist, whose failed
// produce left the replay marker pending for good. A valid header is read
// as it is.
func TestReplayRefusesUnreadableOrigin(t *testing.T) {
	t.Parallel()
	w := &Worker{}
	rec := func(partition []byte) *kgo.Record {
		hs := []kgo.RecordHeader{{Key: HeaderKey, Value: []byte("k")}, {Key: HeaderDLQTopic, Value: []byte("jobs")},
			{Key: HeaderDLQOffset, Value: []byte("7")}}
		if partition != nil {
			hs = append(hs, kgo.RecordHeader{Key: HeaderDLQPartition, Value: partition})
		}
		return &kgo.Record{Topic: "jobs.dlq", Headers: hs}
	}
	for name, v := range map[string][]byte{
		"missing": nil, "empty": {}, "text": []byte("three"), "negative": []byte("-2"), "past int32": []byte("2147483648"),
	} {
		d := parseDeadLetter(rec(v))
		if d.OrigPartition != -1 {
			t.Errorf("%s: partition read as %d, want -1", name, d.OrigPartition)
		}
		if r, refused := w.replayRefused("id", d); !refused || r.Outcome != ReplayNoOriginTopic {
			t.Errorf("%s: replay refused %v with %q, want refused as %q", name, refused, r.Outcome, ReplayNoOriginTopic)
		}
	}
	d := parseDeadLetter(rec([]byte("3")))
	if d.OrigTopic != "jobs" || d.OrigPartition != 3 || d.OrigOffset != 7 {
		t.Errorf("origin read as %s/%d@%d, want jobs/3@7", d.OrigTopic, d.OrigPartition, d.OrigOffset)
	}
	if r, refused := w.replayRefused("id", d); refused {
		t.Errorf("a record with its origin refused: %q", r.Outcome)
	}
}

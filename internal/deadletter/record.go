package deadletter

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// maxErrorLen bounds the HeaderError value of a copy, in bytes.
const maxErrorLen = 1 << 10

// maxTruncatedHeader bounds each header value (and the record key) a
// stand-in copy keeps.
const maxTruncatedHeader = 1 << 10

// newRecord builds the dead-letter copy of r for topic: same key and value,
// the original headers, and the dlq-* headers naming reason, cause (cut to
// maxErrorLen bytes) and r's topic, partition and offset. The dlq-* headers
// r arrived with are dropped: a record dead-lettered twice keeps only the
// latest reason. Write adds the origin headers (cluster and topic
// ID).
func newRecord(topic string, r *kgo.Record, reason string, cause error) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, len(r.Headers)+7)
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderReason, HeaderError, HeaderTopic, HeaderPartition, HeaderOffset, HeaderCluster, HeaderTopicID:
			continue
		}
		hs = append(hs, h)
	}
	msg := ""
	if cause != nil {
		msg = cause.Error()
		if len(msg) > maxErrorLen {
			msg = msg[:maxErrorLen]
		}
	}
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderReason, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderError, Value: []byte(msg)},
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderPartition, Value: []byte(strconv.FormatInt(int64(r.Partition), 10))},
		kgo.RecordHeader{Key: HeaderOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))},
	)
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: hs}
}

// withOrigin adds the original's cluster ID and topic ID to rec, a
// dead-letter copy.
func withOrigin(rec *kgo.Record, o origin) *kgo.Record {
	rec.Headers = append(rec.Headers,
		kgo.RecordHeader{Key: HeaderCluster, Value: []byte(o.cluster)},
		kgo.RecordHeader{Key: HeaderTopicID, Value: []byte(o.topicIDString())},
	)
	return rec
}

// refusedAsTooLarge reports whether a produce failed because the record is
// too large for the producer's batch limit or the topic's max.message.bytes:
// the same copy would be refused on every retry.
func refusedAsTooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// truncated returns the stand-in for rec, a dead-letter copy refused as too
// large (err): no value, the record key and the idempotency key, job type
// and dlq-* headers cut to 1 KiB each, the original's other headers dropped,
// and HeaderTruncated naming the refusal and the original's size. It is a
// few KiB at most, and a scan for the copy finds it like the whole copy
// (same dlq-original-* headers).
func truncated(rec *kgo.Record, err error) *kgo.Record {
	cut := func(b []byte) []byte { return b[:min(len(b), maxTruncatedHeader)] }
	size := len(rec.Key) + len(rec.Value)
	var hs []kgo.RecordHeader
	for _, h := range rec.Headers {
		size += len(h.Key) + len(h.Value)
		switch h.Key {
		case HeaderKey, HeaderType, HeaderReason, HeaderError, HeaderTopic, HeaderPartition,
			HeaderOffset, HeaderCluster, HeaderTopicID:
			hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: cut(h.Value)})
		}
	}
	why := fmt.Sprintf("copy of %d bytes (value %d bytes, %d headers) refused: %v",
		size, len(rec.Value), len(rec.Headers), err)
	hs = append(hs, kgo.RecordHeader{Key: HeaderTruncated, Value: cut([]byte(why))})
	return &kgo.Record{Topic: rec.Topic, Key: cut(rec.Key), Headers: hs}
}

// header returns the value of the first header named key.
func header(hs []kgo.RecordHeader, key string) ([]byte, bool) {
	for _, h := range hs {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

// isCopy reports whether r, read from a dead-letter topic, is the copy of
// orig, read from a topic of origin o. A copy without the origin headers
// (written before they existed) is matched by its coordinates.
func isCopy(r, orig *kgo.Record, o origin) bool {
	if c, ok := header(r.Headers, HeaderCluster); ok && string(c) != o.cluster {
		return false
	}
	if id, ok := header(r.Headers, HeaderTopicID); ok && string(id) != o.topicIDString() {
		return false
	}
	is := func(key, want string) bool { v, _ := header(r.Headers, key); return string(v) == want }
	return is(HeaderTopic, orig.Topic) &&
		is(HeaderPartition, strconv.FormatInt(int64(orig.Partition), 10)) &&
		is(HeaderOffset, strconv.FormatInt(orig.Offset, 10))
}

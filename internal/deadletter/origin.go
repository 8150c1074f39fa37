package deadletter

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// origin names the topic a record was read from beyond its name: the
// cluster ID and the topic ID from the brokers' metadata. Offsets start at 0
// again on a new cluster and on a topic deleted and created again under the
// same name; the cluster ID or the topic ID then differs, so markers that
// include them never mistake a new record for an old one that was
// dead-lettered under the same topic, partition and offset.
//
// A broker that knows no topic IDs (Kafka before 2.8) answers zeros, and one
// without a cluster ID an empty string: the marker then names the record by
// its coordinates alone.
type origin struct {
	cluster string
	topicID [16]byte
}

// topicIDString encodes the topic ID as Kafka's tools print it (base64 URL
// alphabet, no padding).
func (o origin) topicIDString() string {
	return base64.RawURLEncoding.EncodeToString(o.topicID[:])
}

// Origins caches the origin (cluster ID and topic ID) of each consumed
// topic. The franz-go client keeps the topic ID it first saw for a topic (a
// recreated topic fails with UNKNOWN_TOPIC_ID until it is assigned anew), so
// the consumer calls [Origins.Forget] when partitions are assigned: the
// entries of the assigned topics are read again at the next dead letter. The
// zero value is ready to use.
type Origins struct {
	mu sync.Mutex
	m  map[string]origin
}

// Forget drops the cached origins of topics (an assignment, as
// kgo.OnPartitionsAssigned passes it).
func (c *Origins) Forget(topics map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t := range topics {
		delete(c.m, t)
	}
}

// get returns topic's origin, from the cache or, on a miss, from the
// brokers' metadata through cl.
func (c *Origins) get(ctx context.Context, cl *kgo.Client, topic string) (origin, error) {
	c.mu.Lock()
	o, ok := c.m[topic]
	c.mu.Unlock()
	if ok {
		return o, nil
	}
	o, err := fetchOrigin(ctx, cl, topic)
	if err != nil {
		return origin{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]origin)
	}
	c.m[topic] = o
	return o, nil
}

// fetchOrigin reads topic's cluster ID and topic ID from the brokers.
func fetchOrigin(ctx context.Context, cl *kgo.Client, topic string) (origin, error) {
	m, err := kadm.NewClient(cl).Metadata(ctx, topic) // not closed: that would close cl
	if err != nil {
		return origin{}, fmt.Errorf("deadletter: metadata of %s: %w", topic, err)
	}
	d, ok := m.Topics[topic]
	switch {
	case !ok:
		return origin{}, fmt.Errorf("deadletter: metadata of %s: topic not listed", topic)
	case d.Err != nil:
		return origin{}, fmt.Errorf("deadletter: metadata of %s: %w", topic, d.Err)
	}
	return origin{cluster: m.Cluster, topicID: d.ID}, nil
}

package leasehold

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// recordOrigin names the topic a record was read from beyond its name: the
// cluster ID and the topic ID from the brokers' metadata. Offsets start at 0
// again on a new cluster and on a topic deleted and created again under the
// same name; the cluster ID or the topic ID then differs, so dead-letter
// markers that include them never mistake a new record for an old one that
// was dead-lettered under the same topic, partition and offset.
//
// A broker that knows no topic IDs (Kafka before 2.8) answers zeros, and one
// without a cluster ID an empty string: the marker then names the record by
// its coordinates alone, as before.
type recordOrigin struct {
	cluster string
	topicID [16]byte
}

// topicIDString encodes the topic ID as Kafka's tools print it (base64 URL
// alphabet, no padding).
func (o recordOrigin) topicIDString() string {
	return base64.RawURLEncoding.EncodeToString(o.topicID[:])
}

// origins caches the origin of each consumed topic. The franz-go client keeps
// the topic ID it first saw for a topic (a recreated topic fails with
// UNKNOWN_TOPIC_ID until it is assigned anew), so the cache is refreshed when
// partitions are assigned: the entries of the assigned topics are dropped
// and read again at the next dead letter.
type origins struct {
	mu sync.Mutex
	m  map[string]recordOrigin
}

// forget drops the cached origins of topics.
func (c *origins) forget(topics map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t := range topics {
		delete(c.m, t)
	}
}

// get returns topic's origin, from the cache or, on a miss, from the brokers'
// metadata through cl.
func (c *origins) get(ctx context.Context, cl *kgo.Client, topic string) (recordOrigin, error) {
	c.mu.Lock()
	o, ok := c.m[topic]
	c.mu.Unlock()
	if ok {
		return o, nil
	}
	o, err := fetchOrigin(ctx, cl, topic)
	if err != nil {
		return recordOrigin{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]recordOrigin)
	}
	c.m[topic] = o
	return o, nil
}

// fetchOrigin reads topic's cluster ID and topic ID from the brokers.
func fetchOrigin(ctx context.Context, cl *kgo.Client, topic string) (recordOrigin, error) {
	m, err := kadm.NewClient(cl).Metadata(ctx, topic) // not closed: that would close cl
	if err != nil {
		return recordOrigin{}, fmt.Errorf("leasehold: metadata of %s: %w", topic, err)
	}
	d, ok := m.Topics[topic]
	switch {
	case !ok:
		return recordOrigin{}, fmt.Errorf("leasehold: metadata of %s: topic not listed", topic)
	case d.Err != nil:
		return recordOrigin{}, fmt.Errorf("leasehold: metadata of %s: %w", topic, d.Err)
	}
	return recordOrigin{cluster: m.Cluster, topicID: d.ID}, nil
}

// originOf returns the origin of topic's records, retrying with backoff
// while the brokers do not answer; ok is false if the worker stopped first.
func (w *Worker) originOf(ctx context.Context, topic string) (recordOrigin, bool) {
	for attempt := 1; ; attempt++ {
		mctx, cancel := context.WithTimeout(ctx, dlqListTimeout)
		o, err := w.origins.get(mctx, w.cl, topic)
		cancel()
		if err == nil {
			return o, true
		}
		w.log.Warn("dead-letter: topic metadata not read", slog.String("topic", topic), slog.Any("err", err))
		if !sleepCtx(w.stopCtx, backoff(attempt, w.cfg.probeMin, w.cfg.probeMax)) { //nolint:contextcheck // retries wait on the worker, not on the record
			return recordOrigin{}, false
		}
	}
}

// onAssignedRefresh refreshes the assigned topics' origins, then runs
// onAssigned.
func (w *Worker) onAssignedRefresh(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	w.origins.forget(assigned)
	w.onAssigned(ctx, cl, assigned)
}

package leasehold

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topicWait is how long Start waits for a topic to appear in the brokers'
// metadata: a topic created just before the worker starts may take a moment
// to reach every broker.
const topicWait = 5 * time.Second

// checkTopics fails with [ErrTopicMissing] when any of topics is unknown to
// the brokers, after waiting up to topicWait for it to appear. Other metadata
// errors are returned as they are. It asks through a client of its own, made
// from the worker's connection options (kopts), before the group client
// exists: a group client joins at once.
func checkTopics(ctx context.Context, kopts []kgo.Opt, topics []string) error {
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return fmt.Errorf("leasehold: kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(topicWait)
	for {
		details, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return fmt.Errorf("leasehold: read topic metadata from Kafka: %w", err)
		}
		var missing []string
		for _, t := range topics {
			d, ok := details[t]
			switch {
			case !ok, errors.Is(d.Err, kerr.UnknownTopicOrPartition):
				missing = append(missing, t)
			case d.Err != nil && !errors.Is(d.Err, kerr.LeaderNotAvailable):
				return fmt.Errorf("leasehold: topic %s: %w", t, d.Err)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s; create it on the cluster before starting the worker "+
				"(the worker never creates topics; the dead-letter topic is the first topic + .dlq unless set)",
				ErrTopicMissing, strings.Join(missing, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

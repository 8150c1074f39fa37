package leasehold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupProtocol is the Kafka consumer group protocol a worker joins its group
// with ([WithGroupProtocol]).
type GroupProtocol string

const (
	// GroupProtocolClassic is the client-driven protocol (JoinGroup and
	// SyncGroup) with the cooperative-sticky balancer: the default, and what
	// every Kafka since 2.4 speaks. The group session timeout and heartbeat
	// interval are the client's ([SessionTimeoutFor]).
	GroupProtocolClassic GroupProtocol = "classic"
	// GroupProtocolConsumer is Kafka 4's server-side protocol (KIP-848): the
	// group coordinator assigns partitions (its "uniform" assignor) and
	// revokes them one by one through the members' heartbeats. The session
	// timeout and heartbeat interval are then the group's configs
	// (consumer.session.timeout.ms, consumer.heartbeat.interval.ms), which the
	// worker sets to the values it derives when it starts; a broker whose
	// group.consumer.min.session.timeout.ms (45s by default) is above them
	// refuses, and the worker logs that a dead worker's jobs wait for the
	// broker's session timeout. Needs Kafka 4.0 or later; franz-go advises
	// 4.3 or later. An older broker, or one with the protocol disabled, gets
	// the classic protocol (franz-go falls back by itself). See docs/kafka.md
	// for what the chaos run on a three-node cluster showed.
	GroupProtocolConsumer GroupProtocol = "consumer"
)

// ErrGroupProtocol is returned by [New] for a [GroupProtocol] it does not
// know.
var ErrGroupProtocol = errors.New("leasehold: unknown group protocol")

// WithGroupProtocol selects the consumer group protocol. Default
// [GroupProtocolClassic].
func WithGroupProtocol(p GroupProtocol) Opt {
	return optFunc(func(c *config) { c.groupProtocol = p })
}

// ParseGroupProtocol reads "classic" or "consumer" (a flag's value).
func ParseGroupProtocol(s string) (GroupProtocol, error) {
	switch p := GroupProtocol(s); p {
	case GroupProtocolClassic, GroupProtocolConsumer:
		return p, nil
	case "":
		return GroupProtocolClassic, nil
	default:
		return "", fmt.Errorf("%w %q: want %q or %q", ErrGroupProtocol, s, GroupProtocolClassic, GroupProtocolConsumer)
	}
}

// balancerOpts returns the group options of the configured protocol: the
// cooperative-sticky balancer for the classic one; the sticky balancer with
// kgo.ServerSideBalancer for KIP-848, which franz-go maps to the
// coordinator's "uniform" assignor.
func (c *config) balancerOpts() []kgo.Opt {
	if c.groupProtocol == GroupProtocolConsumer {
		return []kgo.Opt{kgo.Balancers(kgo.StickyBalancer()), kgo.ServerSideBalancer()}
	}
	return []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}
}

// setGroupTimeouts writes the group's KIP-848 session timeout and heartbeat
// interval (group configs, kept by the controller) before the first member
// joins. A refusal is logged, not fatal: the group then runs with the
// broker's defaults, and the warning says what that costs.
func (w *Worker) setGroupTimeouts(ctx context.Context, kopts []kgo.Opt, session, hb time.Duration) {
	if w.cfg.groupProtocol != GroupProtocolConsumer {
		return
	}
	attrs := []any{slog.String("group", w.cfg.group), slog.Duration("session_timeout", session),
		slog.Duration("heartbeat_interval", hb)}
	err := alterGroupTimeouts(ctx, kopts, w.cfg.group, session, hb)
	if err != nil {
		w.log.Warn("could not set the KIP-848 group's session timeout and heartbeat interval; the broker's defaults "+
			"apply (group.consumer.session.timeout.ms, 45s by default), so a dead worker's jobs may wait for it "+
			"rather than their leases: lower group.consumer.min.session.timeout.ms and "+
			"group.consumer.min.heartbeat.interval.ms on the brokers", append(attrs, slog.Any("err", err))...)
		return
	}
	w.log.Info("KIP-848 consumer group: session timeout and heartbeat interval set on the group", attrs...)
}

// alterGroupTimeouts sets consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms on group with IncrementalAlterConfigs.
func alterGroupTimeouts(ctx context.Context, kopts []kgo.Opt, group string, session, hb time.Duration) error {
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	set := func(name string, d time.Duration) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name = name
		c.Op = kmsg.IncrementalAlterConfigOpSet
		v := strconv.FormatInt(d.Milliseconds(), 10)
		c.Value = &v
		return c
	}
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	res.Configs = append(res.Configs, set("consumer.session.timeout.ms", session),
		set("consumer.heartbeat.interval.ms", hb))
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = append(req.Resources, res)
	actx, cancel := context.WithTimeout(ctx, topicWait)
	defer cancel()
	resp, err := req.RequestWith(actx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			if r.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *r.ErrorMessage)
			}
			return err
		}
	}
	return nil
}

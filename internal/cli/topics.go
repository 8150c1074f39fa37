package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
)

// dlqMaxMessageBytes is the max.message.bytes `worker topics create` gives
// the dead-letter topic: the worker's producer limit for its default payload
// bound (leasehold.DefaultMaxPayload plus 64 KiB for the key and headers), so
// that the dead-letter copy of any record the worker accepted fits whole.
const dlqMaxMessageBytes = leasehold.DefaultMaxPayload + 64<<10

// DefaultDLQRetention is how long `worker topics create` has the dead-letter
// topic keep its records (retention.ms): long enough for an operator to
// look and replay after a holiday.
const DefaultDLQRetention = 30 * 24 * time.Hour

// topicsConfig is what `worker topics` reads from flags and environment.
type topicsConfig struct {
	brokers, topics, dlq, dialMap, extra  string
	partitions, dlqPartitions, rf, minISR int
	dlqRetention, timeout                 time.Duration
}

// topicPlan is one topic the worker uses, its role and what create gives it.
type topicPlan struct {
	name       string
	dlq        bool
	partitions int32
	configs    map[string]string
}

func cmdTopics(ctx context.Context, e *Env, args []string) error {
	sub := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	f := newFlags(e, "topics", "create|describe|check   (flags after the subcommand)")
	var c topicsConfig
	f.stringVar(&c.brokers, "brokers", "LEASEHOLD_BROKERS", "", "Kafka seed brokers, host:port comma-separated")
	f.stringVar(&c.dialMap, "kafka-dial-map", "LEASEHOLD_KAFKA_DIAL_MAP", "", "connect to other addresses than the brokers advertise: advertised=dial pairs, comma-separated")
	f.stringVar(&c.topics, "topics", "LEASEHOLD_TOPICS", leasehold.DefaultTopic, "the worker's job topics, comma-separated")
	f.stringVar(&c.dlq, "dlq", "LEASEHOLD_DLQ", "", "dead-letter topic (default: first topic + .dlq)")
	f.intVar(&c.partitions, "partitions", "", 6, "create: partitions of each job topic (the most workers that share the work)")
	f.intVar(&c.dlqPartitions, "dlq-partitions", "", 1, "create: partitions of the dead-letter topic")
	f.intVar(&c.rf, "replication-factor", "", 0, "create: replicas of each partition; 0: 3, or the number of brokers if fewer")
	f.intVar(&c.minISR, "min-insync-replicas", "", 0, "create: min.insync.replicas, the replicas that must have a record before an acks=all produce succeeds; 0: 2 at replication 3 or more, else 1")
	f.durationVar(&c.dlqRetention, "dlq-retention", "", DefaultDLQRetention, "create: how long the dead-letter topic keeps records (retention.ms); 0 keeps them for ever")
	f.stringVar(&c.extra, "config", "", "", "create: more configs of the job topics, key=value comma-separated (e.g. retention.ms=86400000)")
	f.durationVar(&c.timeout, "timeout", "", 30*time.Second, "give up after this long")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	if err := c.check(sub); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	switch sub {
	case "create":
		return createTopics(ctx, e.Stdout, adm, c)
	case "describe":
		return describeTopics(ctx, e.Stdout, adm, c.plan(0))
	}
	return checkTopics(ctx, e.Stdout, adm, c.plan(0))
}

// check refuses flag values that would not do what the user meant.
func (c *topicsConfig) check(sub string) error {
	switch {
	case sub != "create" && sub != "describe" && sub != "check":
		return usagef("want 'topics create', 'topics describe' or 'topics check' [flags]")
	case len(splitList(c.brokers)) == 0:
		return usagef("no Kafka brokers: pass --brokers (env LEASEHOLD_BROKERS)")
	case len(splitList(c.topics)) == 0:
		return usagef("--topics %q names no topic", c.topics)
	case c.partitions < 1 || c.partitions > 10000 || c.dlqPartitions < 1 || c.dlqPartitions > 10000:
		return usagef("partitions %d, dlq partitions %d: want 1 to 10000", c.partitions, c.dlqPartitions)
	case c.rf < 0 || c.rf > 32767:
		return usagef("replication factor %d: want 1 or more (0: the default)", c.rf)
	case c.minISR < 0 || (c.rf > 0 && c.minISR > c.rf):
		return usagef("min.insync.replicas %d: want 1 to the replication factor (0: the default)", c.minISR)
	case c.dlqRetention < 0:
		return usagef("dlq retention %v: want 0 (for ever) or more", c.dlqRetention)
	case c.timeout <= 0:
		return usagef("timeout %v: want more than 0", c.timeout)
	}
	if _, err := parseConfigs(c.extra); err != nil {
		return err
	}
	_, err := parseDialMap(c.dialMap)
	return err
}

func (c *topicsConfig) client() (*kgo.Client, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(splitList(c.brokers)...)}
	if m, _ := parseDialMap(c.dialMap); len(m) > 0 {
		opts = append(opts, kgo.Dialer(m.dial))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return cl, nil
}

// parseConfigs reads "key=value,..." topic configs.
func parseConfigs(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range splitList(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usagef("--config %q: want key=value pairs, comma-separated", kv)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// replication returns the replication factor and min.insync.replicas that
// create uses on a cluster of brokers brokers.
func (c *topicsConfig) replication(brokers int) (rf, minISR int) {
	rf = c.rf
	if rf == 0 {
		rf = max(min(3, brokers), 1)
	}
	minISR = c.minISR
	if minISR == 0 {
		minISR = 1
		if rf >= 3 {
			minISR = 2
		}
	}
	return rf, minISR
}

// plan lists the worker's topics, the dead-letter topic first, with the
// configs create gives them on a cluster of brokers brokers (0: names and
// roles only).
func (c *topicsConfig) plan(brokers int) []topicPlan {
	ts := splitList(c.topics)
	dlq := c.dlq
	if dlq == "" {
		dlq = ts[0] + ".dlq"
	}
	_, minISR := c.replication(brokers)
	base := map[string]string{
		"min.insync.replicas":            strconv.Itoa(minISR),
		"cleanup.policy":                 "delete",
		"unclean.leader.election.enable": "false",
	}
	retention := "-1"
	if c.dlqRetention > 0 {
		retention = strconv.FormatInt(c.dlqRetention.Milliseconds(), 10)
	}
	d := topicPlan{name: dlq, dlq: true, partitions: int32(c.dlqPartitions), configs: map[string]string{ //nolint:gosec // checked: 1 to 10000
		"retention.ms": retention, "max.message.bytes": strconv.Itoa(dlqMaxMessageBytes)}}
	extra, _ := parseConfigs(c.extra)
	out := []topicPlan{d}
	for _, t := range ts {
		if t == dlq {
			continue
		}
		out = append(out, topicPlan{name: t, partitions: int32(c.partitions), configs: map[string]string{}}) //nolint:gosec // checked: 1 to 10000
		for k, v := range extra {
			out[len(out)-1].configs[k] = v
		}
	}
	for i := range out {
		for k, v := range base {
			if _, set := out[i].configs[k]; !set {
				out[i].configs[k] = v
			}
		}
	}
	return out
}

// createTopics creates the topics of the plan that do not exist, leaves
// those that do as they are, then waits until every partition has a leader
// and checks them.
func createTopics(ctx context.Context, w io.Writer, adm *kadm.Client, c topicsConfig) error {
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("read the brokers from Kafka: %w", err)
	}
	rf, _ := c.replication(len(brokers))
	plan := c.plan(len(brokers))
	for _, p := range plan {
		configs := map[string]*string{}
		for k, v := range p.configs {
			configs[k] = kadm.StringPtr(v)
		}
		resp, err := adm.CreateTopic(ctx, p.partitions, int16(rf), configs, p.name) //nolint:gosec // checked: at most 32767
		switch {
		case errors.Is(err, kerr.TopicAlreadyExists):
			_, _ = fmt.Fprintf(w, "exists   %s (left as it is; see topics check)\n", p.name)
			continue
		case errors.Is(err, kerr.InvalidReplicationFactor):
			return fmt.Errorf("create %s: replication factor %d on %d brokers: pass --replication-factor %d or fewer: %w",
				p.name, rf, len(brokers), len(brokers), err)
		case err != nil:
			return fmt.Errorf("create %s: %w%s", p.name, err, errDetail(resp.ErrMessage))
		}
		_, _ = fmt.Fprintf(w, "created  %s: %d partitions, replication %d, %s\n", p.name, p.partitions, rf, configList(p.configs))
	}
	if err := waitLeaders(ctx, adm, plan); err != nil {
		return err
	}
	return checkTopics(ctx, w, adm, plan)
}

func errDetail(msg string) string {
	if msg == "" {
		return ""
	}
	return " (" + msg + ")"
}

func configList(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, " ")
}

// waitLeaders waits until the brokers list every topic of plan with a
// leader for each partition, so that a worker started next finds them.
func waitLeaders(ctx context.Context, adm *kadm.Client, plan []topicPlan) error {
	names := planNames(plan)
	for {
		details, err := adm.ListTopics(ctx, names...)
		if err == nil && allLed(details, names) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics created, but not every partition has a leader yet: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func allLed(details kadm.TopicDetails, names []string) bool {
	for _, n := range names {
		d, ok := details[n]
		if !ok || d.Err != nil || len(d.Partitions) == 0 {
			return false
		}
		for _, p := range d.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
	}
	return true
}

func planNames(plan []topicPlan) []string {
	names := make([]string, len(plan))
	for i, p := range plan {
		names[i] = p.name
	}
	return names
}

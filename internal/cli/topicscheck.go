package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shownConfigs are the topic configs describe prints: those the worker's
// guarantees depend on.
var shownConfigs = []string{"min.insync.replicas", "unclean.leader.election.enable", "cleanup.policy",
	"retention.ms", "max.message.bytes"}

// topicState is what the brokers say about one topic of the plan.
type topicState struct {
	topicPlan
	exists  bool
	detail  kadm.TopicDetail
	configs map[string]kadm.Config
}

func (s topicState) role() string {
	if s.dlq {
		return "dead-letter topic"
	}
	return "job topic"
}

func (s topicState) rf() int {
	n := 0
	for _, p := range s.detail.Partitions {
		n = max(n, len(p.Replicas))
	}
	return n
}

// intConfig returns the topic's config key as an integer, or def when the
// brokers did not report it.
func (s topicState) intConfig(key string, def int) int {
	c, ok := s.configs[key]
	if !ok || c.Value == nil {
		return def
	}
	n, err := strconv.Atoi(*c.Value)
	if err != nil {
		return def
	}
	return n
}

func (s topicState) config(key string) string {
	c := s.configs[key]
	return c.MaybeValue()
}

// readTopics asks the brokers about every topic of plan: metadata, then the
// configs of those that exist. It returns the states and the number of
// brokers.
func readTopics(ctx context.Context, adm *kadm.Client, plan []topicPlan) ([]topicState, int, error) {
	meta, err := adm.Metadata(ctx, planNames(plan)...)
	if err != nil {
		return nil, 0, fmt.Errorf("read topic metadata from Kafka: %w", err)
	}
	states := make([]topicState, len(plan))
	var existing []string
	for i, p := range plan {
		d, ok := meta.Topics[p.name]
		states[i] = topicState{topicPlan: p, detail: d, configs: map[string]kadm.Config{}}
		states[i].exists = ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition)
		if states[i].exists && d.Err == nil {
			existing = append(existing, p.name)
		}
	}
	if len(existing) == 0 {
		return states, len(meta.Brokers), nil
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, existing...)
	if err != nil {
		return nil, 0, fmt.Errorf("read topic configs from Kafka: %w", err)
	}
	for i := range states {
		rc, err := rcs.On(states[i].name, nil)
		if err != nil || rc.Err != nil {
			continue
		}
		for _, c := range rc.Configs {
			states[i].configs[c.Key] = c
		}
	}
	return states, len(meta.Brokers), nil
}

// finding is one thing check reports about a topic: a problem (the worker
// refuses to start, or cannot do its work) or a warning (it works, with
// weaker guarantees than the cluster could give).
type finding struct {
	topic   string
	problem bool
	msg     string
}

// topicFindings judges the topics of a cluster of brokers brokers.
func topicFindings(states []topicState, brokers int) []finding {
	var out []finding
	for _, s := range states {
		add := func(problem bool, format string, args ...any) {
			out = append(out, finding{topic: s.name, problem: problem, msg: fmt.Sprintf(format, args...)})
		}
		switch {
		case !s.exists:
			add(true, "the %s does not exist: worker run refuses to start; create it with 'worker topics create'", s.role())
			continue
		case s.detail.Err != nil && !errors.Is(s.detail.Err, kerr.LeaderNotAvailable):
			add(true, "the brokers answer %v for the %s: worker run refuses to start", s.detail.Err, s.role())
			continue
		}
		replicationFindings(s, brokers, add)
		policyFindings(s, add)
		partitionFindings(s, add)
	}
	return out
}

func replicationFindings(s topicState, brokers int, add func(bool, string, ...any)) {
	rf, minISR := s.rf(), s.intConfig("min.insync.replicas", 1)
	switch {
	case rf > 0 && minISR > rf && s.dlq:
		add(true, "min.insync.replicas %d is more than its %d replicas: every acks=all produce is refused (NOT_ENOUGH_REPLICAS), "+
			"so no record can be dead-lettered and a partition with a poison record stops", minISR, rf)
	case rf > 0 && minISR > rf:
		add(true, "min.insync.replicas %d is more than its %d replicas: every acks=all produce is refused (NOT_ENOUGH_REPLICAS), "+
			"so no job can be enqueued", minISR, rf)
	case rf == 1 && brokers > 1:
		add(false, "replication factor 1 on %d brokers: the loss of one broker's disk loses its records; use 3 (with min.insync.replicas 2)", brokers)
	case rf < 3 && brokers >= 3:
		add(false, "replication factor %d on %d brokers: use 3 (with min.insync.replicas 2) to survive a broker's loss without stopping", rf, brokers)
	case rf >= 3 && minISR < 2:
		add(false, "min.insync.replicas %d at replication %d: an acks=all produce is acknowledged once one replica has it, and lost with that replica; use 2", minISR, rf)
	}
}

func policyFindings(s topicState, add func(bool, string, ...any)) {
	if strings.Contains(s.config("cleanup.policy"), "compact") {
		add(false, "cleanup.policy %s: compaction keeps only the last record of a key and can delete one before it is consumed; use delete",
			s.config("cleanup.policy"))
	}
	if s.config("unclean.leader.election.enable") == "true" {
		add(false, "unclean.leader.election.enable is true: a replica that missed acknowledged records can become leader and lose them; set it to false")
	}
	if n := s.intConfig("max.message.bytes", dlqMaxMessageBytes); s.dlq && n < dlqMaxMessageBytes {
		add(false, "max.message.bytes %d: the dead-letter copy of a record near the 1 MiB payload bound may not fit and is replaced by a stand-in "+
			"without its payload; set %d", n, dlqMaxMessageBytes)
	}
}

func partitionFindings(s topicState, add func(bool, string, ...any)) {
	minISR := s.intConfig("min.insync.replicas", 1)
	for _, p := range s.detail.Partitions.Sorted() {
		switch {
		case p.Leader < 0 || errors.Is(p.Err, kerr.LeaderNotAvailable):
			add(false, "partition %d has no leader now: its records wait until one is elected", p.Partition)
		case len(p.ISR) < minISR && minISR <= len(p.Replicas): // above the replicas: a problem reported already
			add(false, "partition %d has %d in-sync replicas, fewer than min.insync.replicas %d: acks=all produces to it are refused now",
				p.Partition, len(p.ISR), minISR)
		}
	}
}

// checkTopics prints what check finds about the topics of plan and fails
// when it finds a problem.
func checkTopics(ctx context.Context, w io.Writer, adm *kadm.Client, plan []topicPlan) error {
	states, brokers, err := readTopics(ctx, adm, plan)
	if err != nil {
		return err
	}
	fs := topicFindings(states, brokers)
	problems := 0
	for _, s := range states {
		found := false
		for _, f := range fs {
			if f.topic != s.name {
				continue
			}
			found = true
			kind := "warning"
			if f.problem {
				kind, problems = "problem", problems+1
			}
			_, _ = fmt.Fprintf(w, "%-8s %s: %s\n", kind, s.name, f.msg)
		}
		if !found {
			_, _ = fmt.Fprintf(w, "ok       %s: %s, %d partitions, replication %d, min.insync.replicas %d\n",
				s.name, s.role(), len(s.detail.Partitions), s.rf(), s.intConfig("min.insync.replicas", 1))
		}
	}
	if problems > 0 {
		return fmt.Errorf("%d problems with the worker's topics (above)", problems)
	}
	return nil
}

// describeTopics prints the topics of plan: settings and partitions.
func describeTopics(ctx context.Context, w io.Writer, adm *kadm.Client, plan []topicPlan) error {
	states, brokers, err := readTopics(ctx, adm, plan)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(w, "%d brokers\n", brokers)
	for _, s := range states {
		if !s.exists {
			_, _ = fmt.Fprintf(w, "\n%s (%s): does not exist\n", s.name, s.role())
			continue
		}
		_, _ = fmt.Fprintf(w, "\n%s (%s): %d partitions, replication %d, topic ID %s\n", s.name, s.role(),
			len(s.detail.Partitions), s.rf(), s.detail.ID)
		for _, k := range shownConfigs {
			c, ok := s.configs[k]
			if !ok {
				continue
			}
			_, _ = fmt.Fprintf(w, "  %s=%s (%s)\n", k, c.MaybeValue(), configSource(c.Source))
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "  PARTITION\tLEADER\tREPLICAS\tIN-SYNC")
		for _, p := range s.detail.Partitions.Sorted() {
			_, _ = fmt.Fprintf(tw, "  %d\t%d\t%s\t%s\n", p.Partition, p.Leader, ids(p.Replicas), ids(p.ISR))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func configSource(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "topic"
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	}
	return "broker"
}

func ids(xs []int32) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(int(x))
	}
	return strings.Join(parts, ",")
}

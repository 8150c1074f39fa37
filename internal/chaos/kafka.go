package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/kafkabroker"
)

// The jobs topic's partitions, and the dead-letter topic's, on either broker.
const (
	jobPartitions = 6
	dlqPartitions = 1
)

// brokerFaults carries out the Kafka broker's faults on a real broker, one
// at a time (a fault scheduled while another is under way waits for it, so
// that none is dropped), and counts them.
type brokerFaults struct {
	b        *kafkabroker.Broker  // the single broker; nil on a cluster
	cluster  *kafkabroker.Cluster // nil on a single broker
	log      *slog.Logger
	turn     int    // on a cluster: every fault's turn (which partition's leader)
	killTurn int    // on a cluster: which role the next kill goes to
	group    string // the workers' consumer or share group (its coordinator is a role)

	run    sync.Mutex // held for the whole of one fault
	mu     sync.Mutex
	kills  int
	pauses int
	outage time.Duration
	err    error // a restart that failed: the run cannot go on
}

// startKafka starts the run's broker (the dev-broker or Apache Kafka, as
// configured) with the jobs and dead-letter topics, and sets r.brokerAdr.
func (r *run) startKafka(ctx context.Context) error {
	switch r.cfg.Kafka {
	case KafkaApache:
		return r.startApache(ctx)
	case KafkaApacheCluster:
		return r.startApacheCluster(ctx)
	}
	return r.startDevBroker(ctx)
}

// startDevBroker starts `worker dev-broker` (kfake), which creates the
// topics itself.
func (r *run) startDevBroker(ctx context.Context) error {
	port, err := FreePort(ctx)
	if err != nil {
		return err
	}
	r.brokerAdr = "127.0.0.1:" + strconv.Itoa(port)
	r.broker = &Proc{Name: "dev-broker", Path: r.workerBin, LogPath: filepath.Join(r.dir, "dev-broker.log"),
		Args: []string{"dev-broker", "--listen", r.brokerAdr,
			"--topics", fmt.Sprintf("%s:%d,%s.dlq:%d", leasehold.DefaultTopic, jobPartitions, leasehold.DefaultTopic, dlqPartitions),
			// kfake, like Kafka, refuses session timeouts under 6s by
			// default; CHAOS_SESSION_TIMEOUT may ask for a shorter one.
			"--group-min-session-timeout", min(r.cfg.SessionTimeout, leasehold.MinSessionTimeout).String()}}
	if err := r.broker.Start(); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return waitTCP(wctx, r.broker, r.brokerAdr)
}

// startApache starts a single-node Apache Kafka broker on a data directory
// in the run's directory (its log is kafka/broker.log) and creates the
// topics: the broker does not create topics on first use.
func (r *run) startApache(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	b, err := kafkabroker.Start(sctx, kafkabroker.Config{Dir: filepath.Join(r.dir, "kafka")})
	if err != nil {
		return fmt.Errorf("chaos: start Apache Kafka (CHAOS_KAFKA=apache): %w", err)
	}
	r.kafka = &brokerFaults{b: b, log: r.log, group: r.cfg.group()}
	r.brokerAdr = b.Addr()
	r.log.Info("apache kafka started", slog.String("addr", b.Addr()), slog.String("log", b.LogPath()))
	return createTopics(sctx, r.brokerAddrs(), 1)
}

// startApacheCluster starts three Apache Kafka nodes in the run's directory
// (kafka/nodeN/broker.log) and creates the topics at the cluster's default
// replication (3) and min.insync.replicas (2).
func (r *run) startApacheCluster(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	c, err := kafkabroker.StartCluster(sctx, kafkabroker.ClusterConfig{Dir: filepath.Join(r.dir, "kafka")})
	if err != nil {
		return fmt.Errorf("chaos: start an Apache Kafka cluster (CHAOS_KAFKA=apache-cluster): %w", err)
	}
	r.kafka = &brokerFaults{cluster: c, log: r.log, group: r.cfg.group()}
	r.brokerAdr = c.Bootstrap()
	r.log.Info("apache kafka cluster started", slog.String("bootstrap", c.Bootstrap()), slog.String("dir", c.Dir()))
	return createTopics(sctx, r.brokerAddrs(), -1)
}

// brokerAddrs returns the run's broker addresses.
func (r *run) brokerAddrs() []string { return strings.Split(r.brokerAdr, ",") }

// createTopics creates the jobs topic and its dead-letter topic with rf
// replicas each (-1: the brokers' default), and waits until every
// partition has a leader.
func createTopics(ctx context.Context, addrs []string, rf int16) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	want := map[string]int32{leasehold.DefaultTopic: jobPartitions, leasehold.DefaultTopic + ".dlq": dlqPartitions}
	for topic, parts := range want {
		res, err := adm.CreateTopic(ctx, parts, rf, nil, topic)
		if err != nil {
			return fmt.Errorf("chaos: create topic %s: %w", topic, err)
		}
		if res.Err != nil {
			return fmt.Errorf("chaos: create topic %s: %w", topic, res.Err)
		}
	}
	for {
		md, err := adm.Metadata(ctx, leasehold.DefaultTopic, leasehold.DefaultTopic+".dlq")
		if err == nil && topicsLed(md, want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: topics have no leader: %w", context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// topicsLed reports whether md lists every topic of want with its partition
// count, each partition with a leader.
func topicsLed(md kadm.Metadata, want map[string]int32) bool {
	for topic, parts := range want {
		td, ok := md.Topics[topic]
		if !ok || td.Err != nil || len(td.Partitions) != int(parts) {
			return false
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
	}
	return true
}

// apply carries out e, a KillBroker or a PauseBroker, and returns when the
// broker answers again. log carries the event.
func (f *brokerFaults) apply(ctx context.Context, e Event, log *slog.Logger) {
	f.run.Lock()
	defer f.run.Unlock()
	if ctx.Err() != nil {
		return
	}
	b, role := f.target(ctx, e.Action)
	log = log.With(slog.String("role", role), slog.Int("node", int(b.NodeID())))
	switch e.Action {
	case KillBroker:
		at := time.Now()
		b.Kill()
		f.count(func() { f.kills++ })
		log.Info("broker killed", slog.Time("at", at), slog.Duration("down", e.For))
		sleepCtx(ctx, e.For)
		rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		err := b.Restart(rctx)
		cancel()
		out := time.Since(at)
		f.count(func() {
			f.outage += out
			if err != nil {
				f.err = errors.Join(f.err, fmt.Errorf("chaos: restart Apache Kafka after its kill: %w", err))
			}
		})
		log.Info("broker restarted", slog.Duration("outage", out), slog.Any("err", err))
	case PauseBroker:
		at := time.Now()
		if err := b.Pause(); err != nil {
			log.Warn("pause broker", slog.Any("err", err))
			return
		}
		f.count(func() { f.pauses++ })
		log.Info("broker paused", slog.Time("at", at), slog.Duration("for", e.For))
		sleepCtx(ctx, e.For)
		err := b.Resume()
		out := time.Since(at)
		f.count(func() {
			f.outage += out
			if err != nil {
				f.err = errors.Join(f.err, fmt.Errorf("chaos: resume Apache Kafka: %w", err))
			}
		})
		log.Info("broker resumed", slog.Duration("outage", out), slog.Any("err", err))
	}
}

// clusterRoles are the nodes a cluster's kills go to, in turn.
var clusterRoles = []string{"partition-leader", "group-coordinator", "active-controller"}

// target returns the node a fault goes to and its role: the single broker,
// or on a cluster, for a kill in turn the leader of a jobs partition, the
// group's coordinator and the active controller, for a pause a partition
// leader. A node the cluster cannot name now is replaced by one in turn.
func (f *brokerFaults) target(ctx context.Context, a Action) (*kafkabroker.Broker, string) {
	if f.cluster == nil {
		return f.b, "broker"
	}
	// Kills and pauses keep turns of their own, so that the kills go to
	// the roles in order whatever pauses come between them.
	turn := f.turn
	f.turn++
	role := clusterRoles[0]
	if a == KillBroker {
		role = clusterRoles[f.killTurn%len(clusterRoles)]
		f.killTurn++
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var id int32
	var err error
	switch role {
	case "group-coordinator":
		id, err = f.cluster.Coordinator(lctx, f.group)
	case "active-controller":
		id, err = f.cluster.ActiveController(lctx)
	default:
		id, err = f.cluster.Leader(lctx, leasehold.DefaultTopic, int32(turn%jobPartitions)) //nolint:gosec // < jobPartitions
	}
	if b := f.cluster.Node(id); err == nil && b != nil {
		return b, role
	}
	f.log.Warn("no node found for the fault's role; taking one in turn", slog.String("role", role), slog.Any("err", err))
	nodes := f.cluster.Nodes()
	return nodes[turn%len(nodes)], "node"
}

func (f *brokerFaults) count(do func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	do()
}

// figures returns the faults carried out, their total outage, and the error
// of a restart or resume that failed.
func (f *brokerFaults) figures() (kills, pauses int, outage time.Duration, err error) {
	if f == nil {
		return 0, 0, 0, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kills, f.pauses, f.outage, f.err
}

// stop stops the broker cleanly, continuing it first if it is paused.
func (f *brokerFaults) stop(ctx context.Context) {
	if f == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	if f.cluster != nil {
		if err := f.cluster.Stop(ctx); err != nil {
			f.log.Warn("stop the Apache Kafka cluster", slog.Any("err", err))
		}
		return
	}
	if err := f.b.Stop(ctx); err != nil {
		f.log.Warn("stop Apache Kafka", slog.Any("err", err))
	}
}

package kafkabroker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterConfig configures [StartCluster]. The zero value runs three nodes
// with a 512 MiB heap each in a new temporary directory.
type ClusterConfig struct {
	// Nodes is the number of nodes, each a broker and a KRaft controller
	// in one JVM; the controller quorum is all of them. Zero: 3.
	Nodes int
	// Dir holds node N's directory as Dir/nodeN. Empty: a new temporary
	// directory, removed by Stop.
	Dir string
	// Libs is the directory of the broker's jars. Empty: [Libs] finds them.
	Libs string
	// Heap is each JVM's -Xmx. Empty: 512m (three nodes idle under 1 GiB
	// together).
	Heap string
	// Props are extra or overriding server.properties entries of every
	// node, over the cluster's own (see [ClusterProps]).
	Props map[string]string
	// StartTimeout bounds the wait for every node to answer. Zero: 5m (a
	// loaded 2-core machine starts three JVMs slowly; idle, it takes seconds).
	StartTimeout time.Duration
}

// ClusterProps returns the server.properties entries a cluster of n nodes
// sets beside a single broker's: replication n (at most 3) for the
// internal topics and the default of new topics, min.insync.replicas one
// less (at least 1), few threads (the nodes share a 2-core machine), and
// failure detection in seconds rather than Kafka's 9 s broker session and
// 30 s replica lag, so that a killed node's partitions move quickly.
func ClusterProps(n int) map[string]string {
	rf := min(n, 3)
	minISR := strconv.Itoa(max(rf-1, 1))
	return map[string]string{
		"default.replication.factor":                       strconv.Itoa(rf),
		"min.insync.replicas":                              minISR,
		"offsets.topic.replication.factor":                 strconv.Itoa(rf),
		"transaction.state.log.replication.factor":         strconv.Itoa(rf),
		"transaction.state.log.min.isr":                    minISR,
		"share.coordinator.state.topic.replication.factor": strconv.Itoa(rf),
		"share.coordinator.state.topic.min.isr":            minISR,
		"num.network.threads":                              "2",
		"num.io.threads":                                   "2",
		"background.threads":                               "2",
		"num.replica.fetchers":                             "1",
		"broker.heartbeat.interval.ms":                     "1000",
		"broker.session.timeout.ms":                        "4000",
		"replica.lag.time.max.ms":                          "8000",
		"unclean.leader.election.enable":                   "false",
		// Kafka's 1 s election and 2 s fetch timeouts: on a loaded 2-core
		// machine the three controllers starve each other and hold one
		// election after another (epoch 21 before a leader stuck, seen at
		// load average 50). The active controller's loss is seen in 6 s.
		"controller.quorum.election.timeout.ms": "3000",
		"controller.quorum.fetch.timeout.ms":    "6000",
		"controller.quorum.request.timeout.ms":  "5000",
	}
}

// clusterJVMOpts keep each node's JVM to a share of a 2-core machine.
var clusterJVMOpts = []string{"-XX:ParallelGCThreads=1", "-XX:ConcGCThreads=1", "-XX:CICompilerCount=2"}

// Cluster is a KRaft cluster of nodes on loopback, each a [Broker].
type Cluster struct {
	nodes   []*Broker
	dir     string
	tempDir bool
}

// StartCluster starts a cluster of cfg.Nodes nodes (broker and controller
// each) and returns once every node answers and lists itself.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	n := cfg.Nodes
	if n == 0 {
		n = 3
	}
	if n < 1 || n > 9 {
		return nil, fmt.Errorf("kafkabroker: %d nodes: want 1 to 9", n)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 5 * time.Minute
	}
	c := &Cluster{dir: cfg.Dir}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "leasehold-kafka-cluster-")
		if err != nil {
			return nil, fmt.Errorf("kafkabroker: %w", err)
		}
		c.dir, c.tempDir = d, true
	}
	if err := c.prepare(ctx, cfg, n); err != nil {
		c.removeTemp()
		return nil, err
	}
	if err := c.launchAll(ctx); err != nil {
		c.kill()
		c.removeTemp()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) prepare(ctx context.Context, cfg ClusterConfig, n int) error {
	props := ClusterProps(n)
	for k, v := range cfg.Props {
		props[k] = v
	}
	for i := 1; i <= n; i++ {
		b, err := prepare(ctx, Config{Dir: filepath.Join(c.dir, "node"+strconv.Itoa(i)), Libs: cfg.Libs,
			Heap: cmp.Or(cfg.Heap, "512m"), Props: props, StartTimeout: cfg.StartTimeout, JVMOpts: clusterJVMOpts, nodeID: i})
		if err != nil {
			return err
		}
		cfg.Libs = b.cfg.Libs
		c.nodes = append(c.nodes, b)
	}
	voters := make([]string, n)
	for i, b := range c.nodes {
		voters[i] = fmt.Sprintf("%d@127.0.0.1:%d", b.cfg.nodeID, b.cfg.ControllerPort)
	}
	id, err := c.nodes[0].tool(ctx, "random-uuid")
	if err != nil {
		return err
	}
	// Formatting starts a JVM a node: all at once.
	errs := make(chan error, n)
	for _, b := range c.nodes {
		b.cfg.voters, b.cfg.clusterID = strings.Join(voters, ","), strings.TrimSpace(id)
		go func() { errs <- b.setUp(ctx) }()
	}
	var all []error
	for range c.nodes {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// launchAll starts every node's JVM, then waits for each: no node is ready
// before a majority of the controllers runs.
func (c *Cluster) launchAll(ctx context.Context) error {
	exits := make([]<-chan struct{}, len(c.nodes))
	for i, b := range c.nodes {
		ex, err := b.launch()
		if err != nil {
			return err
		}
		exits[i] = ex
	}
	errs := make(chan error, len(c.nodes))
	for i, b := range c.nodes {
		go func() { errs <- b.awaitReady(ctx, exits[i]) }()
	}
	var all []error
	for range c.nodes {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// Nodes returns the cluster's nodes; node i+1 is Nodes()[i].
func (c *Cluster) Nodes() []*Broker { return c.nodes }

// Node returns the node of KRaft node ID id, or nil.
func (c *Cluster) Node(id int32) *Broker {
	for _, b := range c.nodes {
		if b.NodeID() == id {
			return b
		}
	}
	return nil
}

// Addrs returns every node's bootstrap address.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, b := range c.nodes {
		out[i] = b.Addr()
	}
	return out
}

// Bootstrap returns the nodes' addresses, comma-separated.
func (c *Cluster) Bootstrap() string { return strings.Join(c.Addrs(), ",") }

// Dir returns the directory that holds the nodes' directories.
func (c *Cluster) Dir() string { return c.dir }

// Stop shuts every node down cleanly, all at once (a node stopped alone
// waits for the controller quorum the others would leave), and removes a
// temporary directory. It is idempotent.
func (c *Cluster) Stop(ctx context.Context) error {
	errs := make(chan error, len(c.nodes))
	for _, b := range c.nodes {
		go func() { errs <- b.Stop(ctx) }()
	}
	var all []error
	for range c.nodes {
		all = append(all, <-errs)
	}
	c.removeTemp()
	return errors.Join(all...)
}

func (c *Cluster) kill() {
	for _, b := range c.nodes {
		b.Kill()
	}
}

func (c *Cluster) removeTemp() {
	if c.tempDir {
		_ = os.RemoveAll(c.dir)
	}
}

// Leader returns the node ID of the leader of topic's partition, as the
// cluster's metadata says now, or -1.
func (c *Cluster) Leader(ctx context.Context, topic string, partition int32) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	details, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return -1, err
	}
	p, ok := details[topic].Partitions[partition]
	if !ok {
		return -1, fmt.Errorf("kafkabroker: %s/%d not in the metadata", topic, partition)
	}
	return p.Leader, nil
}

// Coordinator returns the node ID of group's coordinator now.
func (c *Cluster) Coordinator(ctx context.Context, group string) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	r := kadm.NewClient(cl).FindGroupCoordinators(ctx, group)[group]
	if r.Err != nil {
		return -1, r.Err
	}
	return r.NodeID, nil
}

// ActiveController returns the node ID of the active controller: the
// leader of the metadata log (DescribeQuorum, which a broker forwards to
// the controllers; a KRaft broker's metadata answer names a random broker
// as controller instead).
func (c *Cluster) ActiveController(ctx context.Context) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, err
	}
	if len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
		return -1, errors.New("kafkabroker: describe quorum: empty answer")
	}
	return resp.Topics[0].Partitions[0].LeaderID, nil
}

package testkit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/freeport"
	"github.com/leasehold/leasehold/internal/spawn"
	"github.com/redis/go-redis/v9"
)

// ClusterNodeTimeout is the cluster-node-timeout every node of a [Cluster]
// runs with. It bounds how quickly a killed master is detected and its replica
// promoted (about two to three times this value).
const ClusterNodeTimeout = 1000 * time.Millisecond

// clusterSize is the number of redis-server processes of a Cluster: three
// masters, each with one replica.
const clusterSize = 6

// Cluster is a real Redis Cluster of six redis-server processes on free
// ports of 127.0.0.1: three masters, each with one replica, created with
// `redis-cli --cluster create ... --cluster-replicas 1`. Nodes persist nothing
// on their own but their nodes.conf, so a restarted node comes back empty and
// rejoins as the replica of whoever owns its slots then.
//
// Starting a Cluster costs a few seconds of CPU; share one per test package
// (one top-level test with subtests, or a TestMain) rather than one per test.
type Cluster struct {
	dir   string
	nodes []*ClusterNode

	mu     sync.Mutex
	closed bool
}

// ClusterNode is one redis-server process of a [Cluster].
type ClusterNode struct {
	c    *Cluster
	port int
	dir  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process has exited
	id   string        // cluster node id, stable across restarts (nodes.conf)
}

// StartCluster starts a six-node Redis Cluster (three masters, three
// replicas) in t.TempDir() and tears it down when t's cleanup runs. It calls
// t.Fatal when redis-server or redis-cli is missing or the cluster does not
// form.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := NewCluster(t.TempDir())
	if err != nil {
		t.Fatalf("testkit: start cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("testkit: close cluster: %v", err)
		}
	})
	return c
}

// NewCluster starts a six-node Redis Cluster with its files under dir (which
// must exist). The caller must Close it; [StartCluster] does so through
// t.Cleanup. NewCluster is for a TestMain that shares one cluster across a
// package's tests.
func NewCluster(dir string) (*Cluster, error) {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s not found on PATH: %w", bin, err)
		}
	}
	c := &Cluster{dir: dir}
	ok := false
	defer func() {
		if !ok {
			_ = c.Close()
		}
	}()
	ports, err := clusterFreePorts(clusterSize)
	if err != nil {
		return nil, err
	}
	for i, p := range ports {
		n := &ClusterNode{c: c, port: p, dir: filepath.Join(dir, fmt.Sprintf("node%d-%d", i, p))}
		if err := os.MkdirAll(n.dir, 0o750); err != nil {
			return nil, err
		}
		if err := n.writeConfig(); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.create(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// create starts the nodes, joins them into a cluster with one replica per
// master, and waits until it is healthy.
func (c *Cluster) create(ctx context.Context) error {
	for _, n := range c.nodes {
		if err := n.start(); err != nil {
			return err
		}
	}
	for _, n := range c.nodes {
		if err := n.waitPing(ctx); err != nil {
			return err
		}
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	for _, n := range c.nodes {
		id, err := n.query(ctx, "CLUSTER", "MYID")
		if err != nil {
			return err
		}
		n.id = id.(string)
	}
	return c.WaitHealthy(ctx)
}

// Addrs returns the host:port of every node, masters and replicas, in start
// order.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr()
	}
	return out
}

// Nodes returns every node in start order.
func (c *Cluster) Nodes() []*ClusterNode { return append([]*ClusterNode(nil), c.nodes...) }

// Options returns cluster client options seeded with every node, with short
// timeouts suited to tests that kill nodes.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:        c.Addrs(),
		DialTimeout:  time.Second,
		ReadTimeout:  2 * time.Second,
		WriteTimeout: 2 * time.Second,
		MaxRedirects: 16,
	}
}

// Client returns a new go-redis ClusterClient for c, closed when t's cleanup
// runs.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cl := redis.NewClusterClient(c.Options())
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// WaitHealthy waits until every running node reports cluster_state:ok with
// all 16384 slots assigned, every master's slots are served by a running
// node, and every running replica's link to its master is up.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	var last error
	for {
		if last = c.healthy(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not healthy: %w (last: %w)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) healthy(ctx context.Context) error {
	masters := 0
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		info, err := n.info(ctx, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if info["cluster_state"] != "ok" || info["cluster_slots_assigned"] != "16384" || info["cluster_slots_fail"] != "0" {
			return fmt.Errorf("node %s: cluster_state=%s slots_assigned=%s slots_fail=%s", n.Addr(),
				info["cluster_state"], info["cluster_slots_assigned"], info["cluster_slots_fail"])
		}
		repl, err := n.info(ctx, "INFO", "replication")
		if err != nil {
			return err
		}
		switch repl["role"] {
		case "master":
			masters++
		case "slave":
			if repl["master_link_status"] != "up" {
				return fmt.Errorf("replica %s: master link %s", n.Addr(), repl["master_link_status"])
			}
		}
	}
	if masters != 3 {
		return fmt.Errorf("%d running masters, want 3", masters)
	}
	return nil
}

// Masters returns the running nodes whose role is master.
func (c *Cluster) Masters(ctx context.Context) ([]*ClusterNode, error) {
	var out []*ClusterNode
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		role, err := n.Role(ctx)
		if err != nil {
			return nil, err
		}
		if role == "master" {
			out = append(out, n)
		}
	}
	return out, nil
}

// MasterFor returns the running master that serves key's hash slot.
func (c *Cluster) MasterFor(ctx context.Context, key string) (*ClusterNode, error) {
	slot, err := c.Slot(ctx, key)
	if err != nil {
		return nil, err
	}
	masters, err := c.Masters(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range masters {
		owns, err := m.ownsSlot(ctx, slot)
		if err != nil {
			return nil, err
		}
		if owns {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no running master serves slot %d", slot)
}

// Slot returns key's hash slot, as the cluster computes it (CLUSTER KEYSLOT).
func (c *Cluster) Slot(ctx context.Context, key string) (int, error) {
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		v, err := n.query(ctx, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			return 0, err
		}
		return int(v.(int64)), nil
	}
	return 0, errors.New("no running node")
}

// ReplicaOf returns a running replica of master, as master's own
// INFO replication lists them.
func (c *Cluster) ReplicaOf(ctx context.Context, master *ClusterNode) (*ClusterNode, error) {
	repl, err := master.info(ctx, "INFO", "replication")
	if err != nil {
		return nil, err
	}
	for k, v := range repl {
		if !strings.HasPrefix(k, "slave") {
			continue
		}
		for _, field := range strings.Split(v, ",") {
			if p, ok := strings.CutPrefix(field, "port="); ok {
				for _, n := range c.nodes {
					if strconv.Itoa(n.port) == p && n.Running() {
						return n, nil
					}
				}
			}
		}
	}
	return nil, fmt.Errorf("master %s has no running replica", master.Addr())
}

// Failover is what [Cluster.KillMaster] did: the master it killed and the
// replica the cluster promoted in its place.
type Failover struct {
	Killed   *ClusterNode
	Promoted *ClusterNode
}

// KillMaster SIGKILLs the master serving key's slot and waits until its
// replica has been promoted and the cluster is healthy again. Writes the
// master acknowledged but had not yet replicated are lost, as they would be
// in production: Redis replication is asynchronous.
func (c *Cluster) KillMaster(ctx context.Context, key string) (Failover, error) {
	m, err := c.MasterFor(ctx, key)
	if err != nil {
		return Failover{}, err
	}
	r, err := c.ReplicaOf(ctx, m)
	if err != nil {
		return Failover{}, err
	}
	if err := m.Kill(); err != nil {
		return Failover{}, err
	}
	if err := c.WaitPromoted(ctx, r); err != nil {
		return Failover{}, err
	}
	return Failover{Killed: m, Promoted: r}, nil
}

// FailoverLosingWrites fails over the master serving key in a way that
// loses the writes write makes: they are acknowledged by the master but never
// applied by its replica, as happens in production when a master dies before
// its asynchronous replication stream is sent. It waits until everything
// before write has replicated (WAIT), snapshots the replica (SAVE) and pauses
// it, runs write, SIGKILLs the master, then kills the replica and restarts it
// from its snapshot (so that what sat unread in its socket is dropped too),
// and waits until that replica has been promoted. The old master stays down.
func (c *Cluster) FailoverLosingWrites(ctx context.Context, key string, write func() error) (Failover, error) {
	m, err := c.MasterFor(ctx, key)
	if err != nil {
		return Failover{}, err
	}
	r, err := c.ReplicaOf(ctx, m)
	if err != nil {
		return Failover{}, err
	}
	if n, err := m.query(ctx, "WAIT", 1, 5000); err != nil || n != int64(1) {
		return Failover{}, fmt.Errorf("WAIT on %s = %v: %w", m.Addr(), n, err)
	}
	if _, err := r.query(ctx, "SAVE"); err != nil {
		return Failover{}, fmt.Errorf("SAVE on replica %s: %w", r.Addr(), err)
	}
	if err := r.Pause(); err != nil {
		return Failover{}, err
	}
	werr := write()
	if err := m.Kill(); err != nil {
		return Failover{}, err
	}
	if err := r.Kill(); err != nil {
		return Failover{}, err
	}
	if werr != nil {
		return Failover{}, fmt.Errorf("write before the failover: %w", werr)
	}
	if err := r.start(); err != nil {
		return Failover{}, err
	}
	if err := r.waitPing(ctx); err != nil {
		return Failover{}, err
	}
	if err := c.WaitPromoted(ctx, r); err != nil {
		return Failover{}, err
	}
	return Failover{Killed: m, Promoted: r}, nil
}

// WaitPromoted waits until node n reports the master role and the cluster is
// healthy (every slot served, cluster_state:ok on every running node).
func (c *Cluster) WaitPromoted(ctx context.Context, n *ClusterNode) error {
	for {
		role, err := n.Role(ctx)
		if err == nil && role == "master" && c.healthy(ctx) == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not promoted: %w (role %q, err %w, health %w)", n.Addr(), ctx.Err(), role, err, c.healthy(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close kills every node and waits for the processes to exit. Clients made by
// [Cluster.Client] close at their test's cleanup. Close is idempotent.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	var errs []error
	for _, n := range c.nodes {
		if err := n.Kill(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Addr returns the node's host:port.
func (n *ClusterNode) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// ID returns the node's cluster node id.
func (n *ClusterNode) ID() string { return n.id }

// Client returns a plain (non-cluster) client connected to this node only,
// closed when t's cleanup runs. Useful to read a replica or a master directly.
func (n *ClusterNode) Client(t testing.TB) *redis.Client {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: n.Addr(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// Running reports whether the node's process is alive.
func (n *ClusterNode) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Role returns "master" or "slave" as the node reports it (ROLE).
func (n *ClusterNode) Role(ctx context.Context) (string, error) {
	v, err := n.query(ctx, "ROLE")
	if err != nil {
		return "", err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return "", fmt.Errorf("node %s: unexpected ROLE reply %v", n.Addr(), v)
	}
	s, _ := arr[0].(string)
	return s, nil
}

// Kill SIGKILLs the node's process and waits for it to exit. Killing a node
// that is not running is a no-op.
func (n *ClusterNode) Kill() error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process must still die
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("node %s did not exit after SIGKILL", n.Addr())
	}
}

// Pause SIGSTOPs the node: it keeps its sockets but answers nothing, as a
// node in a long GC pause or behind a partition would.
func (n *ClusterNode) Pause() error { return n.signal(syscall.SIGSTOP) }

// Resume SIGCONTs a paused node.
func (n *ClusterNode) Resume() error { return n.signal(syscall.SIGCONT) }

func (n *ClusterNode) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("node %s not started", n.Addr())
	}
	if sig == syscall.SIGSTOP {
		// Return once the node is stopped (kill(2) only queues it).
		return spawn.Pause(n.cmd.Process.Pid, false, 10*time.Second)
	}
	return n.cmd.Process.Signal(sig)
}

// Restart starts a killed node again on the same port with its nodes.conf
// (so the same node id) and no data; it rejoins the cluster, as the replica of
// its former replica if that one was promoted. Restart waits until the node
// answers PING, not until it has resynchronised; use [Cluster.WaitHealthy].
func (n *ClusterNode) Restart(ctx context.Context) error {
	if err := n.Kill(); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(n.dir, "dump.rdb")); err != nil {
		return err
	}
	if err := n.start(); err != nil {
		return err
	}
	return n.waitPing(ctx)
}

func (n *ClusterNode) writeConfig() error {
	conf := strings.Join([]string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(n.port),
		"dir " + n.dir,
		"daemonize no",
		"cluster-enabled yes",
		"cluster-config-file nodes.conf",
		"cluster-node-timeout " + strconv.Itoa(int(ClusterNodeTimeout/time.Millisecond)),
		// A replica may always be promoted, however stale: the tests
		// exercise failovers that lose the master's last writes.
		"cluster-replica-validity-factor 0",
		"save \"\"",
		"appendonly no",
		"maxmemory-policy noeviction",
		"logfile redis.log",
	}, "\n") + "\n"
	return os.WriteFile(filepath.Join(n.dir, "redis.conf"), []byte(conf), 0o600)
}

func (n *ClusterNode) start() error {
	cmd := exec.Command("redis-server", filepath.Join(n.dir, "redis.conf")) //nolint:gosec,noctx // our own config file; the node outlives any one context
	cmd.Dir = n.dir
	n.c.mu.Lock()
	closed := n.c.closed
	n.c.mu.Unlock()
	if closed {
		return fmt.Errorf("start redis-server on %s: cluster closed", n.Addr())
	}
	if err := spawn.Start(cmd); err != nil {
		return fmt.Errorf("start redis-server on %s: %w", n.Addr(), err)
	}
	done := make(chan struct{})
	go func() {
		_ = spawn.Wait(cmd)
		close(done)
	}()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	return nil
}

func (n *ClusterNode) waitPing(ctx context.Context) error {
	for {
		n.mu.Lock()
		done := n.done
		n.mu.Unlock()
		select {
		case <-done:
			return fmt.Errorf("redis-server on %s exited: %s", n.Addr(), n.logTail())
		default:
		}
		// The server answering must be ours: another process may have taken
		// the port between the free-port check and our server's bind.
		if info, err := n.info(ctx, "INFO", "server"); err == nil {
			n.mu.Lock()
			pid := n.cmd.Process.Pid
			n.mu.Unlock()
			if info["process_id"] != strconv.Itoa(pid) {
				return fmt.Errorf("port %d answered by another redis-server (pid %s)", n.port, info["process_id"])
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis-server on %s did not answer: %w: %s", n.Addr(), ctx.Err(), n.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (n *ClusterNode) logTail() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// query runs one command on this node over a short-lived connection.
func (n *ClusterNode) query(ctx context.Context, args ...any) (any, error) {
	cl := redis.NewClient(&redis.Options{
		Addr: n.Addr(), DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second,
		MaxRetries: -1, PoolSize: 1,
	})
	defer func() { _ = cl.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return cl.Do(ctx, args...).Result()
}

// info runs an INFO-style command and parses its field:value lines.
func (n *ClusterNode) info(ctx context.Context, args ...any) (map[string]string, error) {
	v, err := n.query(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("node %s: %v: %w", n.Addr(), args, err)
	}
	s, _ := v.(string)
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			out[k] = val
		}
	}
	return out, nil
}

// ownsSlot reports whether this master serves slot, from CLUSTER SLOTS.
func (n *ClusterNode) ownsSlot(ctx context.Context, slot int) (bool, error) {
	v, err := n.query(ctx, "CLUSTER", "SLOTS")
	if err != nil {
		return false, err
	}
	ranges, _ := v.([]any)
	for _, r := range ranges {
		rr, _ := r.([]any)
		if len(rr) < 3 {
			continue
		}
		lo, _ := rr[0].(int64)
		hi, _ := rr[1].(int64)
		master, _ := rr[2].([]any)
		if len(master) < 2 {
			continue
		}
		port, _ := master[1].(int64)
		if int64(slot) >= lo && int64(slot) <= hi {
			return int(port) == n.port, nil
		}
	}
	return false, nil
}

// clusterFreePorts returns n distinct ports p, each free together with its
// cluster bus port p+10000, below the kernel's ephemeral range (package
// freeport says why).
func clusterFreePorts(n int) ([]int, error) {
	out := make([]int, 0, n)
	for range n {
		p, err := freeport.Pair(context.Background(), 10000)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

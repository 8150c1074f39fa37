// Package kafkabroker runs a single-node Apache Kafka broker (KRaft, broker
// and controller in one JVM) on loopback, from the jars that tools/kafka
// resolves from Maven Central. It serves the real-broker tests
// (internal/testkit), the chaos run (CHAOS_KAFKA=apache) and `make kafka`.
//
// A Broker can be stopped cleanly, killed with SIGKILL, paused with SIGSTOP
// and restarted on its data directory and ports, which is what the chaos run
// needs of it. The JVM runs in a process group of its own and is killed when
// the process that started it dies (Linux PR_SET_PDEATHSIG), so a crashed test
// binary leaves no broker behind.
package kafkabroker

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/freeport"
	"github.com/leasehold/leasehold/internal/spawn"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrNoJava is returned by [Start] when no java executable is found.
var ErrNoJava = errors.New("kafkabroker: java is not installed (the broker needs a JDK or JRE 17+ on PATH, or JAVA_HOME)")

// Config configures [Start]. The zero value runs a broker in a new temporary
// directory with a 1 GiB heap.
type Config struct {
	// Dir holds the broker's data (Dir/data), configuration and log
	// (Dir/broker.log). Empty: a new temporary directory, removed by Stop.
	Dir string
	// Libs is the directory of the broker's jars. Empty: [Libs] finds them.
	Libs string
	// Heap is the JVM's -Xmx. Empty: 1g, ample for tests on a 2-core,
	// 24 GiB machine (the broker idles under 300 MiB).
	Heap string
	// Port and ControllerPort are the client and KRaft controller listener
	// ports on 127.0.0.1. Zero: a free port each.
	Port, ControllerPort int
	// Props are extra or overriding server.properties entries.
	Props map[string]string
	// StartTimeout bounds the wait for the broker to answer. Zero: 5m: a JVM
	// takes seconds to start on an idle machine, minutes on a loaded one.
	StartTimeout time.Duration
	// JVMOpts are extra JVM options, before the class name.
	JVMOpts []string

	// Set by StartCluster: the node's ID (zero: 1), the controller quorum
	// (empty: this node alone) and the cluster ID the storage is formatted
	// with (empty: a new one).
	nodeID    int
	voters    string
	clusterID string
}

// Broker is a running (or stopped) broker process.
type Broker struct {
	cfg     Config
	tempDir bool
	java    string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

// Start formats the storage directory if it is new, starts the broker, and
// returns once it answers metadata requests on its client port.
func Start(ctx context.Context, cfg Config) (*Broker, error) {
	b, err := prepare(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := b.setUp(ctx); err != nil {
		b.removeTemp()
		return nil, err
	}
	if err := b.start(ctx); err != nil {
		b.removeTemp()
		return nil, err
	}
	return b, nil
}

// prepare applies cfg's defaults: java, jars, directory and ports.
func prepare(ctx context.Context, cfg Config) (*Broker, error) {
	java, err := javaPath()
	if err != nil {
		return nil, err
	}
	if cfg.Libs == "" {
		if cfg.Libs, err = Libs(ctx); err != nil {
			return nil, err
		}
	}
	cfg.Heap = cmp.Or(cfg.Heap, "1g")
	cfg.nodeID = cmp.Or(cfg.nodeID, 1)
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 5 * time.Minute
	}
	b := &Broker{cfg: cfg, java: java}
	if b.cfg.Dir == "" {
		if b.cfg.Dir, err = os.MkdirTemp("", "leasehold-kafka-"); err != nil {
			return nil, fmt.Errorf("kafkabroker: %w", err)
		}
		b.tempDir = true
	}
	for _, p := range []*int{&b.cfg.Port, &b.cfg.ControllerPort} {
		if *p == 0 {
			if *p, err = freePort(ctx); err != nil {
				b.removeTemp()
				return nil, err
			}
		}
	}
	return b, nil
}

// setUp writes the configuration and formats the storage if it is new.
func (b *Broker) setUp(ctx context.Context) error {
	if err := b.writeConfig(); err != nil {
		return err
	}
	return b.format(ctx)
}

func (b *Broker) removeTemp() {
	if b.tempDir {
		_ = os.RemoveAll(b.cfg.Dir)
	}
}

// NodeID returns the broker's KRaft node ID.
func (b *Broker) NodeID() int32 { return int32(b.cfg.nodeID) } //nolint:gosec // small node IDs

// Addr returns the broker's bootstrap address, 127.0.0.1:port.
func (b *Broker) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.cfg.Port)) }

// Dir returns the broker's directory (data, configuration, broker.log).
func (b *Broker) Dir() string { return b.cfg.Dir }

// LogPath returns the file the broker logs to.
func (b *Broker) LogPath() string { return filepath.Join(b.cfg.Dir, "broker.log") }

// Running reports whether the broker process is alive (paused counts).
func (b *Broker) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running()
}

func (b *Broker) running() bool {
	if b.cmd == nil {
		return false
	}
	select {
	case <-b.exited:
		return false
	default:
		return true
	}
}

// Stop shuts the broker down cleanly (SIGTERM, then SIGKILL if it has not
// exited when ctx ends) and removes a temporary directory. It is idempotent.
func (b *Broker) Stop(ctx context.Context) error {
	b.mu.Lock()
	if b.running() {
		if b.paused {
			_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGCONT)
			b.paused = false
		}
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
	}
	exited := b.exited
	b.mu.Unlock()
	var err error
	if exited != nil {
		select {
		case <-exited:
		case <-ctx.Done():
			err = fmt.Errorf("kafkabroker: broker did not stop in time, killed: %w", ctx.Err())
			b.Kill()
		}
	}
	if b.tempDir {
		_ = os.RemoveAll(b.cfg.Dir)
	}
	return err
}

// Kill ends the broker with SIGKILL (no clean shutdown) and waits for it to
// exit. Its data directory stays, for [Broker.Restart].
func (b *Broker) Kill() {
	b.mu.Lock()
	if !b.running() {
		b.mu.Unlock()
		return
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	b.paused = false
	exited := b.exited
	b.mu.Unlock()
	<-exited
}

// Pause stops the broker's process with SIGSTOP: connections stay open and
// nothing answers, as with a broker stuck in a long GC pause.
func (b *Broker) Pause() error { return b.signal(syscall.SIGSTOP, true) }

// Resume continues a paused broker (SIGCONT).
func (b *Broker) Resume() error { return b.signal(syscall.SIGCONT, false) }

func (b *Broker) signal(sig syscall.Signal, paused bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.running() {
		return errors.New("kafkabroker: broker is not running")
	}
	var err error
	if sig == syscall.SIGSTOP {
		// Return once every thread of the JVM is stopped: kill(2) only
		// queues the signal, and a request sent right after would
		// otherwise still be answered on a busy machine.
		err = spawn.Pause(b.cmd.Process.Pid, true, 10*time.Second)
	} else {
		err = syscall.Kill(-b.cmd.Process.Pid, sig)
	}
	if err == nil || sig == syscall.SIGSTOP {
		b.paused = paused // a SIGSTOP sent is owed a SIGCONT even if the wait failed
	}
	if err != nil {
		return fmt.Errorf("kafkabroker: %v: %w", sig, err)
	}
	return nil
}

// Restart starts a stopped or killed broker again on the same directory and
// ports, and waits until it answers.
func (b *Broker) Restart(ctx context.Context) error {
	if b.Running() {
		return errors.New("kafkabroker: restart of a running broker; Kill or Stop it first")
	}
	return b.start(ctx)
}

// Wait returns a channel closed when the broker process exits.
func (b *Broker) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.exited
}

func (b *Broker) props() map[string]string {
	p := map[string]string{
		"process.roles":                    "broker,controller",
		"node.id":                          strconv.Itoa(b.cfg.nodeID),
		"controller.quorum.voters":         cmp.Or(b.cfg.voters, "1@127.0.0.1:"+strconv.Itoa(b.cfg.ControllerPort)),
		"listeners":                        fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", b.cfg.Port, b.cfg.ControllerPort),
		"advertised.listeners":             "PLAINTEXT://" + b.Addr(),
		"controller.listener.names":        "CONTROLLER",
		"inter.broker.listener.name":       "PLAINTEXT",
		"listener.security.protocol.map":   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs":                         filepath.Join(b.cfg.Dir, "data"),
		"num.partitions":                   "1",
		"auto.create.topics.enable":        "false",
		"offsets.topic.replication.factor": "1",
		// 50 partitions by default: creating them delays the first group
		// join by seconds. Tests and chaos runs use few groups.
		"offsets.topic.num.partitions":                     "4",
		"transaction.state.log.replication.factor":         "1",
		"transaction.state.log.min.isr":                    "1",
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
		"group.initial.rebalance.delay.ms":                 "0",
		// Tests and the chaos run use short session timeouts (down to
		// 500ms) to see a killed member evicted quickly; Kafka's default
		// floor is 6s.
		"group.min.session.timeout.ms":    "500",
		"log.retention.check.interval.ms": "60000",
		// The same floors for KIP-848 groups (worker run
		// --group-protocol consumer), whose session timeout and heartbeat
		// interval are group configs the worker sets; Kafka's floors are
		// 45s and 5s.
		"group.consumer.min.session.timeout.ms":    "500",
		"group.consumer.min.heartbeat.interval.ms": "100",
		// Share groups (worker run --share-group): the protocol listed
		// explicitly; the share-state topic small like the offsets topic;
		// a lock floor of 1s so that a lease TTL of a few seconds can set
		// the group's share.record.lock.duration.ms (the worker sets it to
		// the TTL plus a third; Kafka's floor is 15s).
		"group.coordinator.rebalance.protocols":        "classic,consumer,share,streams",
		"share.coordinator.state.topic.num.partitions": "4",
		"group.share.min.record.lock.duration.ms":      "1000",
		// The share group's session floors, as for the other groups: the
		// worker sets share.session.timeout.ms and
		// share.heartbeat.interval.ms from the lease TTL (a killed member's
		// partitions are fetched by nobody until its session times out;
		// Kafka's floors are 45s and 5s).
		"group.share.min.session.timeout.ms":    "500",
		"group.share.min.heartbeat.interval.ms": "100",
	}
	for k, v := range b.cfg.Props {
		p[k] = v
	}
	return p
}

func (b *Broker) writeConfig() error {
	if err := os.MkdirAll(b.cfg.Dir, 0o750); err != nil {
		return fmt.Errorf("kafkabroker: %w", err)
	}
	p := b.props()
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	buf.WriteString("# Written by internal/kafkabroker.\n")
	for _, k := range keys {
		fmt.Fprintf(&buf, "%s=%s\n", k, p[k])
	}
	if err := os.WriteFile(filepath.Join(b.cfg.Dir, "server.properties"), buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("kafkabroker: %w", err)
	}
	if err := os.WriteFile(filepath.Join(b.cfg.Dir, "log4j2.properties"), []byte(log4jConfig), 0o600); err != nil {
		return fmt.Errorf("kafkabroker: %w", err)
	}
	return nil
}

// format runs the storage tool once for a new data directory.
func (b *Broker) format(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(b.cfg.Dir, "data", "meta.properties")); err == nil {
		return nil
	}
	id := b.cfg.clusterID
	if id == "" {
		out, err := b.tool(ctx, "random-uuid")
		if err != nil {
			return err
		}
		id = strings.TrimSpace(out)
	}
	_, err := b.tool(ctx, "format", "--cluster-id", id, "--config", filepath.Join(b.cfg.Dir, "server.properties"))
	return err
}

func (b *Broker) tool(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, b.java, append(b.jvmArgs("256m"), append([]string{"kafka.tools.StorageTool"}, args...)...)...) //nolint:gosec // java from JAVA_HOME or PATH, our own arguments
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kafkabroker: storage tool %s: %w: %s", args[0], err, tail(errb.String()+out.String(), 2000))
	}
	return out.String(), nil
}

func (b *Broker) jvmArgs(heap string) []string {
	args := []string{
		"-Xms256m", "-Xmx" + heap,
		"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError",
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(b.cfg.Dir, "log4j2.properties"),
	}
	args = append(args, b.cfg.JVMOpts...)
	return append(args, "-cp", filepath.Join(b.cfg.Libs, "*"))
}

func (b *Broker) start(ctx context.Context) error {
	exited, err := b.launch()
	if err != nil {
		return err
	}
	return b.awaitReady(ctx, exited)
}

// launch starts the JVM and returns a channel closed when it exits.
func (b *Broker) launch() (<-chan struct{}, error) {
	logf, err := os.OpenFile(b.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("kafkabroker: %w", err)
	}
	// Not CommandContext: the broker outlives the call that starts it.
	cmd := exec.Command(b.java, append(b.jvmArgs(b.cfg.Heap), "kafka.Kafka", filepath.Join(b.cfg.Dir, "server.properties"))...) //nolint:gosec,noctx // our own java and arguments; lives past ctx
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := spawn.Start(cmd); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("kafkabroker: start java: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = spawn.Wait(cmd)
		_ = logf.Close()
		close(exited)
	}()
	b.mu.Lock()
	b.cmd, b.exited, b.paused = cmd, exited, false
	b.mu.Unlock()
	return exited, nil
}

// awaitReady waits until the launched broker answers, killing it if it
// does not within the start timeout.
func (b *Broker) awaitReady(ctx context.Context, exited <-chan struct{}) error {
	wctx, cancel := context.WithTimeout(ctx, b.cfg.StartTimeout)
	defer cancel()
	if err := b.waitReady(wctx, exited); err != nil {
		b.Kill()
		logTail, _ := os.ReadFile(b.LogPath())
		return fmt.Errorf("kafkabroker: broker on %s did not answer: %w\n%s", b.Addr(), err, tail(string(logTail), 4000))
	}
	return nil
}

// waitReady polls until the broker answers a metadata request that lists
// itself, which Kafka does once it has registered with its controller and
// is not fenced. It asks this broker, not whichever the client learned of.
func (b *Broker) waitReady(ctx context.Context, exited <-chan struct{}) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RetryTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		select {
		case <-exited:
			return errors.New("the broker process exited")
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := cl.SeedBrokers()[0].RetriableRequest(rctx, kmsg.NewPtrMetadataRequest())
		cancel()
		if err == nil && listsNode(resp.(*kmsg.MetadataResponse), b.NodeID()) {
			return nil
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func listsNode(resp *kmsg.MetadataResponse, id int32) bool {
	for _, br := range resp.Brokers {
		if br.NodeID == id {
			return true
		}
	}
	return false
}

func javaPath() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if _, err := os.Stat(p); err == nil { //nolint:gosec // JAVA_HOME is the operator's to set
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", ErrNoJava
	}
	return p, nil
}

func freePort(ctx context.Context) (int, error) {
	p, err := freeport.Port(ctx)
	if err != nil {
		return 0, fmt.Errorf("kafkabroker: %w", err)
	}
	return p, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

const log4jConfig = `# Written by internal/kafkabroker: INFO to stdout (the broker's log file), noisy loggers at WARN.
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
logger.storage.name = org.apache.kafka.storage.internals.log
logger.storage.level = WARN
logger.logmgr.name = kafka.log.LogManager
logger.logmgr.level = WARN
`

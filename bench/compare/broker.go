package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
)

// The embedded Kafka (kfake) runs in a child process of this program, so
// that the worker's CPU figures (getrusage of this process) do not include
// the broker's.
const brokerEnv = "COMPARE_BROKER"

// broker is a running child process serving a kfake cluster with one topic
// of distinct jobs already produced.
type broker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addrs []string
}

// startBroker starts the child: a kfake cluster with topic (partitions
// partitions) holding n jobs of type typ, keys prefix-0 .. prefix-(n-1).
func startBroker(ctx context.Context, topic string, partitions, n int, typ, prefix string) (*broker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe) //nolint:gosec // this program itself
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d,%s,%s", brokerEnv, topic, partitions, n, typ, prefix))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("broker child: %w", err)
	}
	brokerPID.Store(int64(cmd.Process.Pid))
	return &broker{cmd: cmd, stdin: stdin, addrs: strings.Split(strings.TrimSpace(line), ",")}, nil
}

// stop closes the child's stdin, on which it exits.
func (b *broker) stop() {
	brokerPID.Store(0)
	_ = b.stdin.Close()
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
}

// runBroker is the child's main: it serves until its stdin closes.
func runBroker(spec string) error {
	var topic, typ, prefix string
	var partitions, n int
	parts := strings.Split(spec, ",")
	if len(parts) != 5 {
		return errors.New("bad broker spec")
	}
	topic, typ, prefix = parts[0], parts[3], parts[4]
	if _, err := fmt.Sscan(parts[1], &partitions); err != nil {
		return err
	}
	if _, err := fmt.Sscan(parts[2], &n); err != nil {
		return err
	}
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topic, topic+".dlq")) //nolint:gosec // small
	if err != nil {
		return err
	}
	defer kc.Close()
	ctx := context.Background()
	prod, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	if err := produceJobs(ctx, prod, n, typ, prefix); err != nil {
		return err
	}
	prod.Close()
	fmt.Println(strings.Join(kc.ListenAddrs(), ","))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// produceJobs produces n jobs of type typ with keys prefix-0 .. prefix-(n-1)
// through cl's default topic, 10,000 records a synchronous batch.
func produceJobs(ctx context.Context, cl *kgo.Client, n int, typ, prefix string) error {
	const chunk = 10_000
	for i := 0; i < n; i += chunk {
		recs := make([]*kgo.Record, 0, chunk)
		for j := i; j < min(i+chunk, n); j++ {
			r, err := leasehold.KafkaRecord(ctx, leasehold.NewJob{Type: typ, Key: fmt.Sprintf("%s-%d", prefix, j), Payload: []byte(`{}`)})
			if err != nil {
				return err
			}
			recs = append(recs, r)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
	}
	return nil
}

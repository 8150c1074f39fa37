// Command kafka runs Apache Kafka (KRaft) on loopback for development:
// `make kafka`, one node, or `make kafka BROKERS=3`, a cluster of three
// nodes (broker and controller each) whose topics default to replication 3
// and min.insync.replicas 2. It prints the bootstrap address and stops the
// nodes cleanly on Ctrl-C (SIGINT) or SIGTERM.
//
//	go run ./tools/kafka [-brokers 1] [-port 9092] [-dir DIR] [-heap 1g]
//
// The broker's jars come from Maven Central through tools/kafka/pom.xml
// (fetch.sh caches them outside the repository). With -dir the data
// survives a restart; without it a temporary directory is used and removed.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/kafkabroker"
)

func main() {
	port := flag.Int("port", 0, "client port on 127.0.0.1 (0: a free port)")
	dir := flag.String("dir", "", "data directory kept across runs (empty: a temporary one, removed on exit)")
	heap := flag.String("heap", "", "JVM maximum heap (-Xmx) of each node (empty: 1g for one node, 512m each for a cluster)")
	brokers := flag.Int("brokers", 1, "number of nodes, 1 to 9; more than 1 is a cluster on free ports (-port is refused)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "kafka: unexpected argument %q; see -h\n", flag.Arg(0))
		os.Exit(2)
	}
	if *port < 0 || *port > 65535 {
		fmt.Fprintf(os.Stderr, "kafka: -port %d is not a port number (0-65535)\n", *port)
		os.Exit(2)
	}
	if *brokers < 1 || *brokers > 9 || (*brokers > 1 && *port != 0) {
		fmt.Fprintf(os.Stderr, "kafka: -brokers %d: want 1 to 9, and -port only with one\n", *brokers)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Fprintln(os.Stderr, "kafka: starting Apache Kafka (the first run resolves its jars with Maven)...")
	if *brokers > 1 {
		code := runCluster(ctx, *brokers, *dir, *heap)
		stop()
		os.Exit(code) //nolint:gocritic // stop has run
	}
	b, err := kafkabroker.Start(ctx, kafkabroker.Config{Dir: *dir, Port: *port, Heap: cmp.Or(*heap, "1g")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("bootstrap=%s\n", b.Addr())
	fmt.Fprintf(os.Stderr, "kafka: ready; log %s; Ctrl-C stops it\n", b.LogPath())
	select {
	case <-ctx.Done():
	case <-b.Wait():
		fmt.Fprintf(os.Stderr, "kafka: the broker exited on its own; see %s\n", b.LogPath())
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "kafka: stopping")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Stop(sctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// runCluster runs a cluster of n nodes until ctx ends or a node exits, and
// returns the exit code.
func runCluster(ctx context.Context, n int, dir, heap string) int {
	c, err := kafkabroker.StartCluster(ctx, kafkabroker.ClusterConfig{Nodes: n, Dir: dir, Heap: heap})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("bootstrap=%s\n", c.Bootstrap())
	fmt.Fprintf(os.Stderr, "kafka: %d nodes ready; logs %s/node*/broker.log; Ctrl-C stops them\n", n, c.Dir())
	exited := make(chan int32, n)
	for _, b := range c.Nodes() {
		go func() {
			<-b.Wait()
			exited <- b.NodeID()
		}()
	}
	code := 0
	select {
	case <-ctx.Done():
	case id := <-exited:
		fmt.Fprintf(os.Stderr, "kafka: node %d exited on its own; see %s\n", id, c.Node(id).LogPath())
		code = 1
	}
	fmt.Fprintln(os.Stderr, "kafka: stopping")
	// ctx has ended (Ctrl-C): the clean stop gets a minute of its own.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	if err := c.Stop(sctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

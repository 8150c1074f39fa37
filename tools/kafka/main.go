// Command kafka runs a single-node Apache Kafka broker (KRaft) on loopback for
// development: `make kafka`. It prints the bootstrap address and stops the
// broker cleanly on Ctrl-C (SIGINT) or SIGTERM.
//
//	go run ./tools/kafka [-port 9092] [-dir DIR] [-heap 1g]
//
// The broker's jars come from Maven Central through tools/kafka/pom.xml
// (fetch.sh caches them outside the repository). With -dir the data
// survives a restart; without it a temporary directory is used and removed.
package main

import (
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
	heap := flag.String("heap", "1g", "JVM maximum heap (-Xmx)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "kafka: unexpected argument %q; see -h\n", flag.Arg(0))
		os.Exit(2)
	}
	if *port < 0 || *port > 65535 {
		fmt.Fprintf(os.Stderr, "kafka: -port %d is not a port number (0-65535)\n", *port)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Fprintln(os.Stderr, "kafka: starting Apache Kafka (the first run resolves its jars with Maven)...")
	b, err := kafkabroker.Start(ctx, kafkabroker.Config{Dir: *dir, Port: *port, Heap: *heap})
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

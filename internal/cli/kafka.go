package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/leasehold/leasehold/internal/devkafka"
)

// topicSpec is a topic and its partition count.
type topicSpec struct {
	name       string
	partitions int32
}

// parseTopics reads "name[:partitions],..." with def partitions when absent.
func parseTopics(s string, def int32) ([]topicSpec, error) {
	var out []topicSpec
	for _, part := range splitList(s) {
		name, n, hasN := strings.Cut(part, ":")
		spec := topicSpec{name: name, partitions: def}
		if hasN {
			p, err := strconv.ParseInt(n, 10, 32)
			if err != nil || p < 1 || p > 10000 {
				return nil, usagef("topic %q: partitions must be 1 to 10000", part)
			}
			spec.partitions = int32(p)
		}
		if name == "" {
			return nil, usagef("empty topic name in %q", s)
		}
		out = append(out, spec)
	}
	return out, nil
}

// startKfake starts an in-memory Kafka listening on addr ("host:port"; port
// 0 picks a free one) with the given topics and any extra kfake options,
// with devkafka's reaper evicting group members that died mid-join (it logs
// evictions to slog's default logger).
func startKfake(ctx context.Context, addr string, topics []topicSpec, extra ...kfake.Opt) (*devkafka.Cluster, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usagef("listen address %q: %v", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return nil, usagef("listen address %q: bad port", addr)
	}
	if p == 0 {
		l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		p = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	opts := []kfake.Opt{
		kfake.Ports(p),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return (&net.ListenConfig{}).Listen(ctx, network, net.JoinHostPort(host, strconv.Itoa(p)))
		}),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(6),
	}
	for _, t := range topics {
		opts = append(opts, kfake.SeedTopics(t.partitions, t.name))
	}
	opts = append(opts, extra...)
	c, err := devkafka.NewCluster(slog.Default(), 0, opts...) //nolint:contextcheck // the reaper lives until the cluster's Close, not ctx
	if err != nil {
		return nil, fmt.Errorf("start embedded kafka on %s: %w", addr, err)
	}
	return c, nil
}

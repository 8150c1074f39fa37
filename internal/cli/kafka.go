package cli

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/freeport"
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

// embeddedKafka is an in-memory Kafka that a command started.
type embeddedKafka struct {
	addrs []string
	stop  func()
}

// ListenAddrs returns the addresses the Kafka listens on.
func (k *embeddedKafka) ListenAddrs() []string { return k.addrs }

// Close stops the Kafka.
func (k *embeddedKafka) Close() { k.stop() }

// startEmbeddedKafka starts an in-memory Kafka listening on addr ("host:port"; port
// 0 picks a free one) with the given topics, through the program's
// [DevParts.StartKafka]; groupMinSession (optional) is the smallest session
// timeout a group member may ask for. A program without one (a team's
// binary: kfake stays out of it) gets a usage error.
func (a *App) startEmbeddedKafka(ctx context.Context, addr string, topics []topicSpec, groupMinSession ...time.Duration) (*embeddedKafka, error) {
	if a.dev.StartKafka == nil {
		return nil, usagef("this program has no in-memory Kafka: pass --brokers (for development, `worker dev-broker` of cmd/worker runs one)")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usagef("listen address %q: %v", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return nil, usagef("listen address %q: bad port", addr)
	}
	if p == 0 {
		// Below the ephemeral range: an outgoing connection cannot take it
		// before the broker binds it (package freeport).
		if p, err = freeport.Port(ctx); err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
	}
	seed := make(map[string]int32, len(topics))
	for _, t := range topics {
		seed[t.name] = t.partitions
	}
	var minSession time.Duration
	if len(groupMinSession) > 0 {
		minSession = groupMinSession[0]
	}
	addrs, stop, err := a.dev.StartKafka(ctx, host, p, seed, minSession)
	if err != nil {
		return nil, err
	}
	return &embeddedKafka{addrs: addrs, stop: stop}, nil
}

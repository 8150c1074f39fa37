// Package freeport picks TCP ports on 127.0.0.1 for servers that bind them
// later, often in another process: the Kafka brokers, Redis servers and
// proxies the tests, chaos runs and benchmarks start.
//
// Asking the kernel for port 0 and closing the listener is not enough: that
// port comes from the ephemeral range, which the kernel also hands to every
// outgoing connection, so on a busy machine a Kafka or Redis client's
// connection can take it before the server binds it (a Kafka controller then
// fails with "Address already in use"). The ports here come from below the
// ephemeral range, where only listeners live, and a process never hands out
// the same port twice, nor one that another process using this package has
// handed out (a lock file per port, held until that process exits).
package freeport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// floor is the lowest port handed out: clear of the well-known and most
// registered service ports.
const floor = 10000

var (
	mu     sync.Mutex
	given  = map[int]bool{}
	ceilFn = ephemeralLow
)

// ErrNoPort reports that no free port was found.
var ErrNoPort = errors.New("freeport: no free port")

// Port returns a port of 127.0.0.1 that nothing listens on now, below the
// kernel's ephemeral range.
func Port(ctx context.Context) (int, error) { return Pair(ctx, 0) }

// Pair returns a port p such that p and p+off are both free (a Redis Cluster
// node's client and bus ports, off 10000); Pair(0) is Port.
func Pair(ctx context.Context, off int) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	hi := ceilFn() - off // exclusive
	if hi-floor < 100 {
		return kernelPort(ctx, off)
	}
	for range 500 {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		p := floor + rand.IntN(hi-floor) //nolint:gosec // spreading ports, not a secret
		if given[p] || (off > 0 && given[p+off]) || !free(ctx, p) || (off > 0 && !free(ctx, p+off)) {
			continue
		}
		if !reserve(p) || (off > 0 && !reserve(p+off)) {
			// Another process has it (p's reservation, if taken, stays:
			// this process never hands p out again either).
			given[p] = true
			continue
		}
		given[p] = true
		if off > 0 {
			given[p+off] = true
		}
		return p, nil
	}
	return 0, fmt.Errorf("%w in %d..%d", ErrNoPort, floor, hi)
}

// free reports whether p can be bound on 127.0.0.1 now.
func free(ctx context.Context, p int) bool {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// kernelPort is the fallback where the ephemeral range leaves no room below
// it: the kernel's choice, as before.
func kernelPort(ctx context.Context, off int) (int, error) {
	var lc net.ListenConfig
	for range 200 {
		l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("freeport: %w", err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if off == 0 || (p+off <= 65535 && free(ctx, p+off)) {
			return p, nil
		}
	}
	return 0, ErrNoPort
}

// ephemeralLow returns the first port of the kernel's ephemeral range
// (Linux's ip_local_port_range; 32768 where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 0 {
		return 32768
	}
	return lo
}

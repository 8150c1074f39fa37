package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/freeport"
	"github.com/redis/go-redis/v9"
)

// Redis is a redis-server child process with the append-only file on
// (appendfsync everysec), so that a restart keeps the leases, records and
// journals written up to about one second before it.
type Redis struct {
	*Proc
	port int
}

// NewRedis prepares (but does not start) a redis-server that keeps its data
// and its log in dir and listens on 127.0.0.1 at a free port.
func NewRedis(ctx context.Context, binary, dir string) (*Redis, error) {
	port, err := FreePort(ctx)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--appendonly", "yes",
		"--appendfsync", "everysec",
		"--save", "",
		"--daemonize", "no",
		"--maxmemory-policy", "noeviction",
	}
	return &Redis{
		Proc: &Proc{Name: "redis", Path: binary, Args: args, LogPath: filepath.Join(dir, "redis.log")},
		port: port,
	}, nil
}

// Addr returns host:port.
func (r *Redis) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// URL returns the redis:// URL of the server.
func (r *Redis) URL() string { return "redis://" + r.Addr() + "/0" }

// StartReady starts the server and waits until it answers PING and has
// finished loading its append-only file.
func (r *Redis) StartReady(ctx context.Context) error {
	if err := r.Start(); err != nil {
		return err
	}
	return r.WaitReady(ctx)
}

// WaitReady polls PING until it succeeds, the process exits, or ctx ends.
func (r *Redis) WaitReady(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer func() { _ = c.Close() }()
	for {
		if err := c.Ping(ctx).Err(); err == nil {
			return nil
		}
		select {
		case <-r.Done():
			return fmt.Errorf("%w: redis exited: %w", ErrNotReady, r.ExitErr())
		case <-ctx.Done():
			return fmt.Errorf("%w: redis at %s: %w", ErrNotReady, r.Addr(), context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Bounce stops the server (SIGTERM; SIGKILL after grace), keeps it down for
// down, starts it again on the same port with the same data, and returns
// how long clients could not reach it: from the stop request to the first
// successful PING after the restart.
func (r *Redis) Bounce(ctx context.Context, grace, down time.Duration) (time.Duration, error) {
	begin := time.Now()
	if err := r.Stop(grace); err != nil {
		return 0, err
	}
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return time.Since(begin), context.Cause(ctx)
	}
	if err := r.StartReady(ctx); err != nil {
		return time.Since(begin), err
	}
	return time.Since(begin), nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, below
// the kernel's ephemeral range (package freeport says why).
func FreePort(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	p, err := freeport.Port(ctx)
	if err != nil {
		return 0, fmt.Errorf("chaos: %w", err)
	}
	return p, nil
}

package testkit

import (
	"context"
	"crypto/rand"
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

// RedisServer is a redis-server process started for one test, on a free port
// of 127.0.0.1, with its directory in t.TempDir(). By default it persists
// nothing (save "", appendonly no) and refuses to evict (noeviction). The
// test's cleanup kills it.
type RedisServer struct {
	t      testing.TB
	dir    string
	port   int
	extra  []string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

// RedisOption configures [StartRedis].
type RedisOption func(*[]string)

// WithRedisConfig adds lines to the server's configuration file, such as
// "requirepass secret", "appendonly yes" or "maxmemory-policy allkeys-lru".
// Later lines override earlier ones, as in redis.conf.
func WithRedisConfig(lines ...string) RedisOption {
	return func(c *[]string) { *c = append(*c, lines...) }
}

// StartRedis starts a redis-server for the test and waits until it answers.
// It fails the test if redis-server is not on PATH or does not start.
func StartRedis(t testing.TB, opts ...RedisOption) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("testkit: redis-server is not on PATH (install Redis 7): %v", err)
	}
	s := &RedisServer{t: t, dir: t.TempDir()}
	for _, o := range opts {
		o(&s.extra)
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if s.port, err = freePort(); err != nil {
			continue
		}
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("testkit: start redis-server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Addr returns host:port of the server.
func (s *RedisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Dir returns the server's working directory (its dump.rdb, appendonly
// files and log).
func (s *RedisServer) Dir() string { return s.dir }

// Options returns client options for the server with short timeouts, for
// tests that build their own client.
func (s *RedisServer) Options() *redis.Options {
	return &redis.Options{
		Addr:         s.Addr(),
		DialTimeout:  time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		MaxRetries:   -1,
	}
}

// Client returns a client of the server (see Options), closed at the end of
// the test.
func (s *RedisServer) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(s.Options())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *RedisServer) writeConfig() error {
	lines := []string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(s.port),
		"dir " + s.dir,
		"dbfilename dump.rdb",
		"logfile " + filepath.Join(s.dir, "redis.log"),
		`save ""`,
		"appendonly no",
		"maxmemory-policy noeviction",
		"daemonize no",
	}
	lines = append(lines, s.extra...)
	return os.WriteFile(filepath.Join(s.dir, "redis.conf"), []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

// start launches the process and waits for PING.
func (s *RedisServer) start() error {
	if err := s.writeConfig(); err != nil {
		return err
	}
	// Not the test's context: the server outlives it, until Stop or the
	// cleanups.
	cmd := exec.CommandContext(context.Background(), "redis-server", filepath.Join(s.dir, "redis.conf")) //nolint:gosec // the config StartRedis wrote in t.TempDir()
	// If the test binary dies without its cleanups, the kernel kills the
	// server rather than leaving it bound to its port (see package spawn).
	if err := spawn.Start(cmd); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = spawn.Wait(cmd); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.paused = cmd, exited, false
	s.mu.Unlock()

	c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		// A server configured with requirepass or ACL users answers NOAUTH
		// to an anonymous PING: it is up.
		if err == nil || redis.IsAuthError(err) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited: %s", s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("redis-server on %s did not answer: %w: %s", s.Addr(), err, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *RedisServer) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func (s *RedisServer) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		s.t.Fatalf("testkit: redis-server on %s is not running", s.Addr())
	}
	if sig == syscall.SIGSTOP {
		// Return once the server is stopped (kill(2) only queues it).
		if err := spawn.Pause(cmd.Process.Pid, false, 10*time.Second); err != nil {
			s.t.Fatalf("testkit: pause redis-server: %v", err)
		}
		return
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.t.Fatalf("testkit: signal %v to redis-server: %v", sig, err)
	}
}

// Pause stops the process with SIGSTOP: connections stay open, nothing
// answers, as with a frozen VM or a long GC pause.
func (s *RedisServer) Pause() {
	s.signal(syscall.SIGSTOP)
	s.mu.Lock()
	s.paused = true
	s.mu.Unlock()
}

// Resume continues a paused server with SIGCONT.
func (s *RedisServer) Resume() {
	s.signal(syscall.SIGCONT)
	s.mu.Lock()
	s.paused = false
	s.mu.Unlock()
}

// Kill kills the process with SIGKILL and waits for it to exit: data not yet
// persisted is lost.
func (s *RedisServer) Kill() { s.kill() }

func (s *RedisServer) kill() {
	s.mu.Lock()
	cmd, exited, paused := s.cmd, s.exited, s.paused
	s.cmd, s.paused = nil, false
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	<-exited
}

// Stop stops the server (SIGKILL after resuming it if paused); it is safe to
// call more than once and is called at cleanup.
func (s *RedisServer) Stop() { s.kill() }

// Restart stops the server and starts it again on the same port. With
// keepData it first saves a snapshot (SAVE) that the new process loads; without
// it the new process starts empty (snapshot and append-only files are removed),
// like a server that lost its data.
func (s *RedisServer) Restart(keepData bool) {
	s.t.Helper()
	if keepData {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.Save(ctx).Err()
		cancel()
		_ = c.Close()
		if err != nil {
			s.t.Fatalf("testkit: SAVE before restart: %v", err)
		}
	}
	s.kill()
	if !keepData {
		for _, f := range []string{"dump.rdb", "appendonly.aof", "appendonlydir"} {
			if err := os.RemoveAll(filepath.Join(s.dir, f)); err != nil {
				s.t.Fatalf("testkit: remove %s: %v", f, err)
			}
		}
	}
	if err := s.start(); err != nil {
		s.t.Fatalf("testkit: restart redis-server: %v", err)
	}
}

// freePort returns a port of 127.0.0.1 that was free a moment ago, below the
// kernel's ephemeral range (package freeport says why).
func freePort() (int, error) { return freeport.Port(context.Background()) }

// SharedRedis returns a client of the shared Redis (REDIS_URL, default
// redis://127.0.0.1:6379/0) and a fresh random key prefix ("t:<random>:") for
// the test. Keys under the prefix are deleted at cleanup. It fails the test
// if the server does not answer.
func SharedRedis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("testkit: REDIS_URL: %v", err)
	}
	c := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		t.Fatalf("testkit: shared Redis at %s does not answer (start it, or set REDIS_URL): %v", opt.Addr, err)
	}
	prefix := "t:" + strings.ToLower(rand.Text()[:16]) + ":"
	t.Cleanup(func() {
		defer func() { _ = c.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := DeletePrefix(ctx, c, prefix); err != nil {
			t.Errorf("testkit: delete keys %s*: %v", prefix, err)
		}
	})
	return c, prefix
}

// DeletePrefix deletes every key that starts with prefix (SCAN and UNLINK in
// batches; on a Cluster, on every master). prefix must not contain glob
// characters.
func DeletePrefix(ctx context.Context, c redis.UniversalClient, prefix string) error {
	if strings.ContainsAny(prefix, `*?[]\`) {
		return fmt.Errorf("testkit: prefix %q has glob characters", prefix)
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			return deletePrefix(ctx, n, prefix, true)
		})
	}
	return deletePrefix(ctx, c, prefix, false)
}

func deletePrefix(ctx context.Context, c redis.Cmdable, prefix string, oneByOne bool) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return err
		}
		if oneByOne {
			for _, k := range keys {
				if err := c.Unlink(ctx, k).Err(); err != nil {
					return err
				}
			}
		} else if len(keys) > 0 {
			if err := c.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

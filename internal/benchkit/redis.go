package benchkit

import (
	"bytes"
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
	"time"

	"github.com/leasehold/leasehold/internal/freeport"
	"github.com/leasehold/leasehold/internal/spawn"
	"github.com/redis/go-redis/v9"
)

// startAttempts is how many free ports StartRedis tries before it gives up
// on ErrPortTaken.
const startAttempts = 3

// startTimeout bounds how long StartRedis waits for a started server to
// answer.
const startTimeout = 10 * time.Second

// Redis is a private redis-server process started by [StartRedis], on a free
// port of 127.0.0.1, persisting nothing (save "", appendonly no) and refusing
// to evict (noeviction), so that a benchmark neither competes with other
// clients nor loses keys it measures.
type Redis struct {
	addr    string
	dir     string
	ownDir  bool // dir was made by StartRedis and is removed by Stop
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped sync.Once
}

// StartRedis starts a redis-server (which must be on PATH) and waits until it
// answers. The server works in dir (created if missing, kept at Stop); with
// dir "" it works in a fresh temporary directory that Stop removes. If the
// calling process dies, the kernel kills the server (Linux parent-death
// signal). The caller must call Stop.
func StartRedis(dir string) (*Redis, error) {
	ownDir := dir == ""
	if ownDir {
		d, err := os.MkdirTemp("", "lh-bench-redis-")
		if err != nil {
			return nil, err
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	var err error
	for range startAttempts {
		var port int
		if port, err = freePort(); err != nil {
			break
		}
		var r *Redis
		if r, err = startOn(dir, port); err == nil {
			r.ownDir = ownDir
			return r, nil
		}
		if !errors.Is(err, ErrPortTaken) && !errors.Is(err, ErrExited) {
			break
		}
	}
	if ownDir {
		_ = os.RemoveAll(dir)
	}
	return nil, err
}

// RedisAddr returns addr when it is set (a -addr flag), or else the address
// of a private redis-server started for the caller (StartRedis); stop ends
// that server and does nothing for addr.
func RedisAddr(addr string) (_ string, stop func(), _ error) {
	if addr != "" {
		return addr, func() {}, nil
	}
	srv, err := StartRedis("")
	if err != nil {
		return "", nil, fmt.Errorf("start redis-server: %w", err)
	}
	return srv.Addr(), srv.Stop, nil
}

// startOn starts a redis-server in dir on port and waits until it answers.
// It checks that the process answering is the one it started.
func startOn(dir string, port int) (*Redis, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	//nolint:gosec,noctx // a private server in the caller's directory, living until Stop
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "",
		"--appendonly", "no", "--maxmemory-policy", "noeviction", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"))
	// Errors met before the log file is open (a bad argument) go to stderr.
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := spawn.Start(cmd); err != nil {
		return nil, fmt.Errorf("start redis-server (is it on PATH?): %w", err)
	}
	r := &Redis{addr: addr, dir: dir, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = spawn.Wait(cmd); close(r.exited) }()

	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	pid := "process_id:" + strconv.Itoa(cmd.Process.Pid) + "\r\n"
	for deadline := time.Now().Add(startTimeout); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			if strings.Contains(info, pid) {
				return r, nil
			}
			r.kill()
			return nil, fmt.Errorf("%w: %s", ErrPortTaken, addr)
		}
		select {
		case <-r.exited:
			out := strings.TrimSpace(stderr.String() + "\n" + logTail(dir))
			return nil, fmt.Errorf("%w on %s: %s", ErrExited, addr, out)
		default:
		}
		if time.Now().After(deadline) {
			r.kill()
			return nil, fmt.Errorf("redis-server on %s did not answer within %v: %w", addr, startTimeout, err)
		}
	}
}

// Addr returns the server's host:port.
func (r *Redis) Addr() string { return r.addr }

// Dir returns the server's working directory (its log, redis.log).
func (r *Redis) Dir() string { return r.dir }

// Stop kills the server, waits for it to exit and, if StartRedis made its
// directory, removes it. It is safe to call more than once.
func (r *Redis) Stop() {
	r.stopped.Do(func() {
		r.kill()
		if r.ownDir {
			_ = os.RemoveAll(r.dir)
		}
	})
}

func (r *Redis) kill() {
	_ = r.cmd.Process.Kill()
	<-r.exited
}

// freePort returns a port of 127.0.0.1 that was free a moment ago, below the
// kernel's ephemeral range (package freeport says why).
func freePort() (int, error) { return freeport.Port(context.Background()) }

// logTail returns the last 2,000 bytes of the server's log in dir.
func logTail(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "redis.log")) //nolint:gosec // the log of the server this package started in dir
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

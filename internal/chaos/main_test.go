package chaos

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// childEnv makes the test binary act as a supervised child process: it
// prints "ready", then appends a tick to the file named by childTickEnv
// every 5ms, and exits 0 on SIGTERM (or 3 if childIgnoreTermEnv is set and
// it must be killed).
const (
	childEnv           = "CHAOS_TEST_CHILD"
	childTickEnv       = "CHAOS_TEST_TICKS"
	childIgnoreTermEnv = "CHAOS_TEST_IGNORE_TERM"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		runChild()
		return
	}
	// The harness's client sees the scheduled Redis restart; keep
	// go-redis's dial errors out of the test output.
	redis.SetLogger(quietRedis{})
	goleak.VerifyTestMain(m)
}

func runChild() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	f, err := os.OpenFile(os.Getenv(childTickEnv), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	t := time.NewTicker(5 * time.Millisecond)
	for {
		select {
		case <-sig:
			if os.Getenv(childIgnoreTermEnv) == "1" {
				continue
			}
			fmt.Println("terminated")
			os.Exit(0)
		case <-t.C:
			_, _ = fmt.Fprintln(f, time.Now().UnixNano())
		}
	}
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

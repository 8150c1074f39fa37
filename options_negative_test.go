package leasehold

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestNewRefusesNegativeOptions: a default replaces only 0, so New refuses
// a negative number or duration, with an error naming the option, instead
// of running with it (WithMaxPayload(-1) dead-letters every record,
// WithShutdownTimeout(-1s) cancels every job at once, negative backoffs
// retry in a busy loop).
func TestNewRefusesNegativeOptions(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	cases := []struct {
		name string
		opt  Opt
	}{
		{"WithConcurrency", WithConcurrency(-1)},
		{"WithCommitInterval", WithCommitInterval(-time.Second)},
		{"WithShutdownTimeout", WithShutdownTimeout(-time.Second)},
		{"WithLeaseTTL", WithLeaseTTL(-time.Second)},
		{"WithRetention", WithRetention(-time.Hour)},
		{"WithHeartbeatThrottle", WithHeartbeatThrottle(-time.Second)},
		{"WithMaxPayload", WithMaxPayload(-1)},
		{"WithHeldBackoff", WithHeldBackoff(-time.Second, -time.Second)},
		{"WithHeldBackoff", WithHeldBackoff(time.Millisecond, -time.Second)},
		{"WithRedisProbe", WithRedisProbe(-time.Second, -time.Second)},
		{"WithRedisProbe", WithRedisProbe(-time.Second, time.Second)},
	}
	for _, tc := range cases {
		_, err := New(rdb, tc.opt)
		if err == nil {
			t.Errorf("New accepted a negative %s", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.name+"(") {
			t.Errorf("New refused a negative %s with %q, which does not name it", tc.name, err)
		}
	}
	// 0 still means the default.
	w, err := New(rdb, WithMaxPayload(0), WithShutdownTimeout(0), WithHeldBackoff(0, 0), WithRedisProbe(0, 0),
		WithHeartbeatThrottle(0), WithCommitInterval(0))
	must(t, err)
	if w.cfg.maxPayload != DefaultMaxPayload || w.cfg.shutdownTimeout != DefaultShutdownTimeout {
		t.Errorf("0 did not mean the default: max payload %d, shutdown timeout %s", w.cfg.maxPayload, w.cfg.shutdownTimeout)
	}
}

// TestRegisterRefusesNegativeJobOptions: Register refuses a negative
// backoff (a busy retry loop) or timeout, naming the option.
func TestRegisterRefusesNegativeJobOptions(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	w, err := New(rdb)
	must(t, err)
	h := func(context.Context, *Job) ([]byte, error) { return nil, nil }
	cases := []struct {
		name string
		opt  JobOpt
	}{
		{"WithBackoff", WithBackoff(-time.Second, -time.Second)},
		{"WithBackoff", WithBackoff(time.Second, -time.Second)},
		{"WithTimeout", WithTimeout(-time.Second)},
	}
	for i, tc := range cases {
		err := w.Register("test.neg"+string(rune('a'+i)), h, tc.opt)
		if err == nil {
			t.Errorf("Register accepted a negative %s", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.name+"(") {
			t.Errorf("Register refused a negative %s with %q, which does not name it", tc.name, err)
		}
	}
}

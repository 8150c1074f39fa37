package leasehold

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestSessionTimeoutFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ ttl, session, hb time.Duration }{
		{DefaultLeaseTTL, 7500 * time.Millisecond, 2500 * time.Millisecond},
		{2 * time.Second, 6 * time.Second, 2 * time.Second},   // Kafka's floor
		{30 * time.Second, 15 * time.Second, 3 * time.Second}, // franz-go's heartbeat
		{5 * time.Minute, 45 * time.Second, 3 * time.Second},  // franz-go's session
	} {
		if got := SessionTimeoutFor(tc.ttl); got != tc.session {
			t.Errorf("SessionTimeoutFor(%v) = %v, want %v", tc.ttl, got, tc.session)
		}
		if got := HeartbeatIntervalFor(tc.session); got != tc.hb {
			t.Errorf("HeartbeatIntervalFor(%v) = %v, want %v", tc.session, got, tc.hb)
		}
	}
}

// TestGroupTimeouts: the worker's Kafka client gets the session timeout and
// heartbeat interval derived from its shortest lease TTL unless WithKafka sets
// them; one set longer than the lease TTL is warned about; a heartbeat not
// below the session is refused. Nothing here touches the network.
func TestGroupTimeouts(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, *Job) ([]byte, error) { return nil, nil }
	for _, tc := range []struct {
		name        string
		opts        []Opt
		jobTTL      time.Duration
		session, hb time.Duration
		warn        bool
		err         string
	}{
		{name: "defaults", session: 7500 * time.Millisecond, hb: 2500 * time.Millisecond},
		{name: "a job type's shorter TTL", jobTTL: 8 * time.Second, session: 6 * time.Second, hb: 2 * time.Second},
		{name: "a longer TTL", opts: []Opt{WithLeaseTTL(time.Minute)}, session: 30 * time.Second, hb: 3 * time.Second},
		{name: "session set, heartbeat derived from it", opts: []Opt{WithKafka(kgo.SessionTimeout(45 * time.Second))},
			session: 45 * time.Second, hb: 3 * time.Second, warn: true},
		{name: "short session set", opts: []Opt{WithKafka(kgo.SessionTimeout(1500 * time.Millisecond))},
			session: 1500 * time.Millisecond, hb: 500 * time.Millisecond},
		{name: "both set", opts: []Opt{WithKafka(kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second))},
			session: 10 * time.Second, hb: time.Second},
		{name: "heartbeat set", opts: []Opt{WithKafka(kgo.HeartbeatInterval(time.Second))},
			session: 7500 * time.Millisecond, hb: time.Second},
		{name: "heartbeat not below the session", opts: []Opt{WithKafka(kgo.HeartbeatInterval(8 * time.Second))},
			err: "heartbeat interval 8s is"}, // franz-go's words or ours
		{name: "heartbeat equal to the session", opts: []Opt{WithKafka(kgo.HeartbeatInterval(7500 * time.Millisecond))},
			err: "heartbeat interval 7.5s is not below the session timeout 7.5s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
			t.Cleanup(func() { _ = rdb.Close() })
			w, err := New(rdb, append([]Opt{WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			var jopts []JobOpt
			if tc.jobTTL > 0 {
				jopts = append(jopts, WithJobLeaseTTL(tc.jobTTL))
			}
			if err := w.Register("t.noop", noop, jopts...); err != nil {
				t.Fatal(err)
			}
			kopts, _, _, err := w.groupTimeouts(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, w.cfg.kafkaOpts...))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(kopts...)
			if err != nil {
				t.Fatal(err)
			}
			session, hb := cl.OptValue(kgo.SessionTimeout), cl.OptValue(kgo.HeartbeatInterval)
			cl.Close()
			if session != tc.session || hb != tc.hb {
				t.Errorf("session %v heartbeat %v, want %v and %v", session, hb, tc.session, tc.hb)
			}
			if warned := strings.Contains(logs.String(), "level=WARN msg=\"kafka session timeout is longer than the lease TTL"); warned != tc.warn {
				t.Errorf("warned %v, want %v; logs:\n%s", warned, tc.warn, logs.String())
			}
		})
	}
}

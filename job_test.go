package leasehold

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestHeartbeatThrottleRidesRenewRounds: with a throttle longer than the
// renew interval, details held back by the throttle wait on no timer of the
// job's own; the renewer's rounds store them once the throttle has passed.
func TestHeartbeatThrottleRidesRenewRounds(t *testing.T) {
	h := setup(t, 1)
	const throttle = 1200 * time.Millisecond
	type seen struct {
		first         time.Time // before the first Heartbeat
		timer, queued bool
	}
	ran := make(chan seen, 1)
	release := make(chan struct{})
	reg := func(w *Worker) {
		must(t, w.Register("test.hb", func(ctx context.Context, j *Job) ([]byte, error) {
			s := seen{first: time.Now()}
			for _, d := range []string{"1", "2"} { // "2" is held back by the throttle
				if err := j.Heartbeat(ctx, []byte(d)); err != nil {
					return nil, err
				}
			}
			j.hb.mu.Lock()
			s.timer, s.queued = j.hb.timer != nil, j.hb.queued
			j.hb.mu.Unlock()
			ran <- s
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, nil
		}))
	}
	w := h.start(t, h.rdb, reg, WithLeaseTTL(900*time.Millisecond), WithHeartbeatThrottle(throttle)) // renew interval 300 ms
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.hb", Key: "hb-rounds"})})
	var s seen
	select {
	case s = <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not run")
	}
	defer close(release)
	if s.timer || !s.queued {
		t.Fatalf("held-back details: timer %v, waiting for a renew round %v; want no timer, waiting", s.timer, s.queued)
	}
	ctx := context.Background()
	testkit.Eventually(t, 20*time.Second, "the held-back details stored", func() bool {
		ki, err := w.Inspect(ctx, "hb-rounds")
		return err == nil && string(ki.Details) == "2"
	})
	if took := time.Since(s.first); took < throttle {
		t.Errorf("held-back details stored %v after the first, within the throttle %v", took, throttle)
	}
}

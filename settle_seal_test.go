package leasehold

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testkit"
)

// failSeals is a go-redis hook that, while armed, fails the saga journal's
// seal script before it is sent, as an unreachable Redis would, up to left
// times.
type failSeals struct {
	left   atomic.Int32
	failed atomic.Int32
}

func (h *failSeals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *failSeals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.fail(cmd) {
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (h *failSeals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if h.fail(cmd) {
				return cmd.Err()
			}
		}
		return next(ctx, cmds)
	}
}

func (h *failSeals) fail(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 || !strings.EqualFold(fmt.Sprint(args[0]), "evalsha") || fmt.Sprint(args[1]) != scripts.CompSeal.Hash() {
		return false
	}
	if h.left.Add(-1) < 0 {
		return false
	}
	h.failed.Add(1)
	cmd.SetErr(&net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connection refused")})
	return true
}

// TestSealRetriedWhileRedisUnreachable: Redis does not answer when a job that
// ran a saga step seals its journal before the commit. The seal is retried
// like the commit (while the lease holds) instead of failing the job: the job
// completes once, its step stands, and nothing is compensated.
func TestSealRetriedWhileRedisUnreachable(t *testing.T) {
	h := setup(t, 1)
	led, reg := refundLedger()
	hook := &failSeals{}
	hook.left.Store(3)
	rdb := redis.NewClient(h.rdb.(*redis.Client).Options())
	rdb.AddHook(hook)
	t.Cleanup(func() { _ = rdb.Close() })

	var compensated atomic.Int32
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		err := j.Step(ctx, "charge", func(context.Context) error { led.charge(j.Key); return nil },
			"test.refund", refundArgs{Key: j.Key})
		return []byte("ok"), err
	}
	w := h.start(t, rdb, func(w *Worker) { must(t, w.Register("test.seal", handler)) },
		WithCompensation(reg), WithHooks(Hooks{
			OnCompensated: func(context.Context, *Job, error) { compensated.Add(1) },
		}))
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.seal", Key: "seal-unreachable"})})
	h.waitCommitted(t, 30*time.Second)
	testkit.Eventually(t, 10*time.Second, "the job is settled", func() bool { return w.Stats().Succeeded > 0 })

	if n := hook.failed.Load(); n != 3 {
		t.Fatalf("%d seals failed, want 3: the test did not exercise the outage", n)
	}
	s := w.Stats()
	if s.Succeeded != 1 || s.Failed != 0 || s.LeasesLost != 0 {
		t.Errorf("succeeded %d, failed %d, leases lost %d; want 1, 0, 0", s.Succeeded, s.Failed, s.LeasesLost)
	}
	if charged, refunded := led.net("seal-unreachable"); charged != 1 || refunded != 0 {
		t.Errorf("%d charges, %d refunds; want 1 and 0", charged, refunded)
	}
	if n := compensated.Load(); n != 0 {
		t.Errorf("%d compensations, want none", n)
	}
}

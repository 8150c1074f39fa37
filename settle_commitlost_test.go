package leasehold

import (
	"context"
	"crypto/sha1" //nolint:gosec // names a script the way Redis does (EVALSHA), not a secret
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testkit"
)

// loseCompleteAnswers is a go-redis hook that, while armed, lets the complete
// scripts run on the server and then loses their answers, as a connection cut
// right after the write (or a Redis restart after it) would.
type loseCompleteAnswers struct {
	armed   atomic.Bool
	dropped atomic.Int32
}

func (h *loseCompleteAnswers) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *loseCompleteAnswers) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		return h.lose([]redis.Cmder{cmd}, err)
	}
}

func (h *loseCompleteAnswers) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		return h.lose(cmds, err)
	}
}

// lose replaces the answers of the complete scripts among cmds, which have
// run, with a read timeout.
func (h *loseCompleteAnswers) lose(cmds []redis.Cmder, err error) error {
	if !h.armed.Load() {
		return err
	}
	for _, cmd := range cmds {
		if isCompleteScript(cmd) {
			lost := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
			cmd.SetErr(lost)
			err = lost
			h.dropped.Add(1)
		}
	}
	return err
}

func isCompleteScript(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	sha := fmt.Sprint(args[1])
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "evalsha":
	case "eval":
		sum := sha1.Sum([]byte(sha)) //nolint:gosec // see the import
		sha = hex.EncodeToString(sum[:])
	default:
		return false
	}
	return sha == scripts.IdemComplete.Hash() || sha == scripts.IdemCompleteBatch.Hash()
}

// TestCommitAnswerLost: a job's complete script writes its record (and, in
// the same step, deletes its lease key), but every answer of it is lost, so
// the worker sees the lease reported lost after its commit. The record says
// the commit landed under the job's fence: the job counts as completed, its
// saga step stands (no refund), and its offset is committed.
func TestCommitAnswerLost(t *testing.T) {
	h := setup(t, 1)
	led, reg := refundLedger()
	hook := &loseCompleteAnswers{}
	rdb := redis.NewClient(h.rdb.(*redis.Client).Options())
	rdb.AddHook(hook)
	t.Cleanup(func() { _ = rdb.Close() })

	var lostHooks, compensated atomic.Int32
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		err := j.Step(ctx, "charge", func(context.Context) error { led.charge(j.Key); return nil },
			"test.refund", refundArgs{Key: j.Key})
		hook.armed.Store(true) // from here on, the commit's answers are lost
		return []byte("ok"), err
	}
	w := h.start(t, rdb, func(w *Worker) { must(t, w.Register("test.lost-answer", handler)) },
		WithCompensation(reg, compensation.WithSweepInterval(200*time.Millisecond)), WithLeaseTTL(time.Second),
		WithHooks(Hooks{
			OnLeaseLost:   func(context.Context, *Job, error) { lostHooks.Add(1) },
			OnCompensated: func(context.Context, *Job, error) { compensated.Add(1) },
		}))
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.lost-answer", Key: "answer-lost"})})

	testkit.Eventually(t, 30*time.Second, "the job is settled", func() bool {
		s := w.Stats()
		return s.Succeeded+s.LeasesLost > 0
	})
	hook.armed.Store(false)
	h.waitCommitted(t, 20*time.Second)
	// A sweep pass now: a journal left behind (its lease is gone with the
	// commit) would be compensated by it.
	rs := w.store.(*redisStore)
	if rep, err := rs.comp.Sweep(t.Context()); err != nil || rep.Compensated != 0 || rep.Failed != 0 {
		t.Fatalf("sweep after the commit: %+v, %v; want nothing compensated", rep, err)
	}

	if hook.dropped.Load() == 0 {
		t.Fatal("no answer of the complete script was lost: the test did not exercise the loss")
	}
	info, err := rs.s.Lookup(context.Background(), "answer-lost")
	if err != nil {
		t.Fatal(err)
	}
	if info.State != idempotency.Completed {
		t.Fatalf("record state %s, want COMPLETED", info.State)
	}
	s := w.Stats()
	if s.Succeeded != 1 || s.LeasesLost != 0 {
		t.Errorf("succeeded %d, leases lost %d; want 1 and 0", s.Succeeded, s.LeasesLost)
	}
	if charged, refunded := led.net("answer-lost"); charged != 1 || refunded != 0 {
		t.Errorf("%d charges, %d refunds; want 1 and 0 (the commit landed)", charged, refunded)
	}
	if n, m := lostHooks.Load(), compensated.Load(); n != 0 || m != 0 {
		t.Errorf("lease-lost hooks %d, compensations %d; want none", n, m)
	}
}

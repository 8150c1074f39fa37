package idempotency

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// afterScript is a go-redis hook that, while armed, lets the named scripts
// run on the server and then loses their answers (a read timeout, as a cut
// connection right after the write gives) or delays them by delay.
type afterScript struct {
	scripts []*redis.Script
	armed   atomic.Bool
	delay   time.Duration
}

func (h *afterScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *afterScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.after([]redis.Cmder{cmd}, next(ctx, cmd))
	}
}

func (h *afterScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.after(cmds, next(ctx, cmds))
	}
}

func (h *afterScript) after(cmds []redis.Cmder, err error) error {
	if !h.armed.Load() {
		return err
	}
	for _, cmd := range cmds {
		args := cmd.Args()
		if len(args) < 2 || !strings.EqualFold(fmt.Sprint(args[0]), "evalsha") {
			continue
		}
		for _, s := range h.scripts {
			if fmt.Sprint(args[1]) != s.Hash() {
				continue
			}
			if h.delay > 0 {
				time.Sleep(h.delay)
				return err
			}
			lost := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
			cmd.SetErr(lost)
			err = lost
		}
	}
	return err
}

// withAfter returns an env whose Store talks to the shared Redis through h.
func withAfter(t *testing.T, h *afterScript, leaseOpts ...lease.Opt) *env {
	t.Helper()
	c, prefix := testkit.SharedRedis(t)
	c.AddHook(h)
	return setupOn(t, c, prefix, nil, leaseOpts...)
}

// Complete's answers after a first send whose answer was lost say what
// happened (issue 13): the resend answers nil when the first send stored the
// same result, even once the lease has ended locally (the renewer found its
// key gone: the script deleted it); a *CommittedError with the stored result
// when another result was sent; ErrRefused when Redis refuses a write that
// nothing of the caller's fence backs.
func TestCompleteAnswersAfterLostReply(t *testing.T) {
	t.Parallel()
	h := &afterScript{scripts: []*redis.Script{scripts.IdemComplete, scripts.IdemCompleteBatch}}
	e := withAfter(t, h, lease.WithTTL(time.Second), lease.WithRenewInterval(100*time.Millisecond))
	ctx := t.Context()

	t.Run("same result after the lease ended locally", func(t *testing.T) {
		c := e.claim(t, "same", fp("a"), Acquired) //nolint:contextcheck // claims under the test's context
		h.armed.Store(true)
		err := e.s.Complete(ctx, c, []byte("r"))
		h.armed.Store(false)
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Complete with its answer lost = %v, want ErrOutcomeUnknown", err)
		}
		select {
		case <-c.Lease.Done():
		case <-time.After(3 * time.Second):
			t.Fatal("the lease whose key the script deleted did not end")
		}
		if err := e.s.Complete(ctx, c, []byte("r")); err != nil {
			t.Fatalf("resend of a Complete that landed = %v, want nil", err)
		}
	})
	t.Run("another result", func(t *testing.T) {
		c := e.claim(t, "other", fp("a"), Acquired) //nolint:contextcheck // claims under the test's context
		h.armed.Store(true)
		_ = e.s.Complete(ctx, c, []byte("first"))
		h.armed.Store(false)
		err := e.s.Complete(ctx, c, []byte("second"))
		var ce *CommittedError
		if !errors.As(err, &ce) || !errors.Is(err, ErrAlreadyCommitted) || string(ce.Record.Result) != "first" ||
			ce.Record.Fence != c.Fence {
			t.Fatalf("Complete with another result over a landed one = %v, want a *CommittedError holding %q", err, "first")
		}
		if d := e.claim(t, "other", fp("a"), Duplicate); string(d.Record.Result) != "first" { //nolint:contextcheck // claims under the test's context
			t.Fatalf("stored result %q, want %q", d.Record.Result, "first")
		}
	})
	t.Run("refused", func(t *testing.T) {
		// Renewals far apart: one between the delete and the Complete would
		// end the lease locally first (ErrGivenUp, nothing sent), which a
		// loaded machine made happen with the 100 ms renewals above.
		e := withAfter(t, &afterScript{}, lease.WithTTL(20*time.Second), lease.WithRenewInterval(15*time.Second)) //nolint:contextcheck // the env lives for the test, not for its context
		c := e.claim(t, "refused", fp("a"), Acquired)                                                             //nolint:contextcheck // claims under the test's context
		must(t, e.c.Del(ctx, e.m.Key(e.s.LeaseName("refused"))).Err())                                            // expired in Redis
		err := e.s.Complete(ctx, c, []byte("r"))
		if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrGivenUp) {
			t.Fatalf("Complete without the lease = %v, want ErrRefused", err)
		}
	})
}

// A Complete whose lease ended locally before anything was sent (Redis
// paused past the local deadline) is answered ErrGivenUp: nothing was sent,
// and Redis, asked once it answers, holds no outcome of the fence.
func TestCompleteGivenUpLocally(t *testing.T) {
	t.Parallel()
	srv := testkit.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	e := setupOn(t, c, "g:", nil, lease.WithTTL(time.Second), lease.WithRenewInterval(100*time.Millisecond))
	cl := e.claim(t, "k", fp("a"), Acquired)
	srv.Pause()
	select {
	case <-cl.Lease.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lease did not end at its local deadline")
	}
	srv.Resume()
	err := e.s.Complete(t.Context(), cl, []byte("r"))
	if !errors.Is(err, ErrGivenUp) || !errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrRefused) {
		t.Fatalf("Complete after the local deadline = %v, want ErrGivenUp", err)
	}
	if info, _ := e.s.Lookup(t.Context(), "k"); info.State == Completed {
		t.Fatal("a given-up Complete wrote its result")
	}
}

// A claim whose answer arrives after the lease's local deadline is answered
// ErrGivenUp, without a lease, and the key it was granted is free again (the
// answer came after the local deadline, 2s - 800ms drift, but before the
// lease expired in Redis, so the Store gave it back).
func TestClaimAnsweredTooLate(t *testing.T) {
	t.Parallel()
	h := &afterScript{scripts: []*redis.Script{scripts.IdemClaim}, delay: 1500 * time.Millisecond}
	e := withAfter(t, h, lease.WithTTL(2*time.Second), lease.WithDrift(800*time.Millisecond))
	h.armed.Store(true)
	c, err := e.s.Claim(t.Context(), "late", fp("a"))
	h.armed.Store(false)
	if !errors.Is(err, ErrGivenUp) || c.Outcome != 0 || c.Lease != nil {
		t.Fatalf("claim answered too late = %v, %v; want ErrGivenUp and no lease", c.Outcome, err)
	}
	if !strings.Contains(err.Error(), "given back") {
		t.Errorf("claim answered too late = %v; want it to say the key was given back", err)
	}
	e.claim(t, "late", fp("a"), Acquired)
}

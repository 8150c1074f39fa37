package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testkit"
)

// cmdHook is a go-redis hook that shows every command a client sends, alone
// or in a pipeline, to its function before sending it.
type cmdHook func(cmd redis.Cmder)

func (h cmdHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h cmdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h(cmd); return next(ctx, cmd) }
}

func (h cmdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h(cmd)
		}
		return next(ctx, cmds)
	}
}

// argsHook keeps the printed arguments of every claim and completion script
// call, as a hook that prints commands (redisotel's db.statement) sees them
// (added to a client as cmdHook(h.keep)).
type argsHook struct {
	mu    sync.Mutex
	calls [][]string
}

func (h *argsHook) keep(cmd redis.Cmder) {
	a := cmd.Args()
	if len(a) < 3 || fmt.Sprint(a[0]) != "evalsha" {
		return
	}
	switch fmt.Sprint(a[1]) {
	case scripts.IdemClaim.Hash(), scripts.IdemCompleteBatch.Hash():
	default:
		return
	}
	out := make([]string, len(a))
	for i, v := range a {
		out[i] = fmt.Sprint(v)
	}
	h.mu.Lock()
	h.calls = append(h.calls, out)
	h.mu.Unlock()
}

// The claim and completion calls pass a claim's keys and arguments by
// reference (scriptCall, strArg): a hook that prints a command must still
// read the key names and values, not pointers, and the scripts must get the
// values (the claims and completions below work end to end). A first
// attempt goes in short calls (its lease key and buckets); a retry in full
// ones, which pass the details and history keys as well.
func TestScriptCallArgsPrintAsValues(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	h := &argsHook{}
	c.AddHook(cmdHook(h.keep))
	e := setupOn(t, c, prefix, nil)
	cl := e.claim(t, "printed-key", fp("a"), Acquired)
	if err := e.s.Complete(t.Context(), cl, []byte("r")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	e.claim(t, "printed-key", fp("a"), Duplicate)
	cl = e.claim(t, "printed-retry", fp("a"), Acquired)
	if err := e.s.Fail(t.Context(), cl, Retryable, errors.New("once more")); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	cl = e.claim(t, "printed-retry", fp("a"), Acquired)
	if err := e.s.Complete(t.Context(), cl, []byte("r")); err != nil {
		t.Fatalf("Complete of the retry: %v", err)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	full := 0
	for _, args := range h.calls {
		joined := strings.Join(args, " ")
		if !strings.Contains(joined, e.m.Key(e.s.LeaseName("printed-key"))) &&
			!strings.Contains(joined, e.m.Key(e.s.LeaseName("printed-retry"))) {
			t.Errorf("script call printed as %q: no lease key in it", joined)
		}
		if strings.Contains(joined, prefix+"idem:d:"+e.s.Tag("printed-retry")+":printed-retry") &&
			strings.Contains(joined, prefix+"idem:h:"+e.s.Tag("printed-retry")+":printed-retry") {
			full++
		}
		if strings.Contains(joined, "0xc") || strings.Contains(joined, "{0x") {
			t.Errorf("script call printed with a pointer: %q", joined)
		}
	}
	// The first attempts: claim, completion and the duplicate's claim (3
	// short calls), the first claim of the retry key; its retry: a short
	// claim, then a full one and a full completion.
	if len(h.calls) != 7 || full != 2 {
		t.Errorf("saw %d claim/complete script calls, %d of them full; want 7 and 2", len(h.calls), full)
	}
}

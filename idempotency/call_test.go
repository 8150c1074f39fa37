package idempotency

import (
	"context"
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
// values (the claim and completion below work end to end).
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

	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.calls) < 2 {
		t.Fatalf("saw %d claim/complete script calls, want at least 2", len(h.calls))
	}
	for _, args := range h.calls {
		joined := strings.Join(args, " ")
		for _, want := range []string{
			e.m.Key(e.s.LeaseName("printed-key")),
			prefix + "idem:d:" + e.s.Tag("printed-key") + ":printed-key",
			prefix + "idem:h:" + e.s.Tag("printed-key") + ":printed-key",
		} {
			if !strings.Contains(joined, want) {
				t.Errorf("script call printed as %q: no %q in it", joined, want)
			}
		}
		if strings.Contains(joined, "0xc") || strings.Contains(joined, "{0x") {
			t.Errorf("script call printed with a pointer: %q", joined)
		}
	}
}

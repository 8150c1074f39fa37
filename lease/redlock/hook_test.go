package redlock_test

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// countHook counts the scripts (EVAL, EVALSHA) a client sends, alone or in
// pipelines; connection set-up commands are not counted.
type countHook struct {
	mu                   sync.Mutex
	pipes, piped, single int
}

func (h *countHook) reset() {
	h.mu.Lock()
	h.pipes, h.piped, h.single = 0, 0, 0
	h.mu.Unlock()
}

func (h *countHook) get() (pipes, piped, single int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pipes, h.piped, h.single
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			h.mu.Lock()
			h.single++
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if isScript(c) {
				n++
			}
		}
		if n > 0 {
			h.mu.Lock()
			h.pipes++
			h.piped += n
			h.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

func isScript(c redis.Cmder) bool { n := c.Name(); return n == "evalsha" || n == "eval" }

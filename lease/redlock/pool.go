package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/scripts"
)

// master is one independent Redis master, seen by redsync as a Pool. It is
// redsync's go-redis v9 adapter with two changes: SetNX (redsync's per-master
// acquisition) runs redlock_acquire.lua, which also enforces the restart
// quarantine, and Eval (redsync's extend and unlock scripts) goes through a
// batcher that sends concurrent calls in one pipeline.
type master struct {
	idx   int
	addr  string
	c     redis.UniversalClient
	base  rsredis.Pool
	batch *pipeBatcher
	epoch string                                // the epoch key
	quar  func(ttl time.Duration) time.Duration // quarantine for a lock TTL; 0 = off
}

func newMaster(idx int, c redis.UniversalClient, conf *cfg) *master {
	addr := ""
	if cl, ok := c.(*redis.Client); ok {
		addr = cl.Options().Addr
	}
	m := &master{
		idx:   idx,
		addr:  addr,
		c:     c,
		base:  goredis.NewPool(c),
		batch: &pipeBatcher{c: c, linger: conf.linger, max: conf.maxBatch},
		epoch: conf.prefix + "redlock:epoch",
	}
	m.quar = func(ttl time.Duration) time.Duration {
		if conf.quarantine < 0 {
			return 0
		}
		return max(conf.quarantine, ttl)
	}
	return m
}

// wrap attaches the master's identity to an error.
func (m *master) wrap(err error) error {
	if err == nil {
		return nil
	}
	return &MasterError{Master: m.idx, Addr: m.addr, Err: err}
}

// Get implements redsync's Pool.
func (m *master) Get(ctx context.Context) (rsredis.Conn, error) { //nolint:contextcheck // redsync may pass a nil context
	if ctx == nil {
		ctx = context.Background()
	}
	conn, err := m.base.Get(ctx)
	if err != nil {
		return nil, err
	}
	return &masterConn{Conn: conn, m: m, ctx: ctx}, nil
}

type masterConn struct {
	rsredis.Conn
	m   *master
	ctx context.Context
}

// SetNX is redsync's acquisition on one master: redlock_acquire.lua, which
// refuses while the master is quarantined.
func (c *masterConn) SetNX(name, value string, expiry time.Duration) (bool, error) {
	res, err := scripts.RedlockAcquire.Run(c.ctx, c.m.c, []string{name, c.m.epoch},
		value, max(1, expiry.Milliseconds()), c.m.quar(expiry).Milliseconds()).Int64Slice()
	if err != nil {
		return false, err
	}
	if len(res) != 2 {
		return false, fmt.Errorf("redlock_acquire.lua: unexpected reply %v", res)
	}
	switch res[0] {
	case scripts.RedlockLocked:
		return true, nil
	case scripts.RedlockTaken:
		return false, nil
	case scripts.RedlockQuarantined:
		return false, &quarantineError{left: time.Duration(res[1]) * time.Millisecond}
	default:
		return false, fmt.Errorf("redlock_acquire.lua: unexpected status %d", res[0])
	}
}

// Eval runs one of redsync's scripts (extend, unlock) through the batcher.
func (c *masterConn) Eval(script *rsredis.Script, keysAndArgs ...any) (any, error) {
	keys := make([]string, script.KeyCount)
	for i := range script.KeyCount {
		keys[i], _ = keysAndArgs[i].(string)
	}
	return c.m.batch.eval(c.ctx, script, keys, keysAndArgs[script.KeyCount:])
}

// pipeBatcher sends concurrent script calls to one master in pipelines. The
// first call of a batch waits while others keep joining (see gather), then
// sends the batch and hands each caller its reply. A renewal round of
// many leases, whose extends redsync issues concurrently, thus costs one
// round trip per master and batch rather than one per lease.
type pipeBatcher struct {
	c      redis.UniversalClient
	linger time.Duration
	max    int

	mu  sync.Mutex
	cur *pipeBatch
}

type pipeBatch struct {
	calls []*evalCall
	full  chan struct{}
}

type evalCall struct {
	ctx    context.Context
	script *rsredis.Script
	keys   []string
	args   []any
	res    any
	err    error
	done   chan struct{}
}

// defaultCallTimeout bounds a pipeline whose callers set no deadline.
const defaultCallTimeout = 5 * time.Second

func (b *pipeBatcher) eval(ctx context.Context, s *rsredis.Script, keys []string, args []any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &evalCall{ctx: ctx, script: s, keys: keys, args: args, done: make(chan struct{})}
	b.mu.Lock()
	bt, leader := b.cur, false
	if bt == nil {
		bt, leader = &pipeBatch{full: make(chan struct{})}, true
		b.cur = bt
	}
	bt.calls = append(bt.calls, c)
	if len(bt.calls) >= b.max {
		b.cur = nil
		close(bt.full)
	}
	b.mu.Unlock()

	if leader {
		b.gather(bt)
		b.mu.Lock()
		if b.cur == bt {
			b.cur = nil
		}
		calls := bt.calls // no call joins bt after it is detached
		b.mu.Unlock()
		// Sent from its own goroutine, so that the leader, like every other
		// caller, stops waiting when its own context ends.
		go b.exec(calls) //nolint:contextcheck,gosec // a pipeline serves many callers; exec bounds it by their deadlines
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// gather waits while calls keep joining bt: until bt is full, no call has
// joined for a linger, or ten lingers have passed since the first call.
func (b *pipeBatcher) gather(bt *pipeBatch) {
	t := time.NewTimer(b.linger)
	defer t.Stop()
	until := time.Now().Add(10 * b.linger)
	last := 1
	for {
		select {
		case <-bt.full:
			return
		case <-t.C:
		}
		b.mu.Lock()
		n := len(bt.calls)
		b.mu.Unlock()
		if n == last || !time.Now().Before(until) {
			return
		}
		last = n
		t.Reset(b.linger)
	}
}

// exec sends calls in one pipeline, bounded by the latest of their
// deadlines, and loads scripts the master does not know (NOSCRIPT) before
// sending those calls again.
func (b *pipeBatcher) exec(calls []*evalCall) {
	deadline := time.Time{}
	for _, c := range calls {
		d, ok := c.ctx.Deadline()
		if !ok {
			d = time.Now().Add(defaultCallTimeout)
		}
		if d.After(deadline) {
			deadline = d
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	pending := calls
	for attempt := 0; attempt < 2 && len(pending) > 0; attempt++ {
		pipe := b.c.Pipeline()
		cmds := make([]*redis.Cmd, len(pending))
		for i, c := range pending {
			cmds[i] = pipe.EvalSha(ctx, c.script.Hash, c.keys, c.args...)
		}
		_, _ = pipe.Exec(ctx)
		var again []*evalCall
		loaded := map[*rsredis.Script]bool{}
		for i, c := range pending {
			res, err := cmds[i].Result()
			if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0 {
				if !loaded[c.script] {
					loaded[c.script] = true
					_ = b.c.ScriptLoad(ctx, c.script.Src).Err()
				}
				again = append(again, c)
				continue
			}
			if errors.Is(err, redis.Nil) {
				err = nil
			}
			c.res, c.err = res, err
			close(c.done)
		}
		pending = again
	}
}

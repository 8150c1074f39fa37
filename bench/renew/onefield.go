package main

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/benchkit"
)

//go:embed renew_onefield.lua
var onefieldSrc string

var onefieldScript = redis.NewScript(onefieldSrc)

// onefield is the prototype renewal of renew_onefield.lua on n keys of its
// own under prefix, each holding own = "token:fence".
type onefield struct {
	keys, owns []string
}

// newOnefield writes the prototype's n lease keys.
func newOnefield(ctx context.Context, c *redis.Client, prefix string, n int, ttl time.Duration) (*onefield, error) {
	o := &onefield{keys: make([]string, n), owns: make([]string, n)}
	for i := range n {
		o.keys[i] = prefix + "proto:{" + strconv.Itoa(i) + "}"
		o.owns[i] = fmt.Sprintf("tok%016x:%d", i, i+1)
	}
	err := benchkit.Parallel(n/1000+1, 4, func(b int) error {
		pipe := c.Pipeline()
		for i := b * 1000; i < min((b+1)*1000, n); i++ {
			pipe.HSet(ctx, o.keys[i], "own", o.owns[i])
			pipe.PExpire(ctx, o.keys[i], ttl)
		}
		_, err := pipe.Exec(ctx)
		return err
	})
	if err == nil {
		err = onefieldScript.Load(ctx, c).Err()
	}
	return o, err
}

// round renews every key once: batch keys a pipeline, 256 keys a script
// call (as the Manager's), parallel pipelines in flight.
func (o *onefield) round(ctx context.Context, c *redis.Client, ttl time.Duration, batch, parallel int) error {
	const perCall = 256
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for start := 0; start < len(o.keys); start += batch {
		end := min(start+batch, len(o.keys))
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := o.pipeline(ctx, c, start, end, perCall, ttl)
			if err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

func (o *onefield) pipeline(ctx context.Context, c *redis.Client, start, end, perCall int, ttl time.Duration) error {
	pipe := c.Pipeline()
	var cmds []*redis.Cmd
	for s := start; s < end; s += perCall {
		e := min(s+perCall, end)
		args := make([]any, 0, e-s+1)
		args = append(args, ttl.Milliseconds())
		for i := s; i < e; i++ {
			args = append(args, o.owns[i])
		}
		cmds = append(cmds, onefieldScript.EvalSha(ctx, pipe, o.keys[s:e], args...))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	for _, cmd := range cmds {
		codes, err := cmd.Int64Slice()
		if err != nil {
			return err
		}
		for _, code := range codes {
			if code != 1 {
				return fmt.Errorf("prototype renewal answered %d", code)
			}
		}
	}
	return nil
}

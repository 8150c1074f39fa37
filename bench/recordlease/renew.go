package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/benchkit"
)

var (
	//go:embed renew_record.lua
	renewRecordSrc string

	renewRecord = redis.NewScript(renewRecordSrc)
)

// renewal is one way of extending every held lease once, measured in Redis
// main-thread CPU a round.
type renewal struct {
	name  string
	round func(ctx context.Context, c *redis.Client) error
	cpu   []float64 // milliseconds a round
}

// renewalBatch and renewalParallel: commands (or entries) a pipeline or
// script call, and calls in flight; the same for every way.
const (
	renewalBatch    = 256
	renewalParallel = 4
)

// measureRenewals holds n leases each way (the shipped scripts' lease keys,
// the prototype's records), then renews all of them once a round, each way
// in turn, rounds times: a pipelined PEXPIRE of the lease keys (the floor),
// the renewer's GETEX key PX ttl a lease key, and renew_record.lua on the
// prototype's records. Every renewal must find its lease held.
func measureRenewals(ctx context.Context, c *redis.Client, n, rounds int) ([]*renewal, error) {
	const ttl = 5 * time.Minute
	keyed, recorded := make([]*job, n), make([]*job, n)
	shipped, proto := newVariants()[0], newVariants()[1]
	for i := range n {
		keyed[i] = newJob("renew-"+uuid.NewString(), ttl)
		recorded[i] = newJob("renew-"+uuid.NewString(), ttl)
	}
	for _, h := range []struct {
		v    *variant
		jobs []*job
	}{{shipped, keyed}, {proto, recorded}} {
		for start := 0; start < n; start += renewalBatch {
			part := h.jobs[start:min(start+renewalBatch, n)]
			codes, err := h.v.claim(ctx, c, part)
			if err != nil {
				return nil, fmt.Errorf("%s: hold: %w", h.v.name, err)
			}
			if err := allDone(h.v.name+": hold", part, codes); err != nil {
				return nil, err
			}
		}
	}
	ways := []*renewal{
		{name: "pexpire", round: func(ctx context.Context, c *redis.Client) error {
			return pipelined(ctx, c, keyed, func(p redis.Pipeliner, j *job) redis.Cmder {
				return p.PExpire(ctx, j.leaseKey(), ttl)
			}, func(j *job, cmd redis.Cmder) bool { ok, err := cmd.(*redis.BoolCmd).Result(); return err == nil && ok })
		}},
		{name: "getex", round: func(ctx context.Context, c *redis.Client) error {
			ms := strconv.FormatInt(ttl.Milliseconds(), 10)
			return pipelined(ctx, c, keyed, func(p redis.Pipeliner, j *job) redis.Cmder {
				return p.Do(ctx, "getex", j.leaseKey(), "px", ms) // as the renewer sends it
			}, func(j *job, cmd redis.Cmder) bool {
				v, err := cmd.(*redis.Cmd).Text()
				return err == nil && strings.HasPrefix(v, j.token+" "+strconv.FormatInt(j.fence, 10)+" ")
			})
		}},
		{name: "record", round: func(ctx context.Context, c *redis.Client) error {
			return benchkit.Parallel((n+renewalBatch-1)/renewalBatch, renewalParallel, func(b int) error {
				part := recorded[b*renewalBatch : min((b+1)*renewalBatch, n)]
				keys := make([]string, len(part))
				args := make([]any, 0, 4*len(part))
				for i, j := range part {
					keys[i] = j.bucket(j.window)
					args = append(args, j.field, j.token, strconv.FormatInt(j.fence, 10), ttl.Milliseconds())
				}
				codes, err := renewRecord.Run(ctx, c, keys, args...).Int64Slice()
				if err != nil {
					return err
				}
				return allDone("record renewal of", part, codes)
			})
		}},
	}
	for r := range rounds {
		for i := range ways {
			w := ways[(i+r)%len(ways)]
			cpu0, err := benchkit.RedisMainCPU(ctx, c)
			if err != nil {
				return nil, err
			}
			if err := w.round(ctx, c); err != nil {
				return nil, fmt.Errorf("%s renewal: %w", w.name, err)
			}
			cpu1, err := benchkit.RedisMainCPU(ctx, c)
			if err != nil {
				return nil, err
			}
			w.cpu = append(w.cpu, (cpu1-cpu0)*1e3)
		}
	}
	return ways, nil
}

// pipelined sends one command a job, renewalBatch a pipeline, renewalParallel
// pipelines in flight, and fails unless ok accepts every answer.
func pipelined(ctx context.Context, c *redis.Client, jobs []*job, send func(redis.Pipeliner, *job) redis.Cmder,
	ok func(*job, redis.Cmder) bool) error {
	return benchkit.Parallel((len(jobs)+renewalBatch-1)/renewalBatch, renewalParallel, func(b int) error {
		part := jobs[b*renewalBatch : min((b+1)*renewalBatch, len(jobs))]
		pipe := c.Pipeline()
		cmds := make([]redis.Cmder, len(part))
		for i, j := range part {
			cmds[i] = send(pipe, j)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		for i, cmd := range cmds {
			if !ok(part[i], cmd) {
				err := cmd.Err()
				if err == nil {
					err = errors.New("another holder or none")
				}
				return fmt.Errorf("%s: lease %s not renewed: %w", cmd.Name(), part[i].key, err)
			}
		}
		return nil
	})
}

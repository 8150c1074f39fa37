package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/benchkit"
)

// side is what one round of one system cost: its wall time, the time Redis
// spent in its commands (INFO commandstats usec: for EVALSHA the whole
// script, the commands it calls included), the Redis main thread's CPU and
// this process's CPU over the round's window.
type side struct {
	wall, redisCmd, redisCPU, clientCPU time.Duration
	calls                               int64         // top-level commands (EVALSHA, or GETEX and any PEXPIRE) in the window
	read, pexpire                       time.Duration // commandstats usec of GETEX and GET, and of PEXPIRE (for a script: the calls it made)
}

// sideBySide alternates the Manager's renew rounds with pipelined PEXPIRE
// rounds of the same keys (batch keys a pipeline, parallel pipelines in
// flight: the Manager's shape), on the same Redis, rounds times each: after
// each renew round ends, one PEXPIRE round runs before the next renew round
// (an interval later) starts. It returns the rounds of each side.
func sideBySide(ctx context.Context, c *redis.Client, rt *benchkit.RoundTimer, keys []string, ttl time.Duration,
	batch, parallel, rounds int, proto *onefield,
) (lh, px, pr []side, err error) {
	for range rounds {
		// A renew round: the window runs from the end of the previous
		// PEXPIRE round to the end of the next renew round; the renewer is
		// idle in between, so what Redis and this process spend in it is
		// the round's.
		s0, err := snap(ctx, c)
		if err != nil {
			return nil, nil, nil, err
		}
		n := rt.Rounds()
		for rt.Rounds() == n {
			time.Sleep(time.Millisecond)
		}
		s1, err := snap(ctx, c)
		if err != nil {
			return nil, nil, nil, err
		}
		d := rt.Durations()
		l := s0.toRenewal(s1)
		l.wall = d[len(d)-1]
		lh = append(lh, l)

		start := time.Now()
		if err := pexpireRound(ctx, c, keys, ttl, batch, parallel); err != nil {
			return nil, nil, nil, err
		}
		wall := time.Since(start)
		s2, err := snap(ctx, c)
		if err != nil {
			return nil, nil, nil, err
		}
		p := s1.to(s2, "pexpire")
		p.wall = wall
		px = append(px, p)

		if proto == nil {
			continue
		}
		start = time.Now()
		if err := proto.round(ctx, c, ttl, batch, parallel); err != nil {
			return nil, nil, nil, err
		}
		wall = time.Since(start)
		s3, err := snap(ctx, c)
		if err != nil {
			return nil, nil, nil, err
		}
		q := s2.to(s3, "evalsha")
		q.wall = wall
		pr = append(pr, q)
	}
	return lh, px, pr, nil
}

// pexpireRound extends every key by ttl with PEXPIRE, batch keys a pipeline,
// parallel pipelines in flight.
func pexpireRound(ctx context.Context, c *redis.Client, keys []string, ttl time.Duration, batch, parallel int) error {
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for start := 0; start < len(keys); start += batch {
		part := keys[start:min(start+batch, len(keys))]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			pipe := c.Pipeline()
			cmds := make([]*redis.BoolCmd, len(part))
			for i, k := range part {
				cmds[i] = pipe.PExpire(ctx, k, ttl)
			}
			_, err := pipe.Exec(ctx)
			for i, cmd := range cmds {
				if ok, cerr := cmd.Result(); err == nil && (cerr != nil || !ok) {
					err = fmt.Errorf("PEXPIRE %s: %v, %w", part[i], ok, cerr)
				}
			}
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

// reading is one reading of Redis's commandstats and CPU and of this
// process's CPU.
type reading struct {
	stats     map[string][2]int64 // command -> calls, usec
	redisCPU  float64             // seconds, main thread
	clientCPU time.Duration
}

func snap(ctx context.Context, c *redis.Client) (reading, error) {
	r := reading{clientCPU: procCPU()}
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return r, err
	}
	r.stats = make(map[string][2]int64)
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(k, "cmdstat_") {
			continue
		}
		var st [2]int64
		for f := range strings.SplitSeq(v, ",") {
			if n, ok := strings.CutPrefix(f, "calls="); ok {
				st[0], _ = strconv.ParseInt(n, 10, 64)
			}
			if n, ok := strings.CutPrefix(f, "usec="); ok {
				st[1], _ = strconv.ParseInt(n, 10, 64)
			}
		}
		r.stats[strings.TrimPrefix(k, "cmdstat_")] = st
	}
	r.redisCPU, err = benchkit.RedisMainCPU(ctx, c)
	return r, err
}

// to returns what happened between r and e, counting cmd's calls and time.
func (r reading) to(e reading, cmd string) side {
	usec := func(c string) time.Duration { return time.Duration(e.stats[c][1]-r.stats[c][1]) * time.Microsecond }
	return side{
		redisCmd:  usec(cmd),
		read:      usec("getex") + usec("get"),
		pexpire:   usec("pexpire"),
		calls:     e.stats[cmd][0] - r.stats[cmd][0],
		redisCPU:  time.Duration((e.redisCPU - r.redisCPU) * float64(time.Second)),
		clientCPU: e.clientCPU - r.clientCPU,
	}
}

// toRenewal is [reading.to] for a renewer round, which runs either the renew
// script (EVALSHA; the GET and PEXPIRE it calls are counted inside it) or
// the plain command (GETEX, and a PEXPIRE for a lease another owner holds;
// no script).
func (r reading) toRenewal(e reading) side {
	s := r.to(e, "evalsha")
	if s.calls == 0 {
		s.redisCmd = s.read + s.pexpire
		s.calls = e.stats["getex"][0] - r.stats["getex"][0] + e.stats["pexpire"][0] - r.stats["pexpire"][0]
	}
	return s
}

func procCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// medianOf returns the median of one field over the rounds.
func medianOf(ss []side, f func(side) time.Duration) time.Duration {
	ds := make([]time.Duration, len(ss))
	for i, s := range ss {
		ds[i] = f(s)
	}
	return benchkit.Median(ds)
}

// printSides writes the side-by-side figures: medians, the spread of the
// wall times, and where each side's time goes.
func printSides(fig *benchkit.Figures, lh, px, pr []side) {
	wall := func(s side) time.Duration { return s.wall }
	lw, pw := medianOf(lh, wall), medianOf(px, wall)
	fig.Millis("renew_10k_leasehold_ms", lw)
	fig.Millis("renew_10k_pexpire_pipelined_ms", pw)
	fig.Float("renew_10k_leasehold_vs_pexpire", float64(lw)/float64(pw), 2, "x")
	lo, hi := spreadOf(lh)
	fig.Millis("renew_10k_leasehold_min_ms", lo)
	fig.Millis("renew_10k_leasehold_max_ms", hi)
	lo, hi = spreadOf(px)
	fig.Millis("renew_10k_pexpire_pipelined_min_ms", lo)
	fig.Millis("renew_10k_pexpire_pipelined_max_ms", hi)
	for _, s := range []struct {
		name string
		ss   []side
	}{{"leasehold", lh}, {"pexpire_pipelined", px}} {
		fig.Millis("renew_10k_"+s.name+"_redis_cmd_ms", medianOf(s.ss, func(x side) time.Duration { return x.redisCmd }))
		fig.Millis("renew_10k_"+s.name+"_redis_cpu_ms", medianOf(s.ss, func(x side) time.Duration { return x.redisCPU }))
		fig.Millis("renew_10k_"+s.name+"_client_cpu_ms", medianOf(s.ss, func(x side) time.Duration { return x.clientCPU }))
		fig.Float("renew_10k_"+s.name+"_calls", float64(s.ss[len(s.ss)/2].calls), 0, "calls")
	}
	// Where the renewer's Redis time goes: its reads (GETEX on the plain
	// command's path; the renew script's GET) and PEXPIREs (the script's;
	// on the plain path only for leases another owner holds); the rest is
	// the script's own (EVALSHA parsing 30,000 arguments, Lua, converting
	// replies), zero on the plain path.
	fig.Millis("renew_10k_leasehold_read_ms", medianOf(lh, func(x side) time.Duration { return x.read }))
	fig.Millis("renew_10k_leasehold_pexpire_ms", medianOf(lh, func(x side) time.Duration { return x.pexpire }))
	fig.Millis("renew_10k_leasehold_script_own_ms", medianOf(lh, func(x side) time.Duration { return x.redisCmd - x.read - x.pexpire }))
	if len(pr) == 0 {
		return
	}
	// The prototype of renew_onefield.lua (-prototype), on keys of its own.
	ow := medianOf(pr, func(x side) time.Duration { return x.wall })
	fig.Millis("renew_10k_onefield_prototype_ms", ow)
	fig.Float("renew_10k_onefield_prototype_vs_pexpire", float64(ow)/float64(pw), 2, "x")
	fig.Millis("renew_10k_onefield_prototype_redis_cmd_ms", medianOf(pr, func(x side) time.Duration { return x.redisCmd }))
	fig.Millis("renew_10k_onefield_prototype_redis_cpu_ms", medianOf(pr, func(x side) time.Duration { return x.redisCPU }))
}

func spreadOf(ss []side) (lo, hi time.Duration) {
	lo, hi = ss[0].wall, ss[0].wall
	for _, s := range ss[1:] {
		lo, hi = min(lo, s.wall), max(hi, s.wall)
	}
	return lo, hi
}

// startProfile starts a CPU profile into file (none when file is "") and
// returns the function that stops it.
func startProfile(file string) (func(), error) {
	if file == "" {
		return func() {}, nil
	}
	f, err := os.Create(file) //nolint:gosec // a path the user gave
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

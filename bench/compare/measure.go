package main

import (
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// sample is one reading of the clocks a figure is computed from: wall time,
// this process's CPU time (user + system, every thread), the Redis server's
// CPU time (used_cpu_user + used_cpu_sys from INFO cpu), the broker child's
// CPU time (when one runs: brokerPID) and the heap allocations this process
// has made.
type sample struct {
	wall   time.Time
	proc   time.Duration
	redis  time.Duration
	child  time.Duration
	allocs uint64
}

// window is what happened between two samples.
type window struct {
	wall, proc, redis, child time.Duration
	allocs                   uint64
}

// brokerPID is the process ID of the running broker child (0: none), whose
// CPU a sample reads.
var brokerPID atomic.Int64

func take(ctx context.Context, rdb *redis.Client) (sample, error) {
	s := sample{wall: time.Now(), proc: procCPU(), child: childCPU(int(brokerPID.Load())), allocs: heapAllocs()}
	var err error
	if rdb != nil {
		s.redis, err = redisCPU(ctx, rdb)
	}
	return s, err
}

func (s sample) to(e sample) window {
	return window{wall: e.wall.Sub(s.wall), proc: e.proc - s.proc, redis: e.redis - s.redis, child: e.child - s.child,
		allocs: e.allocs - s.allocs}
}

// heapAllocs returns the heap allocations this process has made so far
// (tiny objects, under 16 bytes and pointer-free, count once per shared
// 16-byte block).
func heapAllocs() uint64 {
	m := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return m[0].Value.Uint64()
}

// perJob returns the CPU of the process and of Redis per job, in µs.
func (w window) perJob(n int) (proc, redis float64) {
	return float64(w.proc.Microseconds()) / float64(n), float64(w.redis.Microseconds()) / float64(n)
}

// pct returns the CPU of the process and of Redis in percent of one core.
func (w window) pct() (proc, redis float64) {
	return 100 * w.proc.Seconds() / w.wall.Seconds(), 100 * w.redis.Seconds() / w.wall.Seconds()
}

// childCPU returns the CPU time (user + system) process pid has used, from
// /proc/<pid>/stat (clock ticks of 10 ms); 0 for pid 0 or where it cannot
// be read.
func childCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces, in parentheses):
	// state is the 3rd field, utime the 14th, stime the 15th.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func procCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU reads the server's CPU time (main thread and the rest of the
// process) from INFO cpu.
func redisCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	found := 0
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
		}
		total += f
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("INFO cpu: used_cpu_sys or used_cpu_user missing")
	}
	return time.Duration(total * float64(time.Second)), nil
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct {
	calls int64
	usec  int64 // time spent in the command (for EVALSHA: the whole script, the commands it calls included)
}

// commandStats returns INFO commandstats by command, for the lines printed
// with -commandstats.
func commandStats(ctx context.Context, rdb *redis.Client) (map[string]cmdStat, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]cmdStat)
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(k, "cmdstat_") {
			continue
		}
		var st cmdStat
		for f := range strings.SplitSeq(v, ",") {
			if n, ok := strings.CutPrefix(f, "calls="); ok {
				st.calls, _ = strconv.ParseInt(n, 10, 64)
			}
			if n, ok := strings.CutPrefix(f, "usec="); ok {
				st.usec, _ = strconv.ParseInt(n, 10, 64)
			}
		}
		out[strings.TrimPrefix(k, "cmdstat_")] = st
	}
	return out, nil
}

// steady waits until done() reaches from, takes a sample, waits until it
// reaches to, takes another, and returns the window between them, so that
// start-up (group joins, connection pools, script loads) and warm-up stay
// out of the figures.
func steady(ctx context.Context, rdb *redis.Client, done func() int64, from, to int64, limit time.Duration) (window, error) {
	deadline := time.Now().Add(limit)
	wait := func(n int64) error {
		for done() < n {
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d jobs done after %s", done(), to, limit)
			}
			time.Sleep(2 * time.Millisecond)
		}
		return nil
	}
	if err := wait(from); err != nil {
		return window{}, err
	}
	s, err := take(ctx, rdb)
	if err != nil {
		return window{}, err
	}
	if err := wait(to); err != nil {
		return window{}, err
	}
	e, err := take(ctx, rdb)
	return s.to(e), err
}

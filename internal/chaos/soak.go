package chaos

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sample is one reading of the resources a soak watches. The worker
// figures are the largest over the workers running at the time.
type Sample struct {
	At              time.Time
	WorkerRSS       int64 // bytes, VmRSS of the largest worker
	WorkerGoroutine int64 // go_goroutines of the busiest worker
	RedisUsedMemory int64 // INFO memory used_memory, bytes
	RedisKeys       int64 // DBSIZE
	Transfers       int64 // jobs whose fenced transfer is in PostgreSQL so far
}

// SoakBound is the flatness rule of a soak: once the warm-up (the workers'
// retention and one record window after the first sample) is over, the
// largest value of each resource in the last quarter of the samples may
// exceed the largest of the first quarter by at most Ratio times it plus
// the absolute slack of the resource.
var SoakBound = struct {
	Ratio                             float64
	RSS, Goroutines, UsedMemory, Keys int64
}{Ratio: 0.25, RSS: 16 << 20, Goroutines: 50, UsedMemory: 4 << 20, Keys: 500}

// SoakFigures are a soak's resource figures: each resource's largest value
// in the first and in the last quarter of the samples after the warm-up.
type SoakFigures struct {
	Samples                         int
	RSSFirst, RSSLast               int64
	GoroutinesFirst, GoroutinesLast int64
	UsedMemoryFirst, UsedMemoryLast int64
	KeysFirst, KeysLast             int64
	// JobsPerSecondFirst and JobsPerSecondLast are the rates at which
	// transfers reached PostgreSQL over the first and the last quarter.
	JobsPerSecondFirst, JobsPerSecondLast float64
	Growing                               []string // the resources beyond SoakBound, and a stalled throughput
}

// sampler reads the workers' RSS and goroutines and Redis's memory and key
// count every interval.
type sampler struct {
	run   *run
	rdb   *redis.Client
	every time.Duration
	http  *http.Client

	mu      sync.Mutex
	samples []Sample
}

func (s *sampler) loop(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		smp, ok := s.sample(ctx)
		if ok {
			s.mu.Lock()
			s.samples = append(s.samples, smp)
			s.mu.Unlock()
			s.run.log.Info("soak sample", slog.Int64("worker_rss_kb", smp.WorkerRSS>>10),
				slog.Int64("worker_goroutines", smp.WorkerGoroutine), slog.Int64("redis_used_memory", smp.RedisUsedMemory),
				slog.Int64("redis_keys", smp.RedisKeys))
		}
	}
}

// sample reads every resource once; it reports false when Redis did not
// answer (a restart): a sample without Redis's figures would read as a drop.
func (s *sampler) sample(ctx context.Context) (Sample, bool) {
	smp := Sample{At: time.Now()}
	s.run.mu.Lock()
	type target struct {
		pid     int
		metrics string
	}
	var ts []target
	for _, w := range s.run.workers {
		if pid := w.Pid(); pid != 0 && !w.Paused() && !s.run.removed[w] {
			ts = append(ts, target{pid, s.run.metrics[w]})
		}
	}
	s.run.mu.Unlock()
	for _, t := range ts {
		if rss, err := readRSS(t.pid); err == nil {
			smp.WorkerRSS = max(smp.WorkerRSS, rss)
		}
		if g, err := s.goroutines(ctx, t.metrics); err == nil {
			smp.WorkerGoroutine = max(smp.WorkerGoroutine, g)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := s.rdb.InfoMap(rctx, "memory").Result()
	if err != nil {
		return smp, false
	}
	used, err := strconv.ParseInt(info["Memory"]["used_memory"], 10, 64)
	if err != nil {
		return smp, false
	}
	keys, err := s.rdb.DBSize(rctx).Result()
	if err != nil {
		return smp, false
	}
	smp.RedisUsedMemory, smp.RedisKeys = used, keys
	if err := s.run.db.QueryRow(rctx, `SELECT count(*) FROM demo_transfers`).Scan(&smp.Transfers); err != nil {
		return smp, false
	}
	return smp, true
}

// readRSS returns the resident set size of process pid (VmRSS).
func readRSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("chaos: no VmRSS for pid %d", pid)
}

// goroutines reads go_goroutines from a worker's /metrics.
func (s *sampler) goroutines(ctx context.Context, url string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err
		}
	}
	return 0, fmt.Errorf("chaos: no go_goroutines at %s", url)
}

func (s *sampler) all() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...)
}

// Flatness compares the samples taken after warmup: the largest value of
// each resource in the first quarter against the last quarter (see
// [SoakBound]), and the rate at which jobs finished, which must not fall
// below half. It needs at least eight samples after the warm-up.
func Flatness(samples []Sample, warmup time.Duration) (SoakFigures, error) {
	if len(samples) == 0 {
		return SoakFigures{}, fmt.Errorf("%w: the soak took no sample", ErrConfig)
	}
	start := samples[0].At.Add(warmup)
	var after []Sample
	for _, s := range samples {
		if !s.At.Before(start) {
			after = append(after, s)
		}
	}
	if len(after) < 8 {
		return SoakFigures{Samples: len(after)}, fmt.Errorf("%w: %d samples after the %s warm-up, want at least 8: soak longer or sample more often",
			ErrConfig, len(after), warmup)
	}
	q := len(after) / 4
	first, last := after[:q], after[len(after)-q:]
	peak := func(ss []Sample, get func(Sample) int64) int64 {
		var m int64
		for _, s := range ss {
			m = max(m, get(s))
		}
		return m
	}
	f := SoakFigures{Samples: len(after)}
	for _, r := range []struct {
		name        string
		get         func(Sample) int64
		slack       int64
		first, last *int64
	}{
		{"worker_rss", func(s Sample) int64 { return s.WorkerRSS }, SoakBound.RSS, &f.RSSFirst, &f.RSSLast},
		{"worker_goroutines", func(s Sample) int64 { return s.WorkerGoroutine }, SoakBound.Goroutines, &f.GoroutinesFirst, &f.GoroutinesLast},
		{"redis_used_memory", func(s Sample) int64 { return s.RedisUsedMemory }, SoakBound.UsedMemory, &f.UsedMemoryFirst, &f.UsedMemoryLast},
		{"redis_keys", func(s Sample) int64 { return s.RedisKeys }, SoakBound.Keys, &f.KeysFirst, &f.KeysLast},
	} {
		*r.first, *r.last = peak(first, r.get), peak(last, r.get)
		if float64(*r.last) > float64(*r.first)*(1+SoakBound.Ratio)+float64(r.slack) {
			f.Growing = append(f.Growing, fmt.Sprintf("%s %d -> %d", r.name, *r.first, *r.last))
		}
	}
	// Flat resources mean nothing if the work stopped: the jobs keep
	// arriving at the same rate, so the last quarter must finish them at
	// least half as fast as the first.
	f.JobsPerSecondFirst, f.JobsPerSecondLast = jobRates(after, q)
	if f.JobsPerSecondLast < f.JobsPerSecondFirst/2 {
		f.Growing = append(f.Growing, fmt.Sprintf("jobs_per_s %.1f -> %.1f (stalled)", f.JobsPerSecondFirst, f.JobsPerSecondLast))
	}
	return f, nil
}

// rateSpan is the least time the soak's job rates are measured over.
const rateSpan = 20 * time.Second

// jobRates returns the rates at which jobs finished over the first and the
// last q samples, widened to rateSpan at least: a short soak's quarter can be
// one sample interval, which the schedule's stacked faults (every worker
// killed or removed in the same seconds) slow by half alone.
func jobRates(after []Sample, q int) (first, last float64) {
	n := q
	for n < len(after)/2 && (after[n-1].At.Sub(after[0].At) < rateSpan || after[len(after)-1].At.Sub(after[len(after)-n].At) < rateSpan) {
		n++
	}
	rate := func(ss []Sample) float64 {
		d := ss[len(ss)-1].At.Sub(ss[0].At).Seconds()
		if d <= 0 {
			return 0
		}
		return float64(ss[len(ss)-1].Transfers-ss[0].Transfers) / d
	}
	return rate(after[:n]), rate(after[len(after)-n:])
}

package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/benchkit"
)

// probeRounds is how many calls of benchkit.RedisProbe each reading takes
// the median of.
const probeRounds = 3

// conditions are what a run was measured under: the machine's load average
// and the host probe (the private Redis's CPU for a fixed script,
// benchkit.RedisProbe) at its start and at its end. The probe tells two runs
// on hosts of different speed apart, which the load average does not: the
// same tree has read twice the CPU a job on an idle machine of the same
// name.
type conditions struct {
	cpu                  benchkit.CPU
	loadStart, loadEnd   float64
	probeStart, probeEnd float64 // µs of Redis CPU an iteration
}

// startConditions reads and prints the conditions at a run's start.
func startConditions(ctx context.Context, rdb *redis.Client, out *benchkit.Figures) (conditions, error) {
	h := conditions{cpu: benchkit.ReadCPU(), loadStart: mustFloat(loadAvg())}
	out.Float("load_avg_1m_start", h.loadStart, 2, "")
	h.cpu.Print(out)
	var err error
	if h.probeStart, err = benchkit.RedisProbe(ctx, rdb, "compare:probe", probeRounds); err != nil {
		return h, fmt.Errorf("host probe: %w", err)
	}
	out.Float("host_redis_probe_start_us", h.probeStart, 3, "us")
	return h, nil
}

// end reads and prints the conditions at a run's end.
func (h *conditions) end(ctx context.Context, rdb *redis.Client, out *benchkit.Figures) error {
	var err error
	if h.probeEnd, err = benchkit.RedisProbe(ctx, rdb, "compare:probe", probeRounds); err != nil {
		return fmt.Errorf("host probe: %w", err)
	}
	out.Float("host_redis_probe_end_us", h.probeEnd, 3, "us")
	h.loadEnd = mustFloat(loadAvg())
	out.Float("load_avg_1m_end", h.loadEnd, 2, "")
	return nil
}

// measured is a table's first line: when, on what, under which load and
// probe, with which command, over how many rounds; spread, when set, says
// that the cells give the rounds' spread.
func (h conditions) measured(args []string, rounds int, spread bool) string {
	shared := ""
	if h.loadStart >= 1 {
		shared = " (other work shared the machine)"
	}
	tail := ""
	if spread {
		tail = " (spread: lowest to highest)"
	}
	return fmt.Sprintf("Measured %s on %s, load average %.1f at the start and %.1f at the end%s; host probe %.3f µs of "+
		"Redis CPU an iteration at the start and %.3f at the end (`benchkit.RedisProbe`: runs are comparable only where "+
		"it agrees); `make compare%s`; medians of %d rounds%s.\n\n",
		time.Now().UTC().Format("2006-01-02"), h.machine(), h.loadStart, h.loadEnd, shared, h.probeStart, h.probeEnd,
		argText(args), rounds, tail)
}

// machine describes this machine: cores, CPU, memory.
func (h conditions) machine() string {
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		for line := range strings.Lines(string(b)) {
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
				mem = fmt.Sprintf(", %d GiB", (kb+(1<<19))>>20)
				break
			}
		}
	}
	return fmt.Sprintf("a %d-core %s machine (%s)%s", runtime.NumCPU(), runtime.GOOS, h.cpu, mem)
}

package benchkit

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A CPU is the processor this machine reports in /proc/cpuinfo. A virtual
// machine may name only the vendor's line ("AMD EPYC"); the family and
// model numbers still tell its generations apart (AMD family 23 model 49 is
// Zen 2, family 25 is Zen 3 or 4), and figures of different runs compare
// only on the same CPU.
type CPU struct {
	Name          string  // model name
	Family, Model int     // cpu family, model; -1 when not reported
	MHz           float64 // cpu MHz of the first core; 0 when not reported
}

// ReadCPU reads the first processor of /proc/cpuinfo; a machine without one
// (not Linux) gets a CPU with no name and the numbers unset.
func ReadCPU() CPU {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return CPU{Family: -1, Model: -1}
	}
	return parseCPU(string(b))
}

func parseCPU(info string) CPU {
	c := CPU{Family: -1, Model: -1}
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			if strings.TrimSpace(line) == "" && c.Name != "" {
				break // the end of the first processor's block
			}
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "model name":
			c.Name = v
		case "cpu family":
			c.Family = atoiOr(v, -1)
		case "model":
			c.Model = atoiOr(v, -1)
		case "cpu MHz":
			c.MHz, _ = strconv.ParseFloat(v, 64)
		}
	}
	return c
}

func atoiOr(s string, or int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return or
	}
	return n
}

// String describes c as "AMD EPYC, family 23 model 49, 2246 MHz", leaving
// out what was not reported.
func (c CPU) String() string {
	parts := []string{cmp.Or(c.Name, "unknown CPU")}
	if c.Family >= 0 && c.Model >= 0 {
		parts = append(parts, fmt.Sprintf("family %d model %d", c.Family, c.Model))
	}
	if c.MHz > 0 {
		parts = append(parts, fmt.Sprintf("%.0f MHz", c.MHz))
	}
	return strings.Join(parts, ", ")
}

// Print writes c's numbers as figures (host_cpu_family, host_cpu_model,
// host_cpu_mhz), each left out when not reported.
func (c CPU) Print(out *Figures) {
	if c.Family >= 0 && c.Model >= 0 {
		out.Int("host_cpu_family", int64(c.Family), "")
		out.Int("host_cpu_model", int64(c.Model), "")
	}
	if c.MHz > 0 {
		out.Float("host_cpu_mhz", c.MHz, 0, "MHz")
	}
}

// probeScript is the fixed work RedisProbe times: per iteration, a
// redis.call of a HGET that misses and a number made text, the two pieces
// the claim and completion scripts repeat most (bench/luacost).
const probeScript = `for i = 1, tonumber(ARGV[1]) do
  redis.call('HGET', KEYS[1], string.format('%.0f', 1795734461411719 + i))
end
return 1`

// ProbeIterations is how many iterations each of RedisProbe's calls runs
// (about 0.2 s of a core on a 2-core AMD EPYC of family 23).
const ProbeIterations = 200_000

// RedisProbe returns the Redis main thread's CPU, in microseconds an
// iteration, that a fixed script takes (the median of rounds calls of
// ProbeIterations iterations): the same server binary running the same
// script, so it moves only with the machine. A benchmark prints it beside
// its figures; two runs whose probes differ by tens of percent ran on hosts
// of different speed, and their figures do not compare. The converse does
// not hold: the loop stays in the CPU's caches, and a shared host can slow
// work with a larger working set while the probe reads the same. The
// client's read timeout must allow a call of about a second on a slow
// machine.
func RedisProbe(ctx context.Context, c *redis.Client, key string, rounds int) (float64, error) {
	if rounds < 1 {
		return 0, fmt.Errorf("benchkit: probe rounds %d, want at least 1", rounds)
	}
	script := redis.NewScript(probeScript)
	if err := script.Load(ctx, c).Err(); err != nil {
		return 0, err
	}
	per := make([]float64, 0, rounds)
	for range rounds {
		before, err := RedisMainCPU(ctx, c)
		if err != nil {
			return 0, err
		}
		if err := script.EvalSha(ctx, c, []string{key}, ProbeIterations).Err(); err != nil {
			return 0, fmt.Errorf("probe script: %w", err)
		}
		after, err := RedisMainCPU(ctx, c)
		if err != nil {
			return 0, err
		}
		per = append(per, (after-before)*1e6/ProbeIterations)
	}
	slices.Sort(per)
	return per[len(per)/2], nil
}

package benchkit

import (
	"bytes"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/testkit"
)

const cpuinfoTwo = `processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 23
model		: 49
model name	: AMD EPYC
cpu MHz		: 2245.780

processor	: 1
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 1
model name	: Other
cpu MHz		: 3000.000
`

// The first processor's block is read, and nothing past it.
func TestParseCPU(t *testing.T) {
	c := parseCPU(cpuinfoTwo)
	if c.Name != "AMD EPYC" || c.Family != 23 || c.Model != 49 || c.MHz != 2245.78 {
		t.Fatalf("parseCPU = %+v, want AMD EPYC, 23, 49, 2245.78", c)
	}
	if got, want := c.String(), "AMD EPYC, family 23 model 49, 2246 MHz"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	var b bytes.Buffer
	out := NewFigures(&b)
	c.Print(out)
	if err := out.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "host_cpu_family=23\nhost_cpu_model=49\nhost_cpu_mhz=2246 MHz\n"; got != want {
		t.Errorf("Print wrote %q, want %q", got, want)
	}
}

// A machine that reports nothing gets a CPU that says so and prints no
// figures (rather than zeros that read as a CPU).
func TestParseCPUNothingReported(t *testing.T) {
	c := parseCPU("processor\t: 0\n")
	if got, want := c.String(), "unknown CPU"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	var b bytes.Buffer
	c.Print(NewFigures(&b))
	if b.Len() != 0 {
		t.Errorf("Print wrote %q for an unreported CPU, want nothing", b.String())
	}
}

// The probe reads a positive cost an iteration from a real server, and
// refuses a round count that measures nothing.
func TestRedisProbe(t *testing.T) {
	srv := testkit.StartRedis(t)
	opts := srv.Options()
	opts.ReadTimeout = time.Minute // a loaded machine may take seconds for a call
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	us, err := RedisProbe(t.Context(), c, "benchkit-probe", 1)
	if err != nil {
		t.Fatalf("RedisProbe: %v", err)
	}
	if us <= 0 {
		t.Errorf("probe = %v us an iteration, want more than 0", us)
	}
	if _, err := RedisProbe(t.Context(), c, "benchkit-probe", 0); err == nil {
		t.Error("RedisProbe with 0 rounds succeeded, want an error")
	}
}

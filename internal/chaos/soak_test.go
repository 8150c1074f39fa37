package chaos

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// soakSamples returns n samples 10s apart; f shapes sample i.
func soakSamples(n int, f func(i int, s *Sample)) []Sample {
	t0 := time.Unix(1000, 0)
	out := make([]Sample, n)
	for i := range out {
		out[i] = Sample{At: t0.Add(time.Duration(i) * 10 * time.Second), WorkerRSS: 40 << 20, WorkerGoroutine: 40,
			RedisUsedMemory: 10 << 20, RedisKeys: 20000 + int64(i%3)*2000, Transfers: int64(i) * 500}
		f(i, &out[i])
	}
	return out
}

// TestFlatness: a steady soak passes; a resource that keeps growing, or
// work that stops, is reported; samples before the warm-up do not count.
func TestFlatness(t *testing.T) {
	t.Parallel()
	warm := time.Minute
	flat := soakSamples(40, func(i int, s *Sample) {
		if i < 6 {
			s.RedisKeys = int64(i) * 1000 // filling up during the warm-up
		}
	})
	f, err := Flatness(flat, warm)
	if err != nil || len(f.Growing) != 0 || f.Samples != 34 || f.JobsPerSecondLast != 50 {
		t.Fatalf("steady soak: %+v, %v; want flat, 34 samples after the warm-up, 50 jobs/s", f, err)
	}
	leak := soakSamples(40, func(i int, s *Sample) { s.WorkerGoroutine = 40 + int64(i)*5 })
	if f, _ := Flatness(leak, warm); len(f.Growing) != 1 || !strings.HasPrefix(f.Growing[0], "worker_goroutines") {
		t.Fatalf("goroutine leak: %v, want worker_goroutines reported", f.Growing)
	}
	stall := soakSamples(40, func(i int, s *Sample) { s.Transfers = int64(min(i, 20)) * 500 })
	if f, _ := Flatness(stall, warm); len(f.Growing) != 1 || !strings.Contains(f.Growing[0], "stalled") {
		t.Fatalf("stalled work: %v, want it reported", f.Growing)
	}
	// A short soak (9 samples after the warm-up, quarters of one interval):
	// one slow interval at the end is not a stall; three without progress are.
	slow := soakSamples(15, func(i int, s *Sample) {
		if i == 14 {
			s.Transfers = 13*500 + 200
		}
	})
	if f, _ := Flatness(slow, warm); len(f.Growing) != 0 {
		t.Fatalf("one slow interval in a short soak: %v, want no stall", f.Growing)
	}
	stopped := soakSamples(15, func(i int, s *Sample) { s.Transfers = int64(min(i, 11)) * 500 })
	if f, _ := Flatness(stopped, warm); len(f.Growing) != 1 || !strings.Contains(f.Growing[0], "stalled") {
		t.Fatalf("a short soak whose work stopped: %v, want it reported", f.Growing)
	}
	if _, err := Flatness(flat[:10], warm); !errors.Is(err, ErrConfig) {
		t.Fatalf("4 samples after the warm-up: %v, want ErrConfig", err)
	}
}

package retry_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/retry"
)

func TestDelayBounds(t *testing.T) {
	t.Parallel()
	const min, max = 100 * time.Millisecond, 3 * time.Second
	for _, c := range []struct {
		attempt int
		step    time.Duration
	}{
		{-1, min}, {0, min}, {1, min}, {2, 2 * min}, {3, 4 * min}, {5, 16 * min},
		{6, max}, {50, max}, {1 << 30, max},
	} {
		for range 200 {
			d := retry.Delay(c.attempt, min, max)
			if d < c.step/2 || d > c.step {
				t.Fatalf("Delay(%d, %s, %s) = %s, want within [%s, %s]", c.attempt, min, max, d, c.step/2, c.step)
			}
		}
	}
}

func TestDelayDefaults(t *testing.T) {
	t.Parallel()
	if d := retry.Delay(3, 0, 0); d < time.Millisecond/2 || d > time.Millisecond {
		t.Errorf("Delay(3, 0, 0) = %s, want within [500µs, 1ms]: min 1ms, max raised to min", d)
	}
	if d := retry.Delay(1, time.Second, time.Millisecond); d < time.Second/2 || d > time.Second {
		t.Errorf("Delay(1, 1s, 1ms) = %s, want within [500ms, 1s]: max raised to min", d)
	}
}

// The jitter spreads delays over the upper half of the step: both quarters
// of it are drawn, and not one value over and over.
func TestDelayJitter(t *testing.T) {
	t.Parallel()
	const step = time.Second
	seen := map[time.Duration]bool{}
	var low, high int
	for range 1000 {
		d := retry.Delay(1, step, step)
		seen[d] = true
		if d < 3*step/4 {
			low++
		} else {
			high++
		}
	}
	if len(seen) < 900 || low < 350 || high < 350 {
		t.Errorf("1000 delays: %d distinct, %d in [500ms, 750ms), %d in [750ms, 1s]: want spread uniformly", len(seen), low, high)
	}
}

package benchkit_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/benchkit"
)

func TestFiguresFormat(t *testing.T) {
	var b strings.Builder
	f := benchkit.NewFigures(&b)
	f.Float("setnx_msgs_per_s", 3571.5, 0, "msgs/s")
	f.Float("speedup_vs_setnx", 2.96, 1, "x")
	f.Float("worker_vs_raw_ratio", 0.0104, 3, "")
	f.Int("leases_held", 10000, "leases")
	f.Int("leases_lost_during_bench", 0, "leases")
	f.Millis("renew_10k_leasehold_ms", 59649*time.Microsecond)
	f.Millis("renew_interval_ms", time.Second)
	f.Float("renew_10k_speedup_vs_redsync", math.Inf(1), 1, "x")
	if err := f.Err(); err != nil {
		t.Fatalf("Err: %v", err)
	}
	want := "setnx_msgs_per_s=3572 msgs/s\n" +
		"speedup_vs_setnx=3.0 x\n" +
		"worker_vs_raw_ratio=0.010\n" +
		"leases_held=10000 leases\n" +
		"leases_lost_during_bench=0 leases\n" +
		"renew_10k_leasehold_ms=59.6 ms\n" +
		"renew_interval_ms=1000.0 ms\n" +
		"renew_10k_speedup_vs_redsync=+Inf x\n"
	if got := b.String(); got != want {
		t.Fatalf("printed\n%s\nwant\n%s", got, want)
	}
}

// TestFiguresMatchPrintf checks that Float prints what the format verb %.Nf
// prints, so that figures keep their digits when a program moves from
// fmt.Printf to Figures.
func TestFiguresMatchPrintf(t *testing.T) {
	for _, v := range []float64{0, 0.05, 0.15, 0.25, 1.45, 2.5, 3.5, 1683.25, 14668.5, 1e9 / 3, -7.45, math.NaN(), math.Inf(-1)} {
		for prec := range 4 {
			var b strings.Builder
			f := benchkit.NewFigures(&b)
			f.Float("x", v, prec, "u")
			if want := fmt.Sprintf("x=%.*f u\n", prec, v); b.String() != want {
				t.Errorf("Float(%v, %d) printed %q, Printf %q", v, prec, b.String(), want)
			}
		}
	}
}

func TestFiguresRejectMalformed(t *testing.T) {
	for _, tc := range []struct{ name, unit string }{
		{"", "ms"},
		{"Renew_ms", "ms"},
		{"renew ms", "ms"},
		{"renew=ms", "ms"},
		{"renew_ms", "m s"},
		{"renew_ms", "ms\n"},
		{"renew_ms", "a=b"},
	} {
		var b strings.Builder
		f := benchkit.NewFigures(&b)
		f.Int("before", 1, "x")
		f.Int(tc.name, 2, tc.unit)
		f.Int("after", 3, "x")
		if err := f.Err(); !errors.Is(err, benchkit.ErrFigure) {
			t.Errorf("name %q unit %q: Err() = %v, want ErrFigure", tc.name, tc.unit, err)
		}
		if got := b.String(); got != "before=1 x\n" {
			t.Errorf("name %q unit %q: printed %q, want only the line before", tc.name, tc.unit, got)
		}
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return len(p), nil
}

func TestFiguresWriteError(t *testing.T) {
	w := &failWriter{n: 1}
	f := benchkit.NewFigures(w)
	f.Int("a", 1, "x")
	f.Int("b", 2, "x")
	f.Int("c", 3, "x")
	if err := f.Err(); err == nil || err.Error() != "disk full" {
		t.Fatalf("Err() = %v, want the write error", err)
	}
	if w.n != 0 {
		t.Fatalf("writer left with %d writes", w.n)
	}
}

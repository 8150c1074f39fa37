package benchkit_test

import (
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/benchkit"
)

func ms(n ...int) []time.Duration {
	ds := make([]time.Duration, len(n))
	for i, v := range n {
		ds[i] = time.Duration(v) * time.Millisecond
	}
	return ds
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{ms(7), 7 * time.Millisecond},
		{ms(30, 10, 20), 20 * time.Millisecond},
		// Even count: the upper of the two middle elements.
		{ms(40, 10, 30, 20), 30 * time.Millisecond},
	} {
		in := slices.Clone(tc.in)
		if got := benchkit.Median(in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("Median reordered its argument: %v, was %v", in, tc.in)
		}
	}
}

func TestPercentile(t *testing.T) {
	// 1..100 ms, shuffled: the nearest-rank p-th percentile is p ms.
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration((i*37)%100+1) * time.Millisecond
	}
	ten := ms(10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
	for _, tc := range []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{hundred, 50, 50 * time.Millisecond},
		{hundred, 99, 99 * time.Millisecond},
		{hundred, 100, 100 * time.Millisecond},
		{hundred, 1, 1 * time.Millisecond},
		{hundred, 0, 1 * time.Millisecond},
		{ten, 50, 5 * time.Millisecond},  // rank ceil(5) = 5
		{ten, 99, 10 * time.Millisecond}, // rank ceil(9.9) = 10
		{ten, 91, 10 * time.Millisecond}, // rank ceil(9.1) = 10
		{ten, 90, 9 * time.Millisecond},  // rank 9
		{ten, 11, 2 * time.Millisecond},  // rank ceil(1.1) = 2
		{ms(42), 99, 42 * time.Millisecond},
	} {
		in := slices.Clone(tc.in)
		if got := benchkit.Percentile(in, tc.p); got != tc.want {
			t.Errorf("Percentile(%d values, %v) = %v, want %v", len(tc.in), tc.p, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("Percentile reordered its argument")
		}
	}
}

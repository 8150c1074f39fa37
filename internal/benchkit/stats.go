package benchkit

import (
	"math"
	"slices"
	"time"
)

// Median returns the middle element of ds in sorted order (for an even count,
// the upper of the two middle ones), or 0 when ds is empty. ds is not
// modified.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// Percentile returns the p-th percentile of ds by nearest rank: the smallest
// element such that at least p percent of ds are less than or equal to it
// (p = 50: the lower median; p = 100: the maximum; p <= 0: the minimum). It
// returns 0 when ds is empty. ds is not modified.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Package stats summarizes repeated measurements: median, p99 and range.
package stats

import (
	"math"
	"slices"
)

// Summary describes a set of samples of one measured point.
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	// P99 is the 99th percentile in the worse direction: the high tail for
	// latencies and durations (lower is better), the low tail (1st
	// percentile) for throughputs (higher is better).
	P99  float64 `json:"p99"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Summarize computes the summary; higherIsBetter picks the tail P99 reports.
func Summarize(samples []float64, higherIsBetter bool) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	tail := Percentile(s, 99)
	if higherIsBetter {
		tail = Percentile(s, 1)
	}
	return Summary{N: len(s), Median: Percentile(s, 50), P99: tail, Min: s[0], Max: s[len(s)-1], Mean: sum / float64(len(s))}
}

// Percentile returns the p-th percentile of sorted samples by linear
// interpolation between closest ranks.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if n == 1 {
		return sorted[0]
	}
	r := p / 100 * float64(n-1)
	lo := int(math.Floor(r))
	hi := min(lo+1, n-1)
	f := r - float64(lo)
	return sorted[lo]*(1-f) + sorted[hi]*f
}

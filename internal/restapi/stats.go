package restapi

import (
	"math"
	"sort"
)

// summarize computes Flink's StatsSummaryDto over samples: min, max and the
// integer average, and quantiles estimated like Flink's histogram (Apache
// Commons Math's Percentile default: position p·(n+1), linear
// interpolation between neighbours). No samples give all zeros, where
// Flink would report NaN quantiles, which are not valid JSON.
func summarize(samples []int64) statsSummary {
	if len(samples) == 0 {
		return statsSummary{}
	}
	sorted := append([]int64(nil), samples...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	var sum float64
	for _, v := range sorted {
		sum += float64(v)
	}
	return statsSummary{
		Min:  sorted[0],
		Max:  sorted[len(sorted)-1],
		Avg:  int64(sum / float64(len(sorted))),
		P50:  quantile(sorted, 0.50),
		P90:  quantile(sorted, 0.90),
		P95:  quantile(sorted, 0.95),
		P99:  quantile(sorted, 0.99),
		P999: quantile(sorted, 0.999),
	}
}

// quantile estimates the q-quantile of sorted, which is not empty.
func quantile(sorted []int64, q float64) float64 {
	n := float64(len(sorted))
	pos := q * (n + 1)
	switch {
	case pos < 1:
		return float64(sorted[0])
	case pos >= n:
		return float64(sorted[len(sorted)-1])
	}
	lower := math.Floor(pos)
	d := pos - lower
	lo := float64(sorted[int(lower)-1])
	hi := float64(sorted[int(lower)])
	return lo + d*(hi-lo)
}

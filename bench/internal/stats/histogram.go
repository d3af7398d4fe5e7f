package stats

import (
	"math"
	"math/bits"
)

// histSub is the number of buckets per power of two: values are kept to
// within 1/histSub (about 1.6 %), as an HDR histogram with two significant
// digits does.
const histSub = 64

// Histogram counts non-negative integer values (nanoseconds, say) in
// log-linear buckets: exact below histSub, then histSub buckets per power
// of two. Recording is a few instructions and never allocates, so an
// operator can record every record it sees.
type Histogram struct {
	Counts []uint64 `json:"counts"`
	N      uint64   `json:"n"`
	Max    int64    `json:"max"`
}

func histIndex(v int64) int {
	if v < histSub {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 7 // v >> e is in [64, 128)
	return (e+1)*histSub + int(uint64(v)>>e) - histSub
}

// histLow is the smallest value of bucket i.
func histLow(i int) int64 {
	if i < histSub {
		return int64(i)
	}
	e := i/histSub - 1
	return int64(i%histSub+histSub) << e
}

// Record counts v.
func (h *Histogram) Record(v int64) {
	i := histIndex(v)
	if i >= len(h.Counts) {
		h.Counts = append(h.Counts, make([]uint64, i+1-len(h.Counts))...)
	}
	h.Counts[i]++
	h.N++
	h.Max = max(h.Max, v)
}

// Merge adds o's counts.
func (h *Histogram) Merge(o *Histogram) {
	if len(o.Counts) > len(h.Counts) {
		h.Counts = append(h.Counts, make([]uint64, len(o.Counts)-len(h.Counts))...)
	}
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
	h.N += o.N
	h.Max = max(h.Max, o.Max)
}

// Quantile is the value below which a fraction q of the values fall (the
// middle of its bucket), NaN when empty.
func (h *Histogram) Quantile(q float64) float64 {
	if h.N == 0 {
		return math.NaN()
	}
	rank := uint64(math.Ceil(q * float64(h.N)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen >= rank {
			lo, hi := histLow(i), histLow(i+1)
			return min(float64(lo+hi-1)/2, float64(h.Max))
		}
	}
	return float64(h.Max)
}

package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHistogramBuckets(t *testing.T) {
	prev := -1
	for v := int64(0); v < 1<<20; v++ {
		i := histIndex(v)
		if i < prev || i > prev+1 {
			t.Fatalf("value %d: bucket %d after %d", v, i, prev)
		}
		if lo := histLow(i); lo > v || histLow(i+1) <= v {
			t.Fatalf("value %d in bucket %d of [%d, %d)", v, i, lo, histLow(i+1))
		}
		prev = i
	}
}

// Quantiles are within a bucket's width (1/64) of the exact ones.
func TestHistogramQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h, a, b Histogram
	var vs []float64
	for i := range 100000 {
		v := int64(rng.ExpFloat64() * 200e3)
		h.Record(v)
		if i%2 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
		vs = append(vs, float64(v))
	}
	a.Merge(&b)
	slices.Sort(vs)
	for _, q := range []float64{0.5, 0.99, 0.999} {
		want := vs[int(math.Ceil(q*float64(len(vs))))-1]
		for _, x := range []*Histogram{&h, &a} {
			if got := x.Quantile(q); math.Abs(got-want) > want/50 {
				t.Fatalf("q%.3f: %.0f, exact %.0f", q, got, want)
			}
		}
	}
	var empty Histogram
	if !math.IsNaN(empty.Quantile(0.5)) {
		t.Fatal("empty histogram has a median")
	}
}

package keygroup

import (
	"fmt"
	"testing"
)

// Every key group must be owned by exactly the subtask OperatorIndex names,
// for every parallelism, or restored state lands on the wrong subtask.
func TestRangeForAgreesWithOperatorIndex(t *testing.T) {
	for _, maxP := range []int{1, 7, 128, 1000} {
		for p := 1; p <= maxP && p <= 64; p++ {
			next := 0
			for i := 0; i < p; i++ {
				r := RangeFor(maxP, p, i)
				if r.Start != next {
					t.Fatalf("max=%d p=%d i=%d: range %v does not start at %d", maxP, p, i, r, next)
				}
				for kg := r.Start; kg <= r.End; kg++ {
					if got := OperatorIndex(kg, maxP, p); got != i {
						t.Fatalf("max=%d p=%d kg=%d: OperatorIndex=%d, RangeFor says %d", maxP, p, kg, got, i)
					}
				}
				next = r.End + 1
			}
			if next != maxP {
				t.Fatalf("max=%d p=%d: ranges cover %d key groups", maxP, p, next)
			}
		}
	}
}

func TestOfIsStableAndInRange(t *testing.T) {
	for i := 0; i < 1000; i++ {
		k := []byte(fmt.Sprint(i))
		kg := Of(k, 128)
		if kg < 0 || kg >= 128 || kg != Of(k, 128) {
			t.Fatalf("key %q: key group %d", k, kg)
		}
	}
}

func TestOverlap(t *testing.T) {
	for _, c := range []struct {
		a, b Range
		want int
	}{
		{Range{0, 63}, Range{32, 95}, 32},
		{Range{0, 31}, Range{32, 63}, 0},
		{Range{10, 20}, Range{0, 127}, 11},
		{Range{5, 4}, Range{0, 127}, 0}, // empty
	} {
		if got := c.a.Overlap(c.b); got != c.want || c.b.Overlap(c.a) != c.want {
			t.Errorf("%v.Overlap(%v) = %d, want %d both ways", c.a, c.b, got, c.want)
		}
	}
}

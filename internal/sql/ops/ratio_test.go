package ops

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestRatio64 checks the 64-bit quotient of averages against big
// integers, rounding half away from zero, at the edges of int64 too.
func TestRatio64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := [][3]int64{{1, 0, 2}, {-1, 0, 2}, {3, 0, 2}, {-3, 0, 2}, {5, 1, 3}, {-5, 1, 3}, {math.MaxInt64, 0, 1}, {math.MinInt64, 0, 1},
		{math.MaxInt64, 0, 2}, {math.MinInt64, 0, 3}, {1, 18, 7}, {10, 18, 3}}
	for range 20000 {
		cases = append(cases, [3]int64{rng.Int64N(1<<40) - 1<<39, int64(rng.IntN(8)), rng.Int64N(1<<20) + 1})
	}
	for _, c := range cases {
		m, shift, d := c[0], int(c[1]), uint64(c[2])
		got, ok := ratio64(m, shift, d)
		num := new(big.Int).Mul(big.NewInt(m), pow10Big(shift))
		den := new(big.Int).SetUint64(d)
		quo, rem := new(big.Int).QuoRem(num, den, new(big.Int))
		if rem.Lsh(rem.Abs(rem), 1).Cmp(den) >= 0 {
			quo.Add(quo, big.NewInt(int64(num.Sign())))
		}
		if !ok {
			if quo.IsInt64() && new(big.Int).Abs(num).Cmp(big.NewInt(math.MaxInt64)) <= 0 {
				t.Errorf("ratio64(%d, %d, %d) gave up on a quotient that fits", m, shift, d)
			}
			continue
		}
		if !quo.IsInt64() || quo.Int64() != got {
			t.Errorf("ratio64(%d, %d, %d) = %d, want %v", m, shift, d, got, quo)
		}
	}
}

package expr

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// roundRat is r rounded half away from zero, if it fits int64.
func roundRat(r *big.Rat) (int64, bool) {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Abs(m).Lsh(m, 1).Cmp(r.Denom()) >= 0 {
		q.Add(q, big.NewInt(int64(r.Sign())))
	}
	return q.Int64(), q.IsInt64()
}

func pow10Rat(k int) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(k, -k))), nil)
	if k < 0 {
		return new(big.Rat).SetFrac(big.NewInt(1), p)
	}
	return new(big.Rat).SetInt(p)
}

// randMantissa is a mantissa of any magnitude, edges included.
func randMantissa(rng *rand.Rand) int64 {
	switch rng.IntN(6) {
	case 0:
		return []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 5, -5}[rng.IntN(7)]
	case 1:
		return rng.Int64N(1000) - 500
	}
	n := rng.Int64() >> rng.IntN(63)
	if rng.IntN(2) == 0 {
		n = -n
	}
	return n
}

// TestDecimalExact checks NUMERIC multiplication, division and rescaling
// against math/big: exact, rounded half away from zero, overflow an
// error.
func TestDecimalExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 30_000 {
		a, b := randMantissa(rng), randMantissa(rng)
		ra, rb := new(big.Rat).SetInt64(a), new(big.Rat).SetInt64(b)

		shift := rng.IntN(40)
		want, fits := roundRat(new(big.Rat).Mul(new(big.Rat).Mul(ra, rb), pow10Rat(-shift)))
		if got, err := decMul(a, b, shift); (err == nil) != fits || fits && got != want {
			t.Fatalf("decMul(%d, %d, %d) = %d, %v; want %d (fits %v)", a, b, shift, got, err, want, fits)
		}

		k := rng.IntN(60) - 20
		if b != 0 {
			want, fits = roundRat(new(big.Rat).Mul(new(big.Rat).Quo(ra, rb), pow10Rat(k)))
			if got, err := decDiv(a, b, k); (err == nil) != fits || fits && got != want {
				t.Fatalf("decDiv(%d, %d, %d) = %d, %v; want %d (fits %v)", a, b, k, got, err, want, fits)
			}
		}

		from, to := rng.IntN(25), rng.IntN(25)
		want, fits = roundRat(new(big.Rat).Mul(ra, pow10Rat(to-from)))
		if got, err := rescale(a, from, to); (err == nil) != fits || fits && got != want {
			t.Fatalf("rescale(%d, %d, %d) = %d, %v; want %d (fits %v)", a, from, to, got, err, want, fits)
		}

		sa, sb := rng.IntN(19), rng.IntN(19)
		c := new(big.Rat).Mul(ra, pow10Rat(-sa)).Cmp(new(big.Rat).Mul(rb, pow10Rat(-sb)))
		if got := decCompare(a, sa, b, sb); got != c {
			t.Fatalf("decCompare(%d, %d, %d, %d) = %d, want %d", a, sa, b, sb, got, c)
		}
	}
	if _, err := decDiv(1, 0, 3); err != errDivZero {
		t.Errorf("decDiv by zero: %v", err)
	}
}

func TestDecToFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20_000 {
		m, s := randMantissa(rng), rng.IntN(30)
		want, _ := new(big.Rat).Mul(new(big.Rat).SetInt64(m), pow10Rat(-s)).Float64()
		if got := decToFloat(m, s); got != want {
			t.Fatalf("decToFloat(%d, %d) = %v, want %v", m, s, got, want)
		}
	}
}

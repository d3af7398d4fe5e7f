package expr

import (
	"errors"
	"math"
	"math/bits"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

// NUMERIC arithmetic on 64-bit mantissas, exact, through 128-bit
// intermediates, rounding half away from zero.

var (
	errDivZero  = errors.New("division by zero")
	errOverflow = row.ErrNumericOverflow
)

// pow10 is 10^k for k in 0..19, the powers a uint64 holds.
var pow10 = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

func abs64(n int64) uint64 {
	if n < 0 {
		return -uint64(n)
	}
	return uint64(n)
}

// signed is magnitude u with a sign, if it fits int64.
func signed(u uint64, neg bool) (int64, bool) {
	if neg {
		return -int64(u), u <= 1<<63
	}
	return int64(u), u <= math.MaxInt64
}

func add64(a, b int64) (int64, bool) {
	c := a + b
	return c, (c > a) == (b > 0)
}

func sub64(a, b int64) (int64, bool) {
	c := a - b
	return c, (c < a) == (b > 0)
}

func mul64(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(abs64(a), abs64(b))
	if hi != 0 {
		return 0, false
	}
	return signed(lo, (a < 0) != (b < 0))
}

// divRound is u/d rounded half away from zero (d > 0).
func divRound(u, d uint64) uint64 {
	q, r := u/d, u%d
	if r >= d-r {
		q++
	}
	return q
}

// rescale moves mantissa m from scale from to scale to, rounding.
func rescale(m int64, from, to int) (int64, error) {
	switch k := to - from; {
	case k == 0:
		return m, nil
	case k > 0:
		if m == 0 {
			return 0, nil
		}
		if k >= len(pow10) || pow10[k] > math.MaxInt64 {
			return 0, errOverflow
		}
		r, ok := mul64(m, int64(pow10[k]))
		if !ok {
			return 0, errOverflow
		}
		return r, nil
	case -k >= len(pow10):
		return 0, nil
	default:
		r, _ := signed(divRound(abs64(m), pow10[-k]), m < 0)
		return r, nil
	}
}

// mulPow10 is u·10^k in 128 bits; ok is false past 128 bits.
func mulPow10(u uint64, k int) (hi, lo uint64, ok bool) {
	if u == 0 {
		return 0, 0, true
	}
	if k < len(pow10) {
		hi, lo = bits.Mul64(u, pow10[k])
		return hi, lo, true
	}
	if k > 2*(len(pow10)-1) {
		return 0, 0, false
	}
	hi1, lo1 := bits.Mul64(u, pow10[len(pow10)-1])
	m := pow10[k-(len(pow10)-1)]
	h2, l2 := bits.Mul64(lo1, m)
	h3, l3 := bits.Mul64(hi1, m)
	hi, carry := bits.Add64(h2, l3, 0)
	return hi, l2, h3 == 0 && carry == 0
}

// div128Round is (hi, lo)/d rounded half away from zero; ok is false
// when the quotient does not fit 64 bits.
func div128Round(hi, lo, d uint64) (uint64, bool) {
	if hi >= d {
		return 0, false
	}
	q, r := bits.Div64(hi, lo, d)
	if r >= d-r {
		if q == math.MaxUint64 {
			return 0, false
		}
		q++
	}
	return q, true
}

// decMul is the product of mantissas a and b (of scales summing to
// scale+shift) at scale, shift >= 0 digits rounded off.
func decMul(a, b int64, shift int) (int64, error) {
	hi, lo := bits.Mul64(abs64(a), abs64(b))
	// Digits beyond 10^19 go in steps: truncating first rounds the same.
	for d := pow10[len(pow10)-1]; shift >= len(pow10); shift -= len(pow10) - 1 {
		q, _ := bits.Div64(hi%d, lo, d)
		hi, lo = hi/d, q
	}
	q, ok := lo, hi == 0
	if shift > 0 {
		q, ok = div128Round(hi, lo, pow10[shift])
	}
	if !ok {
		return 0, errOverflow
	}
	r, ok := signed(q, (a < 0) != (b < 0))
	if !ok {
		return 0, errOverflow
	}
	return r, nil
}

// decDiv is a/b·10^k rounded: the quotient of mantissas at the scale k
// more than a's less b's.
func decDiv(a, b int64, k int) (int64, error) {
	if b == 0 {
		return 0, errDivZero
	}
	neg := (a < 0) != (b < 0)
	var q uint64
	if k >= 0 {
		hi, lo, ok := mulPow10(abs64(a), k)
		if !ok {
			return 0, errOverflow
		}
		if q, ok = div128Round(hi, lo, abs64(b)); !ok {
			return 0, errOverflow
		}
	} else {
		// Scale the divisor up instead; past 64 bits the quotient is
		// under a half.
		if -k >= len(pow10) {
			return 0, nil
		}
		hi, d := bits.Mul64(abs64(b), pow10[-k])
		if hi != 0 {
			return 0, nil
		}
		q = divRound(abs64(a), d)
	}
	r, ok := signed(q, neg)
	if !ok {
		return 0, errOverflow
	}
	return r, nil
}

// decToFloat is mantissa m at scale as the nearest float64.
func decToFloat(m int64, scale int) float64 {
	// Both exact in a float64, so one division rounds correctly.
	if abs64(m) < 1<<53 && scale >= 0 && scale <= 22 {
		return float64(m) / math.Pow10(scale)
	}
	v, _ := row.ParseText(double, string(row.AppendText(nil, plan.Type{Kind: plan.Decimal, Scale: int8(scale)}, row.Int(m))))
	return v.Float()
}

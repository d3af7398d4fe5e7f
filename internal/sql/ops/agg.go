package ops

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

// The accumulator of a window aggregate is bytes in keyed state: the
// byte accFormat, then one segment per aggregate call, in the plan's
// order, each in the layout of its call's accKind. Values in a segment
// (min, max, distinct) are in valueEncoding.

// accFormat begins every accumulator, so that none is empty (the window
// operator takes no bytes for no rows, which the accumulator of no calls,
// a DISTINCT over windows, would otherwise be), and so that a layout to
// come can tell itself from this one.
const accFormat = 1

// accBody is the segments of acc.
func accBody(acc []byte) ([]byte, error) {
	if len(acc) == 0 || acc[0] != accFormat {
		return nil, errCorruptAcc
	}
	return acc[1:], nil
}

// accKind is the layout of one call's segment.
type accKind uint8

const (
	// accCount: a uvarint, the rows counted.
	accCount accKind = iota
	// accSumInt: a uvarint, the non-NULL values added, then a varint,
	// their sum (a NUMERIC's mantissa, at the argument's scale). Sum and
	// avg of integers, NUMERICs and INTERVALs.
	accSumInt
	// accSumFloat: a uvarint, the non-NULL values added, then the 8
	// bytes of their float64 sum.
	accSumFloat
	// accExtreme: a byte, 1 when a value was seen, then the least (min)
	// or greatest (max) value.
	accExtreme
	// accDistinct: a uvarint, how many distinct values, then each, in
	// the byte order of their encodings.
	accDistinct
)

// aggCall is one aggregate call compiled.
type aggCall struct {
	plan.AggCall
	acc accKind
	// arg is the argument's type (the zero Type for count(*)).
	arg plan.Type
}

func newAggCall(c plan.AggCall, in plan.Schema) (aggCall, error) {
	a := aggCall{AggCall: c}
	if c.Filter >= len(in) {
		return a, fmt.Errorf("FILTER column %d of an input of %d columns", c.Filter, len(in))
	}
	if c.Filter >= 0 && in[c.Filter].Type.Kind != plan.Bool {
		return a, fmt.Errorf("FILTER column %s is %s, not BOOLEAN", in[c.Filter].Name, in[c.Filter].Type)
	}
	if c.Arg >= len(in) || (c.Arg < 0 && c.Fn != plan.Count) {
		return a, fmt.Errorf("argument column %d of an input of %d columns", c.Arg, len(in))
	}
	if c.Arg >= 0 {
		a.arg = in[c.Arg].Type
	}
	k := a.arg.Kind
	switch c.Fn {
	case plan.Count:
		a.acc = accCount
	case plan.CountDistinct:
		a.acc = accDistinct
	case plan.Min, plan.Max:
		a.acc = accExtreme
		if k == plan.Null {
			return a, fmt.Errorf("%s of NULL", c.Fn)
		}
		if c.Type != a.arg {
			return a, fmt.Errorf("%s(%s) returns %s, not %s", c.Fn, a.arg, a.arg, c.Type)
		}
		return a, nil
	case plan.Sum, plan.Avg:
		switch {
		case k == plan.Float32 || k == plan.Float64:
			a.acc = accSumFloat
			if c.Type.Kind != plan.Float32 && c.Type.Kind != plan.Float64 {
				return a, fmt.Errorf("%s(%s) returns a float, not %s", c.Fn, a.arg, c.Type)
			}
			return a, nil
		case a.arg.Numeric() || k == plan.Interval:
			a.acc = accSumInt
		default:
			return a, fmt.Errorf("%s of %s", c.Fn, a.arg)
		}
	default:
		return a, fmt.Errorf("unknown aggregate function %q", c.Fn)
	}
	switch t := c.Type.Kind; {
	case c.Type.Numeric():
	case t == plan.Interval && k == plan.Interval:
	default:
		return a, fmt.Errorf("%s(%s) cannot return %s", c.Fn, a.arg, c.Type)
	}
	return a, nil
}

// value is what row r adds to the call: ok is false when the row does
// not count (its FILTER is not true, or its argument is NULL).
func (a *aggCall) value(r row.Row) (v row.Value, ok bool) {
	if a.Filter >= 0 {
		if f := r[a.Filter]; f.IsNull() || !f.Bool() {
			return v, false
		}
	}
	if a.Arg < 0 {
		return v, true
	}
	v = r[a.Arg]
	return v, !v.IsNull()
}

var errCorruptAcc = errors.New("corrupt accumulator")

// segment splits the call's segment off the front of b.
func (a *aggCall) segment(b []byte) (seg, rest []byte, err error) {
	_, n := binary.Uvarint(b)
	switch {
	case a.acc == accExtreme:
		if len(b) == 0 || b[0] > 1 {
			return nil, nil, errCorruptAcc
		}
		n = 1
		if b[0] == 1 {
			l, err := valueLen(a.arg.Kind, b[1:])
			if err != nil {
				return nil, nil, err
			}
			n += l
		}
	case n <= 0:
		return nil, nil, errCorruptAcc
	case a.acc == accSumInt:
		_, m := binary.Varint(b[n:])
		if m <= 0 {
			return nil, nil, errCorruptAcc
		}
		n += m
	case a.acc == accSumFloat:
		if len(b)-n < 8 {
			return nil, nil, errCorruptAcc
		}
		n += 8
	case a.acc == accDistinct:
		count, _ := binary.Uvarint(b)
		for range count {
			l, err := valueLen(a.arg.Kind, b[n:])
			if err != nil {
				return nil, nil, err
			}
			n += l
		}
	}
	return b[:n], b[n:], nil
}

// appendEmpty appends the segment of no rows.
func (a *aggCall) appendEmpty(dst []byte) []byte {
	if a.acc == accSumInt || a.acc == accSumFloat {
		return a.appendSum(dst, 0, 0)
	}
	return append(dst, 0) // a zero count, no extreme, no distinct values
}

// add appends to dst the segment seg (nil: the empty one) with v added;
// scratch is room to encode v in, returned.
func (a *aggCall) add(dst, seg []byte, v row.Value, scratch []byte) ([]byte, []byte, error) {
	switch a.acc {
	case accCount:
		n, _ := binary.Uvarint(seg)
		return binary.AppendUvarint(dst, n+1), scratch, nil
	case accSumInt, accSumFloat:
		n, sum, err := a.sum(seg)
		if err != nil {
			return dst, scratch, err
		}
		if a.acc == accSumFloat {
			return a.appendSum(dst, n+1, int64(math.Float64bits(math.Float64frombits(uint64(sum))+v.Float()))), scratch, nil
		}
		s, ok := add64(sum, v.Int())
		if !ok {
			return dst, scratch, a.overflow()
		}
		return a.appendSum(dst, n+1, s), scratch, nil
	case accExtreme:
		scratch = appendValue(scratch[:0], a.arg.Kind, v)
		if len(seg) == 0 || seg[0] == 0 {
			return append(append(dst, 1), scratch...), scratch, nil
		}
		return append(append(dst, 1), a.pick(seg[1:], scratch)...), scratch, nil
	}
	scratch = appendValue(scratch[:0], a.arg.Kind, v)
	return a.mergeDistinct(dst, seg, scratch, 1), scratch, nil
}

// merge appends to dst the segment of both x's and y's values.
func (a *aggCall) merge(dst, x, y []byte) ([]byte, error) {
	switch a.acc {
	case accCount:
		n, _ := binary.Uvarint(x)
		m, _ := binary.Uvarint(y)
		return binary.AppendUvarint(dst, n+m), nil
	case accSumInt, accSumFloat:
		n, s, err := a.sum(x)
		if err != nil {
			return dst, err
		}
		m, t, err := a.sum(y)
		if err != nil {
			return dst, err
		}
		if a.acc == accSumFloat {
			return a.appendSum(dst, n+m, int64(math.Float64bits(math.Float64frombits(uint64(s))+math.Float64frombits(uint64(t))))), nil
		}
		sum, ok := add64(s, t)
		if !ok {
			return dst, a.overflow()
		}
		return a.appendSum(dst, n+m, sum), nil
	case accExtreme:
		switch {
		case x[0] == 0:
			return append(dst, y...), nil
		case y[0] == 0:
			return append(dst, x...), nil
		}
		return append(append(dst, 1), a.pick(x[1:], y[1:])...), nil
	}
	count, n := binary.Uvarint(y)
	return a.mergeDistinct(dst, x, y[n:], count), nil
}

// sum reads an accSumInt or accSumFloat segment (nil: the empty one):
// the values added and their sum (a float's bits).
func (a *aggCall) sum(seg []byte) (n uint64, sum int64, err error) {
	if seg == nil {
		return 0, 0, nil
	}
	n, k := binary.Uvarint(seg)
	if a.acc == accSumFloat {
		return n, int64(binary.LittleEndian.Uint64(seg[k:])), nil
	}
	sum, m := binary.Varint(seg[k:])
	if m <= 0 {
		return 0, 0, errCorruptAcc
	}
	return n, sum, nil
}

func (a *aggCall) appendSum(dst []byte, n uint64, sum int64) []byte {
	dst = binary.AppendUvarint(dst, n)
	if a.acc == accSumFloat {
		return binary.LittleEndian.AppendUint64(dst, uint64(sum))
	}
	return binary.AppendVarint(dst, sum)
}

// overflow is the error of a sum past 64 bits, as PostgreSQL words it.
func (a *aggCall) overflow() error {
	if a.arg.Kind == plan.Decimal {
		return fmt.Errorf("%s: %w", a.Fn, row.ErrNumericOverflow)
	}
	return fmt.Errorf("%s: %s out of range", a.Fn, a.arg)
}

// pick is whichever of the encoded values x and y the call keeps.
func (a *aggCall) pick(x, y []byte) []byte {
	c := compareEncoded(a.arg.Kind, x, y)
	if (a.Fn == plan.Min) == (c <= 0) {
		return x
	}
	return y
}

// mergeDistinct appends the distinct set of the segment x (nil: the empty
// set) and the count values of ys, sorted as a segment.
func (a *aggCall) mergeDistinct(dst, x, ys []byte, count uint64) []byte {
	var xs []byte
	var n uint64
	if x != nil {
		var k int
		n, k = binary.Uvarint(x)
		xs = x[k:]
	}
	// The count goes first, known only at the end: leave it room for
	// the largest.
	at := len(dst)
	dst = append(dst, make([]byte, binary.MaxVarintLen64)...)
	var total uint64
	next := func(b []byte, left *uint64) ([]byte, []byte) {
		if *left == 0 {
			return nil, b
		}
		*left--
		l, _ := valueLen(a.arg.Kind, b) // the segments are checked already
		return b[:l], b[l:]
	}
	vx, xs := next(xs, &n)
	vy, ys := next(ys, &count)
	for vx != nil || vy != nil {
		switch c := compareBytes(vx, vy); {
		case c < 0:
			dst = append(dst, vx...)
			vx, xs = next(xs, &n)
		case c > 0:
			dst = append(dst, vy...)
			vy, ys = next(ys, &count)
		default:
			dst = append(dst, vx...)
			vx, xs = next(xs, &n)
			vy, ys = next(ys, &count)
		}
		total++
	}
	// Move the values back against the count.
	head := binary.AppendUvarint(dst[at:at], total)
	k := len(head)
	copy(dst[at+k:], dst[at+binary.MaxVarintLen64:])
	return dst[:len(dst)-(binary.MaxVarintLen64-k)]
}

// compareBytes orders encoded values, nil last.
func compareBytes(x, y []byte) int {
	switch {
	case x == nil:
		return 1
	case y == nil:
		return -1
	}
	return bytes.Compare(x, y)
}

// result is the call's value from its segment.
func (a *aggCall) result(seg []byte) (row.Value, error) {
	switch a.acc {
	case accCount, accDistinct:
		n, _ := binary.Uvarint(seg)
		return ratio(int64(n), 0, 1, a.Type)
	case accExtreme:
		if seg[0] == 0 {
			return row.Null(), nil
		}
		return decodeValue(a.arg.Kind, seg[1:]), nil
	}
	n, sum, err := a.sum(seg)
	if err != nil || n == 0 {
		return row.Null(), err
	}
	d := uint64(1)
	if a.Fn == plan.Avg {
		d = n
	}
	if a.acc == accSumFloat {
		f := math.Float64frombits(uint64(sum)) / float64(d)
		if a.Type.Kind == plan.Float32 {
			f = float64(float32(f))
		}
		return row.Float(f), nil
	}
	scale := 0
	if a.arg.Kind == plan.Decimal {
		scale = int(a.arg.Scale)
	}
	return ratio(sum, scale, d, a.Type)
}

// ratio is m·10^−scale / d as a value of type t, exactly: a NUMERIC or an
// integer rounded half away from zero (as PostgreSQL rounds NUMERICs), a
// float to the nearest.
func ratio(m int64, scale int, d uint64, t plan.Type) (row.Value, error) {
	to := 0
	switch t.Kind {
	case plan.Decimal:
		to = int(t.Scale)
	case plan.Float32, plan.Float64:
		den := new(big.Int).Mul(new(big.Int).SetUint64(d), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
		f, _ := new(big.Rat).SetFrac(big.NewInt(m), den).Float64()
		if t.Kind == plan.Float32 {
			f = float64(float32(f))
		}
		return row.Float(f), nil
	}
	q := m
	if n, ok := ratio64(m, to-scale, d); ok {
		q = n
	} else if d != 1 || to != scale {
		// m·10^to / (d·10^scale), through big integers: the product and
		// the divisor may pass 64 bits where the quotient does not.
		num := new(big.Int).Mul(big.NewInt(m), pow10Big(to))
		den := new(big.Int).Mul(new(big.Int).SetUint64(d), pow10Big(scale))
		quo, rem := new(big.Int).QuoRem(num, den, new(big.Int))
		if rem.Lsh(rem.Abs(rem), 1).Cmp(den) >= 0 {
			quo.Add(quo, big.NewInt(int64(num.Sign())))
		}
		if !quo.IsInt64() {
			return row.Value{}, outOfRange(t)
		}
		q = quo.Int64()
	}
	if (t.Kind == plan.Int16 && q != int64(int16(q))) || (t.Kind == plan.Int32 && q != int64(int32(q))) {
		return row.Value{}, outOfRange(t)
	}
	return row.Int(q), nil
}

// ratio64 is m·10^shift / d rounded half away from zero, computed in 64
// bits when nothing overflows (an average's usual case: every result an
// unbounded aggregate emits computes one); ok is false otherwise, and the
// caller takes big integers.
func ratio64(m int64, shift int, d uint64) (int64, bool) {
	if shift < 0 || shift > 18 || d == 0 || d > math.MaxInt64 {
		return 0, false
	}
	num, ok := mulPow10(m, shift)
	if !ok {
		return 0, false
	}
	den := int64(d)
	q, r := num/den, num%den
	if r < 0 {
		r = -r
	}
	if r >= den-r { // 2r >= den, without overflowing
		if num < 0 {
			q--
		} else {
			q++
		}
	}
	return q, true
}

func pow10Big(k int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil) }

func outOfRange(t plan.Type) error {
	if t.Kind == plan.Decimal {
		return row.ErrNumericOverflow
	}
	return fmt.Errorf("%s out of range", t)
}

func add64(a, b int64) (int64, bool) {
	c := a + b
	return c, (c > a) == (b > 0)
}

// valueEncoding: a value of a segment is encoded by its kind — integers
// and everything in an int64 but floats as a zig-zag varint, floats as
// the 8 little-endian bytes of a float64 (zero always +0 and NaN always
// the same NaN, so that values SQL finds equal encode equally, as
// distinct sets need), a BOOLEAN as one byte, a VARCHAR as a uvarint
// length and the bytes. Each encoding delimits itself.

func appendValue(dst []byte, k plan.Kind, v row.Value) []byte {
	switch k {
	case plan.Float32, plan.Float64:
		f := v.Float()
		switch {
		case f == 0:
			f = 0
		case f != f:
			f = math.NaN()
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f))
	case plan.Bool:
		if v.Bool() {
			return append(dst, 1)
		}
		return append(dst, 0)
	case plan.Varchar:
		dst = binary.AppendUvarint(dst, uint64(len(v.Str())))
		return append(dst, v.Str()...)
	}
	return binary.AppendVarint(dst, v.Int())
}

// valueLen is the length of the encoded value b starts with.
func valueLen(k plan.Kind, b []byte) (int, error) {
	switch k {
	case plan.Float32, plan.Float64:
		if len(b) < 8 {
			return 0, errCorruptAcc
		}
		return 8, nil
	case plan.Bool:
		if len(b) < 1 {
			return 0, errCorruptAcc
		}
		return 1, nil
	case plan.Varchar:
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return 0, errCorruptAcc
		}
		return n + int(l), nil
	}
	_, n := binary.Varint(b)
	if n <= 0 {
		return 0, errCorruptAcc
	}
	return n, nil
}

// decodeValue is the value b encodes (valueLen checked it).
func decodeValue(k plan.Kind, b []byte) row.Value {
	switch k {
	case plan.Float32, plan.Float64:
		return row.Float(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	case plan.Bool:
		return row.Bool(b[0] == 1)
	case plan.Varchar:
		l, n := binary.Uvarint(b)
		return row.Str(string(b[n : n+int(l)]))
	}
	v, _ := binary.Varint(b)
	return row.Int(v)
}

// compareEncoded orders two encoded values as SQL does: numbers and times
// by value (NaN above every float, as PostgreSQL has it), false before
// true, strings bytewise (the C collation).
func compareEncoded(k plan.Kind, x, y []byte) int {
	switch k {
	case plan.Float32, plan.Float64:
		a := math.Float64frombits(binary.LittleEndian.Uint64(x))
		b := math.Float64frombits(binary.LittleEndian.Uint64(y))
		switch an, bn := a != a, b != b; {
		case an || bn:
			return compareBool(an, bn)
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	case plan.Bool:
		return compareBool(x[0] == 1, y[0] == 1)
	case plan.Varchar:
		l, n := binary.Uvarint(x)
		m, k := binary.Uvarint(y)
		return bytes.Compare(x[n:n+int(l)], y[k:k+int(m)])
	}
	a, _ := binary.Varint(x)
	b, _ := binary.Varint(y)
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}

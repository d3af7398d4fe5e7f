package expr

import (
	"errors"
	"math"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

// resolveArith types + - * / % and mod.
func resolveArith(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
	if len(args) != 2 {
		return nil, plan.Type{}, undefined(fn, args)
	}
	a, b := args[0], args[1]
	switch {
	case a.Kind == plan.Null && b.Kind != plan.Null:
		a = nullPartner(fn, b, true)
	case b.Kind == plan.Null && a.Kind != plan.Null:
		b = nullPartner(fn, a, false)
	}
	if a.Numeric() && b.Numeric() {
		t, _ := common(a, b)
		want := []plan.Type{operand(a, t), operand(b, t)}
		switch {
		case isFloat(t.Kind):
			if fn == "%" || fn == "mod" {
				return nil, t, undefined(fn, args)
			}
			return want, t, nil
		case t.Kind == plan.Decimal:
			sa, sb := scaleOf(want[0]), scaleOf(want[1])
			switch fn {
			case "*":
				return want, numeric(sa + sb), nil
			case "/":
				return want, numeric(max(sa, sb, 6)), nil
			}
			return want, numeric(max(sa, sb)), nil
		}
		return want, t, nil
	}
	if want, res, ok := resolveTimeArith(fn, a, b); ok {
		return want, res, nil
	}
	return nil, plan.Type{}, undefined(fn, args)
}

// nullPartner is the type a NULL operand takes beside an operand of type
// other: an interval added to or subtracted from a time, a number
// multiplying or dividing an interval, else other's type.
func nullPartner(fn string, other plan.Type, left bool) plan.Type {
	switch {
	case isTime(other.Kind) && (fn == "+" || fn == "-" && !left):
		return interval
	case other.Kind == plan.Interval && (fn == "*" || fn == "/" && !left):
		return double
	}
	return other
}

// resolveTimeArith types the arithmetic of dates, timestamps and
// intervals.
func resolveTimeArith(fn string, a, b plan.Type) ([]plan.Type, plan.Type, bool) {
	ak, bk := a.Kind, b.Kind
	ts := func(t plan.Type) plan.Type {
		if t.Kind == plan.Date {
			return timestamp
		}
		return t
	}
	switch fn {
	case "+":
		switch {
		case ak == plan.Date && isInt(bk), isInt(ak) && bk == plan.Date:
			return []plan.Type{a, b}, plan.Type{Kind: plan.Date}, true
		case isTime(ak) && bk == plan.Interval:
			return []plan.Type{ts(a), b}, ts(a), true
		case ak == plan.Interval && isTime(bk):
			return []plan.Type{a, ts(b)}, ts(b), true
		case ak == plan.Interval && bk == plan.Interval:
			return []plan.Type{a, b}, interval, true
		}
	case "-":
		switch {
		case ak == plan.Date && isInt(bk):
			return []plan.Type{a, b}, plan.Type{Kind: plan.Date}, true
		case ak == plan.Date && bk == plan.Date:
			return []plan.Type{a, b}, integer, true
		case isTime(ak) && bk == plan.Interval:
			return []plan.Type{ts(a), b}, ts(a), true
		case isTime(ak) && isTime(bk):
			t, _ := common(ts(a), ts(b))
			return []plan.Type{operand(ts(a), t), operand(ts(b), t)}, interval, true
		case ak == plan.Interval && bk == plan.Interval:
			return []plan.Type{a, b}, interval, true
		}
	case "*", "/":
		// A number multiplies an interval exactly when an integer, else
		// as a DOUBLE PRECISION.
		factor := func(t plan.Type) plan.Type {
			if t.Kind == plan.Decimal {
				return double
			}
			return t
		}
		switch {
		case ak == plan.Interval && b.Numeric():
			return []plan.Type{a, factor(b)}, interval, true
		case fn == "*" && a.Numeric() && bk == plan.Interval:
			return []plan.Type{factor(a), b}, interval, true
		}
	}
	return nil, plan.Type{}, false
}

// binary is a strict binary function: NULL when either argument is.
func binary(a, b Eval, op func(x, y row.Value) (row.Value, error)) Eval {
	return func(r row.Row) (row.Value, error) {
		x, err := a(r)
		if err != nil || x.IsNull() {
			return x, err
		}
		y, err := b(r)
		if err != nil || y.IsNull() {
			return y, err
		}
		return op(x, y)
	}
}

// unary is a strict function of one argument.
func unary(a Eval, op func(x row.Value) (row.Value, error)) Eval {
	return func(r row.Row) (row.Value, error) {
		x, err := a(r)
		if err != nil || x.IsNull() {
			return x, err
		}
		return op(x)
	}
}

func compileArith(c *call) (Eval, error) {
	a, b := c.types[0], c.types[1]
	fn := c.fn
	if fn == "mod" {
		fn = "%"
	}
	var op func(x, y row.Value) (row.Value, error)
	switch {
	case isInt(a.Kind) && isInt(b.Kind) && isInt(c.res.Kind):
		op = intArith(fn, c.res.Kind)
	case isExact(a.Kind) && isExact(b.Kind) && c.res.Kind == plan.Decimal:
		op = decArith(fn, scaleOf(a), scaleOf(b), scaleOf(c.res))
	case isFloat(a.Kind) && isFloat(b.Kind):
		op = floatArith(fn, c.res.Kind == plan.Float32)
	default:
		op = timeArith(fn, a, b)
	}
	return binary(c.evals[0], c.evals[1], op), nil
}

// rangeErrors are the errors of integer results out of their kind's
// range.
var rangeErrors = map[plan.Kind]error{
	plan.Int16: errors.New("smallint out of range"),
	plan.Int32: errors.New("integer out of range"),
	plan.Int64: errors.New("bigint out of range"),
}

func fitsInt(k plan.Kind, n int64) bool {
	switch k {
	case plan.Int16:
		return n == int64(int16(n))
	case plan.Int32:
		return n == int64(int32(n))
	}
	return true
}

// intArith is an integer operator with results of kind k.
func intArith(fn string, k plan.Kind) func(x, y row.Value) (row.Value, error) {
	errRange := rangeErrors[k]
	check := func(n int64, ok bool) (row.Value, error) {
		if !ok || !fitsInt(k, n) {
			return row.Value{}, errRange
		}
		return row.Int(n), nil
	}
	switch fn {
	case "+":
		return func(x, y row.Value) (row.Value, error) { return check(add64(x.Int(), y.Int())) }
	case "-":
		return func(x, y row.Value) (row.Value, error) { return check(sub64(x.Int(), y.Int())) }
	case "*":
		return func(x, y row.Value) (row.Value, error) { return check(mul64(x.Int(), y.Int())) }
	case "/":
		return func(x, y row.Value) (row.Value, error) {
			switch d := y.Int(); d {
			case 0:
				return row.Value{}, errDivZero
			case -1:
				return check(sub64(0, x.Int()))
			default:
				return row.Int(x.Int() / d), nil
			}
		}
	}
	return func(x, y row.Value) (row.Value, error) {
		switch d := y.Int(); d {
		case 0:
			return row.Value{}, errDivZero
		case -1:
			return row.Int(0), nil
		default:
			return row.Int(x.Int() % d), nil
		}
	}
}

// decArith is a NUMERIC operator on operands of scales sa and sb with
// results of scale rs.
func decArith(fn string, sa, sb, rs int) func(x, y row.Value) (row.Value, error) {
	result := func(n int64, err error) (row.Value, error) {
		if err != nil {
			return row.Value{}, err
		}
		return row.Int(n), nil
	}
	// Operands aligned to a common scale.
	align := func(x, y row.Value, s int) (int64, int64, error) {
		a, err := rescale(x.Int(), sa, s)
		if err != nil {
			return 0, 0, err
		}
		b, err := rescale(y.Int(), sb, s)
		return a, b, err
	}
	switch fn {
	case "+", "-":
		s := max(sa, sb)
		sub := fn == "-"
		return func(x, y row.Value) (row.Value, error) {
			a, b, err := align(x, y, s)
			if err != nil {
				return row.Value{}, err
			}
			var n int64
			var ok bool
			if sub {
				n, ok = sub64(a, b)
			} else {
				n, ok = add64(a, b)
			}
			if !ok {
				return row.Value{}, errOverflow
			}
			return result(rescale(n, s, rs))
		}
	case "*":
		shift := sa + sb - rs
		return func(x, y row.Value) (row.Value, error) { return result(decMul(x.Int(), y.Int(), shift)) }
	case "/":
		k := rs - sa + sb
		return func(x, y row.Value) (row.Value, error) { return result(decDiv(x.Int(), y.Int(), k)) }
	}
	s := max(sa, sb)
	return func(x, y row.Value) (row.Value, error) {
		a, b, err := align(x, y, s)
		switch {
		case err != nil:
			return row.Value{}, err
		case b == 0:
			return row.Value{}, errDivZero
		case b == -1:
			return row.Int(0), nil
		}
		return result(rescale(a%b, s, rs))
	}
}

var (
	errFloatOverflow  = errors.New("value out of range: overflow")
	errFloatUnderflow = errors.New("value out of range: underflow")
)

// floatResult checks a float operator's result r of operands a and b as
// PostgreSQL does: infinity only from an infinity, zero (for * and /)
// only from a zero.
func floatResult(r, a, b float64, f32, zeroCheck bool) (row.Value, error) {
	if f32 {
		r = float64(float32(r))
	}
	switch {
	case math.IsInf(r, 0) && !math.IsInf(a, 0) && !math.IsInf(b, 0):
		return row.Value{}, errFloatOverflow
	case zeroCheck && r == 0 && a != 0 && b != 0 && !math.IsInf(b, 0):
		return row.Value{}, errFloatUnderflow
	}
	return row.Float(r), nil
}

func floatArith(fn string, f32 bool) func(x, y row.Value) (row.Value, error) {
	switch fn {
	case "+":
		return func(x, y row.Value) (row.Value, error) {
			a, b := x.Float(), y.Float()
			return floatResult(a+b, a, b, f32, false)
		}
	case "-":
		return func(x, y row.Value) (row.Value, error) {
			a, b := x.Float(), y.Float()
			return floatResult(a-b, a, b, f32, false)
		}
	case "*":
		return func(x, y row.Value) (row.Value, error) {
			a, b := x.Float(), y.Float()
			return floatResult(a*b, a, b, f32, true)
		}
	}
	return func(x, y row.Value) (row.Value, error) {
		a, b := x.Float(), y.Float()
		if b == 0 && !math.IsNaN(a) {
			return row.Value{}, errDivZero
		}
		return floatResult(a/b, a, b, f32, true)
	}
}

var (
	errDateRange      = errors.New("date out of range")
	errTimestampRange = errors.New("timestamp out of range")
	errIntervalRange  = errors.New("interval out of range")
)

// checked is an integer result, or err when it overflowed.
func checked(n int64, ok bool, err error) (row.Value, error) {
	if !ok {
		return row.Value{}, err
	}
	return row.Int(n), nil
}

// timeArith is an operator on dates, timestamps and intervals, as
// resolveTimeArith typed it.
func timeArith(fn string, a, b plan.Type) func(x, y row.Value) (row.Value, error) {
	ak, bk := a.Kind, b.Kind
	switch {
	case ak == plan.Date && bk == plan.Date:
		errRange := rangeErrors[plan.Int32]
		return func(x, y row.Value) (row.Value, error) {
			n, ok := sub64(x.Int(), y.Int())
			return checked(n, ok && fitsInt(plan.Int32, n), errRange)
		}
	case ak == plan.Date || bk == plan.Date:
		if fn == "-" {
			return func(x, y row.Value) (row.Value, error) {
				n, ok := sub64(x.Int(), y.Int())
				return checked(n, ok, errDateRange)
			}
		}
		return func(x, y row.Value) (row.Value, error) {
			n, ok := add64(x.Int(), y.Int())
			return checked(n, ok, errDateRange)
		}
	case fn == "*" || fn == "/":
		iv, num := 0, b
		if bk == plan.Interval {
			iv, num = 1, a
		}
		return scaleInterval(fn, iv, isFloat(num.Kind))
	}
	errRange := errTimestampRange
	if isTimestamp(ak) && isTimestamp(bk) || ak == plan.Interval && bk == plan.Interval {
		errRange = errIntervalRange
	}
	if fn == "-" {
		return func(x, y row.Value) (row.Value, error) {
			n, ok := sub64(x.Int(), y.Int())
			return checked(n, ok, errRange)
		}
	}
	return func(x, y row.Value) (row.Value, error) {
		n, ok := add64(x.Int(), y.Int())
		return checked(n, ok, errRange)
	}
}

// scaleInterval multiplies or divides an interval (argument iv) by a
// number, exactly when an integer, else rounding to the microsecond.
func scaleInterval(fn string, iv int, float bool) func(x, y row.Value) (row.Value, error) {
	return func(x, y row.Value) (row.Value, error) {
		us, num := x, y
		if iv == 1 {
			us, num = y, x
		}
		if !float {
			n := num.Int()
			if fn == "*" {
				p, ok := mul64(us.Int(), n)
				return checked(p, ok, errIntervalRange)
			}
			if n == 0 {
				return row.Value{}, errDivZero
			}
			q, ok := signed(divRound(abs64(us.Int()), abs64(n)), (us.Int() < 0) != (n < 0))
			return checked(q, ok, errIntervalRange)
		}
		f, p := num.Float(), 0.0
		if fn == "/" {
			if f == 0 {
				return row.Value{}, errDivZero
			}
			p = math.Round(float64(us.Int()) / f)
		} else {
			p = math.Round(float64(us.Int()) * f)
		}
		if math.IsNaN(p) || p < math.MinInt64 || p >= math.MaxInt64 {
			return row.Value{}, errIntervalRange
		}
		return row.Int(int64(p)), nil
	}
}

// resolveNeg types neg (numbers and intervals) and abs (numbers).
func resolveNeg(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
	if len(args) != 1 {
		return nil, plan.Type{}, undefined(fn, args)
	}
	switch a := args[0]; {
	case a.Kind == plan.Null:
		return []plan.Type{double}, double, nil
	case a.Numeric(), fn == "neg" && a.Kind == plan.Interval:
		return args[:1:1], a, nil
	}
	return nil, plan.Type{}, undefined(fn, args)
}

func compileNeg(c *call) (Eval, error) {
	var op func(x row.Value) (row.Value, error)
	switch k := c.res.Kind; {
	case isFloat(k):
		op = func(x row.Value) (row.Value, error) { return row.Float(-x.Float()), nil }
	default:
		errRange := errIntervalRange
		switch {
		case isInt(k):
			errRange = rangeErrors[k]
		case k == plan.Decimal:
			errRange = errOverflow
		}
		op = func(x row.Value) (row.Value, error) {
			n, ok := sub64(0, x.Int())
			return checked(n, ok && fitsInt(k, n), errRange)
		}
	}
	return unary(c.evals[0], op), nil
}

func compileAbs(c *call) (Eval, error) {
	var op func(x row.Value) (row.Value, error)
	switch k := c.res.Kind; {
	case isFloat(k):
		op = func(x row.Value) (row.Value, error) { return row.Float(math.Abs(x.Float())), nil }
	default:
		errRange := errOverflow
		if isInt(k) {
			errRange = rangeErrors[k]
		}
		op = func(x row.Value) (row.Value, error) {
			n, ok := signed(abs64(x.Int()), false)
			return checked(n, ok && fitsInt(k, n), errRange)
		}
	}
	return unary(c.evals[0], op), nil
}

// resolveRound types round, floor and ceil: of a NUMERIC, a NUMERIC of
// scale 0; of an integer or float, its own type; round(x, digits), of an
// exact x only, a NUMERIC of x's scale (see ResolveCall).
func resolveRound(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
	a := plan.Type{Kind: plan.Decimal}
	if len(args) > 0 && args[0].Kind != plan.Null {
		a = args[0]
	}
	switch {
	case len(args) == 1 && a.Kind == plan.Decimal:
		return []plan.Type{a}, numeric(0), nil
	case len(args) == 1 && a.Numeric():
		return []plan.Type{a}, a, nil
	case len(args) == 2 && fn == "round" && isExact(a.Kind) && (isInt(args[1].Kind) || args[1].Kind == plan.Null):
		n := args[1]
		if n.Kind == plan.Null {
			n = integer
		}
		return []plan.Type{a, n}, numeric(scaleOf(a)), nil
	}
	return nil, plan.Type{}, undefined(fn, args)
}

func compileRound(c *call) (Eval, error) {
	a := c.types[0]
	if len(c.args) == 2 {
		s, rs := scaleOf(a), scaleOf(c.res)
		return binary(c.evals[0], c.evals[1], func(x, y row.Value) (row.Value, error) {
			n := int(max(min(y.Int(), 40), -40))
			m, err := rescale(x.Int(), s, min(n, s))
			if err == nil {
				m, err = rescale(m, min(n, s), rs)
			}
			if err != nil {
				return row.Value{}, err
			}
			return row.Int(m), nil
		}), nil
	}
	switch k := a.Kind; {
	case isInt(k):
		return c.evals[0], nil
	case isFloat(k):
		f := map[string]func(float64) float64{"round": math.RoundToEven, "floor": math.Floor, "ceil": math.Ceil}[c.fn]
		return unary(c.evals[0], func(x row.Value) (row.Value, error) { return row.Float(f(x.Float())), nil }), nil
	}
	// The result's scale is 0, or, for round, whichever the call's type
	// says.
	s, rs := scaleOf(a), scaleOf(c.res)
	op := func(m int64) (int64, error) { return rescale(m, s, 0) }
	if c.fn != "round" && s > 0 {
		up := c.fn == "ceil"
		op = func(m int64) (int64, error) {
			// Truncate toward zero, then step away from it when the
			// dropped digits lay on the side asked for.
			q, frac := int64(0), m
			if s < len(pow10)-1 {
				q, frac = m/int64(pow10[s]), m%int64(pow10[s])
			}
			switch {
			case frac > 0 && up:
				q++
			case frac < 0 && !up:
				q--
			}
			return q, nil
		}
	}
	return unary(c.evals[0], func(x row.Value) (row.Value, error) {
		m, err := op(x.Int())
		if err == nil {
			m, err = rescale(m, 0, rs)
		}
		if err != nil {
			return row.Value{}, err
		}
		return row.Int(m), nil
	}), nil
}

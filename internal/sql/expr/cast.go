package expr

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

func compileCast(c *call) (Eval, error) {
	op, err := castOp(c.types[0], c.res)
	if err != nil {
		return nil, err
	}
	if op == nil {
		return c.evals[0], nil
	}
	return unary(c.evals[0], op), nil
}

// castOp converts a value of type from to type to: nil when the value
// stays as it is, an error when no cast exists. To and from VARCHAR go
// through package row's text (a BOOLEAN becomes 'true' or 'false', as
// PostgreSQL casts it); numbers round half away from zero, except floats
// to integers, which round half to even as PostgreSQL's rint does.
func castOp(from, to plan.Type) (func(row.Value) (row.Value, error), error) {
	fk, tk := from.Kind, to.Kind
	switch {
	case from == to, fk == plan.Null,
		isTimestamp(fk) && isTimestamp(tk),
		fk == plan.Float32 && tk == plan.Float64:
		return nil, nil
	case tk == plan.Varchar:
		if fk == plan.Bool {
			return func(v row.Value) (row.Value, error) { return row.Str(strconv.FormatBool(v.Bool())), nil }, nil
		}
		return func(v row.Value) (row.Value, error) { return row.Str(string(row.AppendText(nil, from, v))), nil }, nil
	case fk == plan.Varchar && tk != plan.Null:
		return func(v row.Value) (row.Value, error) { return row.ParseText(to, v.Str()) }, nil
	case isExact(fk) && isExact(tk):
		return exactCast(from, to), nil
	case isExact(fk) && isFloat(tk):
		s, f32 := scaleOf(from), tk == plan.Float32
		return func(v row.Value) (row.Value, error) {
			if f32 && (s != 0 || abs64(v.Int()) >= 1<<53) {
				// float32(float64(x)) could round twice.
				return row.ParseText(to, string(row.AppendText(nil, from, v)))
			}
			f := decToFloat(v.Int(), s)
			if f32 {
				f = float64(float32(f))
			}
			return row.Float(f), nil
		}, nil
	case fk == plan.Float64 && tk == plan.Float32:
		return func(v row.Value) (row.Value, error) {
			f := v.Float()
			return floatResult(f, f, 1, true, true)
		}, nil
	case isFloat(fk) && isInt(tk):
		errRange := rangeErrors[tk]
		return func(v row.Value) (row.Value, error) {
			f := math.RoundToEven(v.Float())
			if !(f >= math.MinInt64 && f < math.MaxInt64) || !fitsInt(tk, int64(f)) {
				return row.Value{}, errRange
			}
			return row.Int(int64(f)), nil
		}, nil
	case isFloat(fk) && tk == plan.Decimal:
		// PostgreSQL converts a float's 15 significant digits (6 for a
		// REAL), not its binary value.
		digits := 15
		if fk == plan.Float32 {
			digits = 6
		}
		return func(v row.Value) (row.Value, error) {
			f := v.Float()
			switch {
			case math.IsNaN(f):
				return row.Value{}, errors.New("cannot convert NaN to numeric")
			case math.IsInf(f, 0):
				return row.Value{}, errors.New("cannot convert infinity to numeric")
			}
			var buf [32]byte
			return row.ParseText(to, string(strconv.AppendFloat(buf[:0], f, 'g', digits, 64)))
		}, nil
	case fk == plan.Bool && isInt(tk):
		return func(v row.Value) (row.Value, error) { return row.Int(v.Int()), nil }, nil
	case isInt(fk) && tk == plan.Bool:
		return func(v row.Value) (row.Value, error) { return row.Bool(v.Int() != 0), nil }, nil
	case fk == plan.Date && isTimestamp(tk):
		return func(v row.Value) (row.Value, error) {
			us, ok := mul64(v.Int(), usPerDay)
			return checked(us, ok, errTimestampRange)
		}, nil
	case isTimestamp(fk) && tk == plan.Date:
		return func(v row.Value) (row.Value, error) { return row.Int(floorDiv(v.Int(), usPerDay)), nil }, nil
	}
	return nil, fmt.Errorf("cannot cast type %s to %s", from, to)
}

const usPerDay = 86_400_000_000

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// exactCast converts between integers and NUMERICs.
func exactCast(from, to plan.Type) func(row.Value) (row.Value, error) {
	sf, st := scaleOf(from), scaleOf(to)
	errRange := errOverflow
	if isInt(to.Kind) {
		errRange = rangeErrors[to.Kind]
	}
	return func(v row.Value) (row.Value, error) {
		m, err := rescale(v.Int(), sf, st)
		if err != nil || !fitsInt(to.Kind, m) {
			return row.Value{}, errRange
		}
		return row.Int(m), nil
	}
}

package expr

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/weirproject/weir/internal/sql/plan"
)

var (
	null        = plan.Type{Kind: plan.Null}
	boolean     = plan.Type{Kind: plan.Bool}
	integer     = plan.Type{Kind: plan.Int32}
	bigint      = plan.Type{Kind: plan.Int64}
	double      = plan.Type{Kind: plan.Float64}
	varchar     = plan.Type{Kind: plan.Varchar}
	timestamp   = plan.Type{Kind: plan.Timestamp}
	timestamptz = plan.Type{Kind: plan.TimestampTZ}
	interval    = plan.Type{Kind: plan.Interval}
)

func numeric(scale int) plan.Type {
	return plan.Type{Kind: plan.Decimal, Scale: int8(min(max(scale, -maxScale), maxScale))}
}

// Resolve types a call of function or operator fn on arguments of types
// args, as PostgreSQL would: want is the types the arguments must have
// (the planner casts an argument where want[i] != args[i]; a NULL
// literal, of the NULL type, adapts to the other arguments), result the
// call's type. For "cast", args is the source and target types.
//
// The rules: numbers promote SMALLINT < INTEGER < BIGINT < NUMERIC <
// REAL < DOUBLE PRECISION (see the package comment for the pairs that
// need no cast); integer division truncates; NUMERIC arithmetic is exact
// with results of scale max(s1, s2) for + - %, s1+s2 for *, max(s1, s2,
// 6) for / (at most 18, rounding half away from zero); DATE < TIMESTAMP
// < TIMESTAMPTZ promote in comparisons; a CASE's, COALESCE's or IN's
// values meet in one type. The errors are PostgreSQL's: "operator does
// not exist: VARCHAR + BIGINT", "function lower(BIGINT) does not exist".
func Resolve(fn string, args []plan.Type) (want []plan.Type, result plan.Type, err error) {
	if fn == "cast" {
		if len(args) != 2 {
			return nil, plan.Type{}, fmt.Errorf("cast takes a source and a target type, not %d types", len(args))
		}
		if _, err := castOp(args[0], args[1]); err != nil {
			return nil, plan.Type{}, err
		}
		return args[:1:1], args[1], nil
	}
	f, ok := functions[fn]
	if !ok {
		return nil, plan.Type{}, undefined(fn, args)
	}
	return f.resolve(fn, args)
}

// ResolveCall is Resolve with the arguments themselves, for the calls
// whose result type depends on a constant argument, as in PostgreSQL:
// extract's field (NUMERIC of scale 6 for second and epoch, 3 for
// millisecond, else 0, where Resolve says 6 for all), and round's digits
// (round(12.345, 1) is NUMERIC of scale 1, where Resolve keeps the
// argument's scale).
func ResolveCall(fn string, args []plan.Expr) (want []plan.Type, result plan.Type, err error) {
	types := make([]plan.Type, len(args))
	for i, a := range args {
		types[i] = a.Type
	}
	if want, result, err = Resolve(fn, types); err != nil {
		return want, result, err
	}
	switch {
	case fn == "extract" && args[0].Op == plan.OpConst:
		if f, ok := extractFields[strings.ToLower(args[0].Lit)]; ok {
			result = numeric(f.scale)
		}
	case fn == "round" && len(args) == 2 && result.Kind == plan.Decimal && args[1].Op == plan.OpConst && !args[1].IsNull:
		if n, err := strconv.Atoi(args[1].Lit); err == nil {
			result = numeric(max(n, 0))
		}
	}
	return want, result, nil
}

// maxScale is the largest NUMERIC scale a result gets: a 64-bit
// mantissa holds 18 digits.
const maxScale = 18

func isInt(k plan.Kind) bool   { return k == plan.Int16 || k == plan.Int32 || k == plan.Int64 }
func isExact(k plan.Kind) bool { return isInt(k) || k == plan.Decimal }
func isFloat(k plan.Kind) bool { return k == plan.Float32 || k == plan.Float64 }
func isTime(k plan.Kind) bool {
	return k == plan.Date || k == plan.Timestamp || k == plan.TimestampTZ
}
func isTimestamp(k plan.Kind) bool { return k == plan.Timestamp || k == plan.TimestampTZ }

// scaleOf is an exact number's scale: an integer's is 0.
func scaleOf(t plan.Type) int {
	if t.Kind == plan.Decimal {
		return int(t.Scale)
	}
	return 0
}

// rank orders the numeric kinds by promotion.
func rank(k plan.Kind) int {
	switch k {
	case plan.Int16:
		return 1
	case plan.Int32:
		return 2
	case plan.Int64:
		return 3
	case plan.Decimal:
		return 4
	case plan.Float32:
		return 5
	case plan.Float64:
		return 6
	}
	return 0
}

// common is the type values of types a and b meet in: the higher
// numeric type (a NUMERIC of the larger scale), the later of DATE <
// TIMESTAMP < TIMESTAMPTZ, or the type both have; NULL adapts.
func common(a, b plan.Type) (plan.Type, bool) {
	switch {
	case a.Kind == plan.Null:
		return b, true
	case b.Kind == plan.Null:
		return a, true
	case a.Numeric() && b.Numeric():
		if rank(a.Kind) < rank(b.Kind) {
			a, b = b, a
		}
		if a.Kind == plan.Decimal {
			return numeric(max(scaleOf(a), scaleOf(b))), true
		}
		return a, true
	case isTime(a.Kind) && isTime(b.Kind):
		if a.Kind < b.Kind {
			return b, true
		}
		return a, true
	}
	return a, a == b
}

// operand is the type a value of type a is taken as where values meet in
// type t: itself when the runtime reads it as a t already (an integer as
// a NUMERIC, a REAL as a DOUBLE PRECISION, a TIMESTAMP as a
// TIMESTAMPTZ), else t, by a cast.
func operand(a, t plan.Type) plan.Type {
	switch {
	case isExact(a.Kind) && isExact(t.Kind),
		isFloat(a.Kind) && isFloat(t.Kind),
		isTimestamp(a.Kind) && isTimestamp(t.Kind):
		return a
	}
	return t
}

// operators are the symbols of the functions that are operators, for
// messages.
var operators = map[string]string{
	"+": "+", "-": "-", "*": "*", "/": "/", "%": "%", "=": "=", "<>": "<>", "<": "<", "<=": "<=",
	">": ">", ">=": ">=", "||": "||", "like": "LIKE", "not_like": "NOT LIKE", "ilike": "ILIKE", "neg": "-",
}

// undefined is the error for a function or operator that does not take
// arguments of types args.
func undefined(fn string, args []plan.Type) error {
	if op, ok := operators[fn]; ok {
		switch len(args) {
		case 1:
			return fmt.Errorf("operator does not exist: %s %s", op, args[0])
		case 2:
			if args[0].Kind == plan.Null && args[1].Kind == plan.Null {
				return fmt.Errorf("operator is not unique: NULL %s NULL", op)
			}
			return fmt.Errorf("operator does not exist: %s %s %s", args[0], op, args[1])
		}
	}
	return fmt.Errorf("function %s does not exist", sig(fn, args))
}

func sig(fn string, args []plan.Type) string {
	names := make([]string, len(args))
	for i, a := range args {
		names[i] = a.String()
	}
	return fn + "(" + strings.Join(names, ", ") + ")"
}

// param is what a function's parameter accepts.
type param uint8

const (
	pText    param = iota // VARCHAR
	pInt                  // any integer, as it is
	pOptText              // an optional trailing VARCHAR
	pOptInt               // an optional trailing integer
)

// signature is the typing of a function of fixed parameters and result.
func signature(res plan.Type, params ...param) func(string, []plan.Type) ([]plan.Type, plan.Type, error) {
	return func(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
		if len(args) > len(params) {
			return nil, res, undefined(fn, args)
		}
		want := make([]plan.Type, len(args))
		for i, p := range params {
			if i >= len(args) {
				if p == pText || p == pInt {
					return nil, res, undefined(fn, args)
				}
				break
			}
			switch a := args[i]; {
			case (p == pText || p == pOptText) && (a.Kind == plan.Varchar || a.Kind == plan.Null):
				want[i] = varchar
			case (p == pInt || p == pOptInt) && isInt(a.Kind):
				want[i] = a
			case (p == pInt || p == pOptInt) && a.Kind == plan.Null:
				want[i] = integer
			default:
				return nil, res, undefined(fn, args)
			}
		}
		return want, res, nil
	}
}

// Package expr is the SQL function library: the typing rules the planner
// binds calls by (Resolve) and the compiler of typed expressions
// (plan.Expr) into trees of closures the operators run per row (Compile).
// What a call computes is chosen once, at compile time, from its
// arguments' types; a row only runs the chosen closures.
//
// Values follow package row's representation. An integer is, to the
// runtime, a NUMERIC of scale 0, and a REAL a float64 that happens to be
// a float32: so integers of different widths, integers and NUMERICs of
// any scale, REAL and DOUBLE PRECISION, and TIMESTAMP and TIMESTAMPTZ
// (both microseconds in UTC, the session time zone) meet in arithmetic
// and comparisons without casts. Every other conversion is a cast the
// planner inserts where Resolve asks for one.
package expr

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

// Eval computes an expression over a row. It is safe for concurrent use.
type Eval func(r row.Row) (row.Value, error)

// Compile builds e's closures. The arguments of its calls must have the
// types Resolve wants (the planner casts them), and each call the type
// Resolve gives it; a constant pattern (LIKE, regular expressions) or
// format (to_char) is compiled here, once.
func Compile(e plan.Expr) (Eval, error) {
	ev, err := compile(e)
	if err != nil {
		return nil, fmt.Errorf("expr: %w", err)
	}
	return ev, nil
}

// CompilePredicate compiles a BOOLEAN expression as a WHERE clause reads
// it: NULL is false.
func CompilePredicate(e plan.Expr) (func(row.Row) (bool, error), error) {
	if e.Type.Kind != plan.Bool && e.Type.Kind != plan.Null {
		return nil, fmt.Errorf("expr: a condition must be BOOLEAN, not %s", e.Type)
	}
	ev, err := Compile(e)
	if err != nil {
		return nil, err
	}
	return func(r row.Row) (bool, error) {
		v, err := ev(r)
		return !v.IsNull() && v.Bool(), err
	}, nil
}

// Literal is the value of a constant of type t with canonical text lit
// (see plan.Expr.Lit).
func Literal(t plan.Type, lit string, isNull bool) (row.Value, error) {
	if isNull || t.Kind == plan.Null {
		return row.Null(), nil
	}
	var v row.Value
	var err error
	switch t.Kind {
	case plan.Bool:
		var b bool
		b, err = strconv.ParseBool(lit)
		v = row.Bool(b)
	case plan.Float32, plan.Float64:
		var f float64
		f, err = strconv.ParseFloat(lit, 64)
		if t.Kind == plan.Float32 {
			f = float64(float32(f))
		}
		v = row.Float(f)
	case plan.Varchar:
		v = row.Str(lit)
	default:
		var n int64
		n, err = strconv.ParseInt(lit, 10, 64)
		if err == nil && !fitsInt(t.Kind, n) {
			err = errors.New("out of range")
		}
		v = row.Int(n)
	}
	if err != nil {
		return row.Value{}, fmt.Errorf("constant %q of type %s: %w", lit, t, err)
	}
	return v, nil
}

// call is a function call being compiled: its arguments' expressions,
// closures and types, and its result type.
type call struct {
	fn    string
	args  []plan.Expr
	evals []Eval
	types []plan.Type
	res   plan.Type
}

// constArg is argument i's value when it is a constant.
func (c *call) constArg(i int) (row.Value, bool) {
	a := c.args[i]
	if a.Op != plan.OpConst {
		return row.Value{}, false
	}
	v, err := Literal(a.Type, a.Lit, a.IsNull)
	return v, err == nil
}

// function is one entry of the library: its typing and its compiler.
type function struct {
	resolve func(fn string, args []plan.Type) ([]plan.Type, plan.Type, error)
	compile func(c *call) (Eval, error)
	// anyScale: a NUMERIC result may have any scale the call's type says
	// (the planner may narrow it when an argument is constant, as
	// ResolveCall does), and the compiler produces it.
	anyScale bool
}

func compile(e plan.Expr) (Eval, error) {
	switch e.Op {
	case plan.OpConst:
		v, err := Literal(e.Type, e.Lit, e.IsNull)
		if err != nil {
			return nil, err
		}
		return func(row.Row) (row.Value, error) { return v, nil }, nil
	case plan.OpCol:
		i := e.Col
		if i < 0 {
			return nil, fmt.Errorf("column %d", i)
		}
		return func(r row.Row) (row.Value, error) {
			if i >= len(r) {
				return row.Value{}, fmt.Errorf("column %d of a row of %d", i, len(r))
			}
			return r[i], nil
		}, nil
	case plan.OpCall:
		return compileCall(e)
	}
	return nil, fmt.Errorf("unknown expression op %q", e.Op)
}

func compileCall(e plan.Expr) (Eval, error) {
	c := &call{fn: e.Fn, args: e.Args, types: make([]plan.Type, len(e.Args)), res: e.Type}
	for i, a := range e.Args {
		c.types[i] = a.Type
	}
	var f function
	var want []plan.Type
	var res plan.Type
	if e.Fn == "cast" {
		if len(e.Args) != 1 {
			return nil, fmt.Errorf("cast takes one argument, not %d", len(e.Args))
		}
		f = function{compile: compileCast}
		want, res = c.types, e.Type
	} else {
		var ok bool
		if f, ok = functions[e.Fn]; !ok {
			return nil, undefined(e.Fn, c.types)
		}
		var err error
		if want, res, err = f.resolve(e.Fn, c.types); err != nil {
			return nil, err
		}
	}
	for i := range want {
		if want[i] != c.types[i] {
			return nil, fmt.Errorf("%s: argument %d is %s, not the %s it takes (a missing cast)", e.Fn, i+1, c.types[i], want[i])
		}
	}
	if res != e.Type && !(f.anyScale && res.Kind == plan.Decimal && e.Type.Kind == plan.Decimal) {
		return nil, fmt.Errorf("%s returns %s, not %s", sig(e.Fn, c.types), res, e.Type)
	}
	c.evals = make([]Eval, len(e.Args))
	for i, a := range e.Args {
		var err error
		if c.evals[i], err = compile(a); err != nil {
			return nil, err
		}
	}
	return f.compile(c)
}

// functions is the library, by the names plan.OpCall lists.
var functions map[string]function

func init() {
	functions = map[string]function{
		"+": {resolve: resolveArith, compile: compileArith},
		"-": {resolve: resolveArith, compile: compileArith},
		"*": {resolve: resolveArith, compile: compileArith},
		"/": {resolve: resolveArith, compile: compileArith},
		"%": {resolve: resolveArith, compile: compileArith},

		"mod": {resolve: resolveArith, compile: compileArith},
		"neg": {resolve: resolveNeg, compile: compileNeg},
		"abs": {resolve: resolveNeg, compile: compileAbs},

		"round": {resolve: resolveRound, compile: compileRound, anyScale: true},
		"floor": {resolve: resolveRound, compile: compileRound},
		"ceil":  {resolve: resolveRound, compile: compileRound},

		"=":  {resolve: resolveCompare, compile: compileCompare},
		"<>": {resolve: resolveCompare, compile: compileCompare},
		"<":  {resolve: resolveCompare, compile: compileCompare},
		"<=": {resolve: resolveCompare, compile: compileCompare},
		">":  {resolve: resolveCompare, compile: compileCompare},
		">=": {resolve: resolveCompare, compile: compileCompare},
		"in": {resolve: resolveIn, compile: compileIn},

		"and":         {resolve: resolveLogic, compile: compileAndOr},
		"or":          {resolve: resolveLogic, compile: compileAndOr},
		"not":         {resolve: resolveLogic, compile: compileNot},
		"is_true":     {resolve: resolveLogic, compile: compileIsBool},
		"is_false":    {resolve: resolveLogic, compile: compileIsBool},
		"is_null":     {resolve: resolveIsNull, compile: compileIsNull},
		"is_not_null": {resolve: resolveIsNull, compile: compileIsNull},
		"case":        {resolve: resolveCase, compile: compileCase},
		"coalesce":    {resolve: resolveCoalesce, compile: compileCoalesce},

		"||":                 {resolve: resolveConcatOp, compile: compileConcat},
		"concat":             {resolve: resolveConcat, compile: compileConcat},
		"like":               {resolve: signature(boolean, pText, pText), compile: compileLike},
		"not_like":           {resolve: signature(boolean, pText, pText), compile: compileLike},
		"ilike":              {resolve: signature(boolean, pText, pText), compile: compileLike},
		"lower":              {resolve: signature(varchar, pText), compile: compileCase1},
		"upper":              {resolve: signature(varchar, pText), compile: compileCase1},
		"substr":             {resolve: signature(varchar, pText, pInt, pOptInt), compile: compileSubstr},
		"split_part":         {resolve: signature(varchar, pText, pText, pInt), compile: compileSplitPart},
		"char_length":        {resolve: signature(integer, pText), compile: compileCharLength},
		"regexp_match_group": {resolve: signature(varchar, pText, pText, pInt), compile: compileRegexp},
		"regexp_extract":     {resolve: signature(varchar, pText, pText, pInt), compile: compileRegexp},
		"trim":               {resolve: signature(varchar, pText, pOptText), compile: compileTrim},
		"ltrim":              {resolve: signature(varchar, pText, pOptText), compile: compileTrim},
		"rtrim":              {resolve: signature(varchar, pText, pOptText), compile: compileTrim},
		"replace":            {resolve: signature(varchar, pText, pText, pText), compile: compileReplace},
		"position":           {resolve: signature(integer, pText, pText), compile: compilePosition},

		"date_trunc": {resolve: resolveDateTrunc, compile: compileDateTrunc},
		"extract":    {resolve: resolveExtract, compile: compileExtract, anyScale: true},
		"to_char":    {resolve: resolveToChar, compile: compileToChar},
		"now":        {resolve: signature(timestamptz), compile: compileNow},
	}
}

package compile

import (
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/weirproject/weir/internal/sql/expr"
	"github.com/weirproject/weir/internal/sql/plan"
)

// untyped marks a string literal no context has typed yet.
const untyped = "untyped"

// scope is the columns an expression can name.
type scope struct {
	cols []col
	// aggs, when set, is where aggregate calls of a SELECT with GROUP BY
	// go: the call is bound against cols, added, and stands in the
	// expression as a placeholder column (aggBase + its index).
	aggs    *[]aggRef
	aggBase int
}

// aggRef is an aggregate call found in a select list or HAVING.
type aggRef struct {
	fn       plan.AggFunc
	arg      *plan.Expr // nil: count(*)
	filter   *plan.Expr
	t        plan.Type
	off      int
	distinct bool
}

// binder binds expressions of one script.
type binder struct {
	s   *script
	cat *catalog
}

// lookup resolves a column reference.
func (b *binder) lookup(sc *scope, qual, name string, off int) (int, error) {
	found := -1
	for i, c := range sc.cols {
		if c.name != name || (qual != "" && c.qual != qual) {
			continue
		}
		if found >= 0 {
			q := sc.cols[found].qual
			return 0, b.s.errAt(off, "column reference %q is ambiguous (in %s and %s): qualify it", name, orAnon(q), orAnon(c.qual))
		}
		found = i
	}
	if found >= 0 {
		return found, nil
	}
	var cands []string
	quals := map[string]bool{}
	for _, c := range sc.cols {
		quals[c.qual] = true
		if qual == "" || c.qual == qual {
			cands = append(cands, c.name)
		}
	}
	if qual != "" && !quals[qual] {
		var qs []string
		for q := range quals {
			if q != "" {
				qs = append(qs, q)
			}
		}
		return 0, b.s.errAt(off, "missing FROM-clause entry for table %q%s", qual, didYouMean(qual, qs))
	}
	full := name
	if qual != "" {
		full = qual + "." + name
	}
	return 0, b.s.errAt(off, "column %q does not exist%s", full, didYouMean(name, cands))
}

func orAnon(q string) string {
	if q == "" {
		return "a subquery"
	}
	return q
}

// expr binds a PostgreSQL expression node.
func (b *binder) expr(sc *scope, n *pg.Node) (plan.Expr, error) {
	switch x := n.Node.(type) {
	case *pg.Node_ColumnRef:
		return b.columnRef(sc, x.ColumnRef)
	case *pg.Node_AConst:
		return b.constant(x.AConst)
	case *pg.Node_TypeCast:
		return b.typeCast(sc, x.TypeCast)
	case *pg.Node_AExpr:
		return b.aExpr(sc, x.AExpr)
	case *pg.Node_BoolExpr:
		args, err := b.exprs(sc, x.BoolExpr.Args)
		if err != nil {
			return plan.Expr{}, err
		}
		fn := map[pg.BoolExprType]string{pg.BoolExprType_AND_EXPR: "and", pg.BoolExprType_OR_EXPR: "or", pg.BoolExprType_NOT_EXPR: "not"}[x.BoolExpr.Boolop]
		return b.call(fn, int(x.BoolExpr.Location), args...)
	case *pg.Node_NullTest:
		a, err := b.expr(sc, x.NullTest.Arg)
		if err != nil {
			return plan.Expr{}, err
		}
		fn := "is_null"
		if x.NullTest.Nulltesttype == pg.NullTestType_IS_NOT_NULL {
			fn = "is_not_null"
		}
		return b.call(fn, int(x.NullTest.Location), a)
	case *pg.Node_BooleanTest:
		a, err := b.expr(sc, x.BooleanTest.Arg)
		if err != nil {
			return plan.Expr{}, err
		}
		off := int(x.BooleanTest.Location)
		switch x.BooleanTest.Booltesttype {
		case pg.BoolTestType_IS_TRUE:
			return b.call("is_true", off, a)
		case pg.BoolTestType_IS_FALSE:
			return b.call("is_false", off, a)
		case pg.BoolTestType_IS_NOT_TRUE:
			t, err := b.call("is_true", off, a)
			if err != nil {
				return t, err
			}
			return b.call("not", off, t)
		case pg.BoolTestType_IS_NOT_FALSE:
			t, err := b.call("is_false", off, a)
			if err != nil {
				return t, err
			}
			return b.call("not", off, t)
		}
		return plan.Expr{}, b.s.errAt(off, "IS UNKNOWN is not supported: write IS NULL")
	case *pg.Node_CaseExpr:
		return b.caseExpr(sc, x.CaseExpr)
	case *pg.Node_CoalesceExpr:
		args, err := b.exprs(sc, x.CoalesceExpr.Args)
		if err != nil {
			return plan.Expr{}, err
		}
		return b.call("coalesce", int(x.CoalesceExpr.Location), args...)
	case *pg.Node_FuncCall:
		return b.funcCall(sc, x.FuncCall)
	case *pg.Node_AIndirection:
		return b.indirection(sc, x.AIndirection)
	case *pg.Node_SubLink:
		return plan.Expr{}, b.s.errAt(int(x.SubLink.Location), "subqueries in expressions (IN/EXISTS/scalar subqueries) are not supported: join instead")
	case *pg.Node_SqlvalueFunction:
		off := int(x.SqlvalueFunction.Location)
		switch x.SqlvalueFunction.Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP, pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP:
			return b.call("now", off)
		}
		return plan.Expr{}, b.s.errAt(off, "this SQL value function is not supported (CURRENT_TIMESTAMP and LOCALTIMESTAMP are)")
	case *pg.Node_ParamRef:
		return plan.Expr{}, b.s.errAt(int(x.ParamRef.Location), "parameters ($n) are not supported")
	case *pg.Node_RowExpr:
		return plan.Expr{}, b.s.errAt(int(x.RowExpr.Location), "row values are not supported")
	}
	return plan.Expr{}, b.s.errAt(location(n), "unsupported expression %s", nodeName(n))
}

func (b *binder) exprs(sc *scope, ns []*pg.Node) ([]plan.Expr, error) {
	out := make([]plan.Expr, len(ns))
	for i, n := range ns {
		e, err := b.expr(sc, n)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

func (b *binder) columnRef(sc *scope, c *pg.ColumnRef) (plan.Expr, error) {
	var parts []string
	for _, f := range c.Fields {
		if _, ok := f.Node.(*pg.Node_AStar); ok {
			return plan.Expr{}, b.s.errAt(int(c.Location), "* is only allowed in a select list or count(*)")
		}
		parts = append(parts, f.GetString_().GetSval())
	}
	var qual, name string
	switch len(parts) {
	case 1:
		name = parts[0]
	case 2:
		qual, name = parts[0], parts[1]
	default:
		return plan.Expr{}, b.s.errAt(int(c.Location), "column reference %s: too many dotted names", strings.Join(parts, "."))
	}
	i, err := b.lookup(sc, qual, name, int(c.Location))
	if err != nil {
		return plan.Expr{}, err
	}
	return plan.ColRef(i, sc.cols[i].t), nil
}

// constant binds a literal: integers as INTEGER or BIGINT, decimals
// (0.908) as NUMERIC of their digits, as PostgreSQL types them.
func (b *binder) constant(c *pg.A_Const) (plan.Expr, error) {
	off := int(c.Location)
	if c.Isnull {
		return plan.Expr{Op: plan.OpConst, IsNull: true, Type: plan.Type{Kind: plan.Null}}, nil
	}
	switch v := c.Val.(type) {
	case *pg.A_Const_Ival:
		t := plan.Type{Kind: plan.Int32}
		return plan.Expr{Op: plan.OpConst, Type: t, Lit: strconv.FormatInt(int64(v.Ival.Ival), 10)}, nil
	case *pg.A_Const_Fval:
		return b.numericConst(v.Fval.Fval, off)
	case *pg.A_Const_Sval:
		// An untyped string: VARCHAR, unless what it meets wants it
		// typed otherwise (ts > '2024-01-01', as PostgreSQL's unknown
		// literals).
		return plan.Expr{Op: plan.OpConst, Type: plan.Type{Kind: plan.Varchar}, Lit: v.Sval.Sval, Fn: untyped}, nil
	case *pg.A_Const_Boolval:
		return plan.Expr{Op: plan.OpConst, Type: plan.Type{Kind: plan.Bool}, Lit: strconv.FormatBool(v.Boolval.Boolval)}, nil
	case *pg.A_Const_Bsval:
		return plan.Expr{}, b.s.errAt(off, "bit strings are not supported")
	}
	return plan.Expr{}, b.s.errAt(off, "unsupported constant")
}

// numericConst types a number with a point or exponent: an integer too
// large for INTEGER is BIGINT, anything else NUMERIC with its own scale.
func (b *binder) numericConst(text string, off int) (plan.Expr, error) {
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return plan.Expr{Op: plan.OpConst, Type: plan.Type{Kind: plan.Int64}, Lit: strconv.FormatInt(n, 10)}, nil
	}
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		return plan.Expr{}, b.s.errAt(off, "invalid number %s", text)
	}
	scale := 0
	if i := strings.IndexAny(text, "eE"); i < 0 {
		if p := strings.IndexByte(text, '.'); p >= 0 {
			scale = len(text) - p - 1
		}
	} else {
		for !new(big.Rat).Mul(r, new(big.Rat).SetFrac(pow10(scale), big.NewInt(1))).IsInt() {
			scale++
		}
	}
	if scale > 18 {
		return plan.Expr{}, b.s.errAt(off, "number %s has more than 18 digits after the point", text)
	}
	m := new(big.Rat).Mul(r, new(big.Rat).SetFrac(pow10(scale), big.NewInt(1)))
	if !m.Num().IsInt64() {
		return plan.Expr{}, b.s.errAt(off, "number %s does not fit NUMERIC's 18 digits", text)
	}
	return plan.Expr{Op: plan.OpConst, Type: plan.Type{Kind: plan.Decimal, Scale: int8(scale)}, Lit: m.Num().String()}, nil
}

func pow10(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }

// interval field masks of PostgreSQL's INTERVAL 'n' UNIT typmod.
var intervalUnits = []struct {
	mask int32
	d    time.Duration
	name string
}{
	{1 << 12, time.Second, "SECOND"}, {1 << 11, time.Minute, "MINUTE"}, {1 << 10, time.Hour, "HOUR"},
	{1 << 3, 24 * time.Hour, "DAY"},
}

func (b *binder) typeCast(sc *scope, c *pg.TypeCast) (plan.Expr, error) {
	off := int(c.Location)
	t, err := typeOf(c.TypeName)
	if err != nil {
		return plan.Expr{}, b.s.errAt(off, "%v", err)
	}
	// A typed string literal — INTERVAL '10' SECOND, TIMESTAMP '…' —
	// is folded here.
	if k := c.Arg.GetAConst(); k != nil && !k.Isnull {
		if sv, ok := k.Val.(*pg.A_Const_Sval); ok {
			text := sv.Sval.Sval
			if t.Kind == plan.Interval {
				return b.intervalConst(text, c.TypeName.Typmods, off)
			}
			lit, err := textLiteral(t, text)
			if err != nil {
				return plan.Expr{}, b.s.errAt(off, "%v", err)
			}
			return plan.Expr{Op: plan.OpConst, Type: t, Lit: lit}, nil
		}
	}
	a, err := b.expr(sc, c.Arg)
	if err != nil {
		return a, err
	}
	return b.cast(a, t, off)
}

// intervalConst folds INTERVAL 'text' [UNIT].
func (b *binder) intervalConst(text string, typmods []*pg.Node, off int) (plan.Expr, error) {
	if len(typmods) > 0 {
		mask := typmods[0].GetAConst().GetIval().GetIval()
		for _, u := range intervalUnits {
			if mask&u.mask != 0 {
				f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
				if err != nil {
					return plan.Expr{}, b.s.errAt(off, "invalid interval %q %s: want a number", text, u.name)
				}
				us := int64(f * float64(u.d/time.Microsecond))
				return plan.Expr{Op: plan.OpConst, Type: plan.Type{Kind: plan.Interval}, Lit: strconv.FormatInt(us, 10)}, nil
			}
		}
		return plan.Expr{}, b.s.errAt(off, "interval units beyond days (months, years) are not supported")
	}
	lit, err := textLiteral(plan.Type{Kind: plan.Interval}, text)
	if err != nil {
		return plan.Expr{}, b.s.errAt(off, "%v", err)
	}
	return plan.Expr{Op: plan.OpConst, Type: plan.Type{Kind: plan.Interval}, Lit: lit}, nil
}

// cast converts e to t, or says why it cannot.
func (b *binder) cast(e plan.Expr, t plan.Type, off int) (plan.Expr, error) {
	if e.Type == t {
		return e, nil
	}
	if e.Op == plan.OpConst && e.IsNull {
		e.Type = t
		return e, nil
	}
	if _, _, err := expr.Resolve("cast", []plan.Type{e.Type, t}); err != nil {
		return plan.Expr{}, b.s.errAt(off, "%v", err)
	}
	return plan.Call("cast", t, e), nil
}

// call binds fn(args…) through the function library's typing, casting
// arguments to the types it wants.
func (b *binder) call(fn string, off int, args ...plan.Expr) (plan.Expr, error) {
	want, res, err := expr.ResolveCall(fn, args)
	if err != nil {
		// Type untyped string literals as the other arguments.
		var other *plan.Type
		for _, a := range args {
			if a.Fn != untyped && a.Type.Kind != plan.Null {
				other = &a.Type
				break
			}
		}
		retyped := false
		if other != nil {
			for i, a := range args {
				if a.Fn == untyped && other.Kind != plan.Varchar {
					lit, lerr := textLiteral(*other, a.Lit)
					if lerr != nil {
						return plan.Expr{}, b.s.errAt(off, "%v", lerr)
					}
					args[i] = plan.Expr{Op: plan.OpConst, Type: *other, Lit: lit}
					retyped = true
				}
			}
		}
		if !retyped {
			return plan.Expr{}, b.s.errAt(off, "%v", err)
		}
		if want, res, err = expr.ResolveCall(fn, args); err != nil {
			return plan.Expr{}, b.s.errAt(off, "%v", err)
		}
	}
	for i := range args {
		if args[i].Fn == untyped {
			args[i].Fn = ""
		}
	}
	for i := range args {
		if i < len(want) && want[i] != args[i].Type {
			if args[i], err = b.cast(args[i], want[i], off); err != nil {
				return plan.Expr{}, err
			}
		}
	}
	return fold(plan.Call(fn, res, args...)), nil
}

func (b *binder) aExpr(sc *scope, a *pg.A_Expr) (plan.Expr, error) {
	off := int(a.Location)
	opName := ""
	if len(a.Name) > 0 {
		opName = a.Name[len(a.Name)-1].GetString_().GetSval()
	}
	switch a.Kind {
	case pg.A_Expr_Kind_AEXPR_OP:
		if a.Lexpr == nil {
			r, err := b.expr(sc, a.Rexpr)
			if err != nil {
				return r, err
			}
			switch opName {
			case "-":
				return b.call("neg", off, r)
			case "+":
				return r, nil
			}
			return plan.Expr{}, b.s.errAt(off, "prefix operator %s is not supported", opName)
		}
		l, err := b.expr(sc, a.Lexpr)
		if err != nil {
			return l, err
		}
		r, err := b.expr(sc, a.Rexpr)
		if err != nil {
			return r, err
		}
		switch opName {
		case "+", "-", "*", "/", "%", "=", "<", "<=", ">", ">=", "||":
			return b.call(opName, off, l, r)
		case "<>", "!=":
			return b.call("<>", off, l, r)
		case "~~":
			return b.call("like", off, l, r)
		case "!~~":
			return b.call("not_like", off, l, r)
		case "~~*":
			return b.call("ilike", off, l, r)
		}
		return plan.Expr{}, b.s.errAt(off, "operator %s is not supported", opName)
	case pg.A_Expr_Kind_AEXPR_LIKE, pg.A_Expr_Kind_AEXPR_ILIKE:
		l, err := b.expr(sc, a.Lexpr)
		if err != nil {
			return l, err
		}
		r, err := b.expr(sc, a.Rexpr)
		if err != nil {
			return r, err
		}
		fn := "like"
		if a.Kind == pg.A_Expr_Kind_AEXPR_ILIKE {
			fn = "ilike"
		}
		e, err := b.call(fn, off, l, r)
		if err != nil || !strings.HasPrefix(opName, "!") {
			return e, err
		}
		return b.call("not", off, e)
	case pg.A_Expr_Kind_AEXPR_IN:
		l, err := b.expr(sc, a.Lexpr)
		if err != nil {
			return l, err
		}
		list, err := b.exprs(sc, a.Rexpr.GetList().GetItems())
		if err != nil {
			return l, err
		}
		e, err := b.call("in", off, append([]plan.Expr{l}, list...)...)
		if err != nil || opName != "<>" {
			return e, err
		}
		return b.call("not", off, e)
	case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN:
		x, err := b.expr(sc, a.Lexpr)
		if err != nil {
			return x, err
		}
		bounds, err := b.exprs(sc, a.Rexpr.GetList().GetItems())
		if err != nil {
			return x, err
		}
		lo, err := b.call(">=", off, x, bounds[0])
		if err != nil {
			return lo, err
		}
		hi, err := b.call("<=", off, x, bounds[1])
		if err != nil {
			return hi, err
		}
		e, err := b.call("and", off, lo, hi)
		if err != nil || a.Kind == pg.A_Expr_Kind_AEXPR_BETWEEN {
			return e, err
		}
		return b.call("not", off, e)
	case pg.A_Expr_Kind_AEXPR_NULLIF:
		args, err := b.exprs(sc, []*pg.Node{a.Lexpr, a.Rexpr})
		if err != nil {
			return plan.Expr{}, err
		}
		eq, err := b.call("=", off, args[0], args[1])
		if err != nil {
			return eq, err
		}
		null := plan.Expr{Op: plan.OpConst, IsNull: true, Type: plan.Type{Kind: plan.Null}}
		return b.call("case", off, eq, null, args[0])
	}
	return plan.Expr{}, b.s.errAt(off, "unsupported operator form %s", strings.TrimPrefix(a.Kind.String(), "AEXPR_"))
}

func (b *binder) caseExpr(sc *scope, c *pg.CaseExpr) (plan.Expr, error) {
	off := int(c.Location)
	var subject *plan.Expr
	if c.Arg != nil {
		s, err := b.expr(sc, c.Arg)
		if err != nil {
			return s, err
		}
		subject = &s
	}
	var args []plan.Expr
	for _, w := range c.Args {
		cw := w.GetCaseWhen()
		cond, err := b.expr(sc, cw.Expr)
		if err != nil {
			return cond, err
		}
		if subject != nil {
			if cond, err = b.call("=", int(cw.Location), *subject, cond); err != nil {
				return cond, err
			}
		}
		then, err := b.expr(sc, cw.Result)
		if err != nil {
			return then, err
		}
		args = append(args, cond, then)
	}
	els := plan.Expr{Op: plan.OpConst, IsNull: true, Type: plan.Type{Kind: plan.Null}}
	if c.Defresult != nil {
		var err error
		if els, err = b.expr(sc, c.Defresult); err != nil {
			return els, err
		}
	}
	return b.call("case", off, append(args, els)...)
}

// aggregate functions and what they compute.
var aggFuncs = map[string]plan.AggFunc{"count": plan.Count, "sum": plan.Sum, "min": plan.Min, "max": plan.Max, "avg": plan.Avg}

func (b *binder) funcCall(sc *scope, f *pg.FuncCall) (plan.Expr, error) {
	off := int(f.Location)
	var names []string
	for _, n := range f.Funcname {
		names = append(names, n.GetString_().GetSval())
	}
	name := strings.ToLower(names[len(names)-1])
	if len(names) > 1 && names[0] != "pg_catalog" {
		return plan.Expr{}, b.s.errAt(off, "function %s does not exist", strings.Join(names, "."))
	}
	if f.Over != nil {
		return plan.Expr{}, b.s.errAt(off, "window function %s() OVER (…) is not supported yet: ROW_NUMBER TopN and OVER aggregates produce results that update, which need changelog streams", name)
	}
	if fn, ok := aggFuncs[name]; ok {
		return b.aggCall(sc, f, fn, name)
	}
	if f.AggDistinct || f.AggFilter != nil || f.AggStar || len(f.AggOrder) > 0 {
		return plan.Expr{}, b.s.errAt(off, "%s is not an aggregate function (count, sum, min, max and avg are)", name)
	}
	switch name {
	case "proctime":
		return plan.Expr{}, b.s.errAt(off, "PROCTIME() declares a processing-time column of a source: `name AS PROCTIME()` in CREATE SOURCE")
	case "regexp_match":
		return plan.Expr{}, b.s.errAt(off, "regexp_match returns an array: take one group, (regexp_match(s, pattern))[n]")
	case "extract", "date_part":
		// EXTRACT(field FROM x): the field is a string constant.
		args, err := b.exprs(sc, f.Args)
		if err != nil {
			return plan.Expr{}, err
		}
		if len(args) == 2 && args[0].Op == plan.OpConst {
			args[0].Lit = strings.ToLower(args[0].Lit)
		}
		return b.call("extract", off, args...)
	case "substring":
		name = "substr"
	case "length":
		name = "char_length"
	case "character_length":
		name = "char_length"
	case "btrim":
		name = "trim"
	}
	args, err := b.exprs(sc, f.Args)
	if err != nil {
		return plan.Expr{}, err
	}
	return b.call(name, off, args...)
}

func (b *binder) aggCall(sc *scope, f *pg.FuncCall, fn plan.AggFunc, name string) (plan.Expr, error) {
	off := int(f.Location)
	if sc.aggs == nil {
		return plan.Expr{}, b.s.errAt(off, "aggregate function %s is not allowed here", name)
	}
	// An aggregate's arguments are bound against the rows, without
	// aggregates inside them.
	inner := &scope{cols: sc.cols}
	a := aggRef{fn: fn, off: off, distinct: f.AggDistinct}
	switch {
	case f.AggStar:
		if fn != plan.Count {
			return plan.Expr{}, b.s.errAt(off, "%s(*) is not a function: only count(*) is", name)
		}
		a.t = plan.Type{Kind: plan.Int64}
	case len(f.Args) != 1:
		return plan.Expr{}, b.s.errAt(off, "%s takes one argument", name)
	default:
		arg, err := b.expr(inner, f.Args[0])
		if err != nil {
			return arg, err
		}
		a.arg = &arg
		if a.t, err = aggType(fn, arg.Type); err != nil {
			return plan.Expr{}, b.s.errAt(off, "%v", err)
		}
	}
	if f.AggDistinct {
		if fn != plan.Count || a.arg == nil {
			return plan.Expr{}, b.s.errAt(off, "DISTINCT is supported in count(DISTINCT x) only")
		}
		a.fn = plan.CountDistinct
	}
	if len(f.AggOrder) > 0 {
		return plan.Expr{}, b.s.errAt(off, "ORDER BY inside an aggregate is not supported")
	}
	if f.AggFilter != nil {
		fl, err := b.expr(inner, f.AggFilter)
		if err != nil {
			return fl, err
		}
		if fl.Type.Kind != plan.Bool {
			return plan.Expr{}, b.s.errAt(off, "FILTER (WHERE …) must be boolean, not %s", fl.Type)
		}
		a.filter = &fl
	}
	// The same aggregate twice is computed once.
	for i, o := range *sc.aggs {
		if o.fn == a.fn && reflect.DeepEqual(o.arg, a.arg) && reflect.DeepEqual(o.filter, a.filter) {
			return plan.Expr{Op: plan.OpCol, Col: sc.aggBase + i, Type: o.t, Fn: "agg"}, nil
		}
	}
	*sc.aggs = append(*sc.aggs, a)
	return plan.Expr{Op: plan.OpCol, Col: sc.aggBase + len(*sc.aggs) - 1, Type: a.t, Fn: "agg"}, nil
}

// aggType is an aggregate's result type, as PostgreSQL's (sum of
// BIGINT is NUMERIC, avg of integers NUMERIC).
func aggType(fn plan.AggFunc, t plan.Type) (plan.Type, error) {
	switch fn {
	case plan.Count, plan.CountDistinct:
		return plan.Type{Kind: plan.Int64}, nil
	case plan.Min, plan.Max:
		return t, nil
	case plan.Sum:
		switch t.Kind {
		case plan.Int16, plan.Int32:
			return plan.Type{Kind: plan.Int64}, nil
		case plan.Int64:
			return plan.Type{Kind: plan.Decimal}, nil
		case plan.Decimal, plan.Float32, plan.Float64, plan.Interval:
			return t, nil
		}
	case plan.Avg:
		switch t.Kind {
		case plan.Int16, plan.Int32, plan.Int64:
			return plan.Type{Kind: plan.Decimal, Scale: 6}, nil
		case plan.Decimal:
			return plan.Type{Kind: plan.Decimal, Scale: max(t.Scale, 6)}, nil
		case plan.Float32, plan.Float64:
			return plan.Type{Kind: plan.Float64}, nil
		case plan.Interval:
			return t, nil
		}
	}
	return plan.Type{}, fmt.Errorf("function %s(%s) does not exist", fn, t)
}

// indirection binds (regexp_match(s, p))[n], the one array access the
// dialect has.
func (b *binder) indirection(sc *scope, a *pg.A_Indirection) (plan.Expr, error) {
	f := a.Arg.GetFuncCall()
	off := location(a.Arg)
	if f == nil || len(a.Indirection) != 1 || a.Indirection[0].GetAIndices() == nil || a.Indirection[0].GetAIndices().IsSlice {
		return plan.Expr{}, b.s.errAt(off, "arrays are not supported, except (regexp_match(s, pattern))[n]")
	}
	name := strings.ToLower(f.Funcname[len(f.Funcname)-1].GetString_().GetSval())
	if name != "regexp_match" || len(f.Args) != 2 {
		return plan.Expr{}, b.s.errAt(off, "arrays are not supported, except (regexp_match(s, pattern))[n]")
	}
	args, err := b.exprs(sc, f.Args)
	if err != nil {
		return plan.Expr{}, err
	}
	idx, err := b.expr(sc, a.Indirection[0].GetAIndices().Uidx)
	if err != nil {
		return idx, err
	}
	return b.call("regexp_match_group", int(f.Location), args[0], args[1], idx)
}

// textLiteral is the canonical literal of text typed t (TIMESTAMP '…').
func textLiteral(t plan.Type, text string) (string, error) {
	e := plan.Expr{Op: plan.OpConst, Type: plan.Type{Kind: plan.Varchar}, Lit: text}
	ev, err := expr.Compile(plan.Call("cast", t, e))
	if err != nil {
		return "", err
	}
	v, err := ev(nil)
	if err != nil {
		return "", err
	}
	return literalOf(t, v), nil
}

// location is a node's offset in the script: the "location" field of the
// node, or of the first node inside it that has one (PostgreSQL leaves
// some, like a typed literal's cast, at -1).
func location(n *pg.Node) int {
	if n == nil {
		return -1
	}
	m := n.ProtoReflect()
	fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("node"))
	if fd == nil || fd.Message() == nil {
		return -1
	}
	inner := m.Get(fd).Message()
	if f := inner.Descriptor().Fields().ByName("location"); f != nil {
		if l := int(inner.Get(f).Int()); l >= 0 {
			return l
		}
	}
	fields := inner.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		if f.Message() == nil || f.Message().FullName() != "pg_query.Node" {
			continue
		}
		if f.IsList() {
			l := inner.Get(f).List()
			for j := 0; j < l.Len(); j++ {
				if loc := location(l.Get(j).Message().Interface().(*pg.Node)); loc >= 0 {
					return loc
				}
			}
		} else if inner.Has(f) {
			if loc := location(inner.Get(f).Message().Interface().(*pg.Node)); loc >= 0 {
				return loc
			}
		}
	}
	return -1
}

func nodeName(n *pg.Node) string {
	s := fmt.Sprintf("%T", n.Node)
	return strings.TrimPrefix(s, "*pg_query.Node_")
}

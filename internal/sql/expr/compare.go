package expr

import (
	"cmp"
	"fmt"
	"math"
	"strings"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

// resolveCompare types = <> < <= > >=: values of any one type, or of
// types that meet (numbers; DATE, TIMESTAMP, TIMESTAMPTZ).
func resolveCompare(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
	if len(args) != 2 {
		return nil, boolean, undefined(fn, args)
	}
	t, ok := common(args[0], args[1])
	if !ok {
		return nil, boolean, undefined(fn, args)
	}
	if t.Kind == plan.Null {
		t = varchar
	}
	return []plan.Type{operand(args[0], t), operand(args[1], t)}, boolean, nil
}

// comparison masks: bit c+1 is set when a comparison result c (-1, 0,
// 1) makes the operator true.
var comparisons = map[string]uint8{"=": 2, "<>": 5, "<": 1, "<=": 3, ">": 4, ">=": 6}

// comparator orders values of types a and b, which resolveCompare made
// comparable; nil when their Int() orders them.
func comparator(a, b plan.Type) func(x, y row.Value) int {
	switch {
	case isExact(a.Kind) && scaleOf(a) != scaleOf(b):
		sa, sb := scaleOf(a), scaleOf(b)
		return func(x, y row.Value) int { return decCompare(x.Int(), sa, y.Int(), sb) }
	case isFloat(a.Kind):
		return func(x, y row.Value) int { return floatCompare(x.Float(), y.Float()) }
	case a.Kind == plan.Varchar:
		return func(x, y row.Value) int { return strings.Compare(x.Str(), y.Str()) }
	}
	return nil
}

// decCompare orders mantissas of different scales.
func decCompare(a int64, sa int, b int64, sb int) int {
	if sa > sb {
		return -decCompare(b, sb, a, sa)
	}
	// Scaled up past int64, a is beyond any b.
	up, err := rescale(a, sa, sb)
	if err != nil {
		return cmp.Compare(a, 0)
	}
	return cmp.Compare(up, b)
}

// floatCompare orders floats as PostgreSQL does: NaN equals NaN and is
// above everything else.
func floatCompare(a, b float64) int {
	switch an, bn := math.IsNaN(a), math.IsNaN(b); {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(a, b)
}

func compileCompare(c *call) (Eval, error) {
	mask := comparisons[c.fn]
	a, b := c.evals[0], c.evals[1]
	order := comparator(c.types[0], c.types[1])
	if order == nil {
		return func(r row.Row) (row.Value, error) {
			x, err := a(r)
			if err != nil || x.IsNull() {
				return x, err
			}
			y, err := b(r)
			if err != nil || y.IsNull() {
				return y, err
			}
			return row.Bool(mask>>(cmp.Compare(x.Int(), y.Int())+1)&1 != 0), nil
		}, nil
	}
	return func(r row.Row) (row.Value, error) {
		x, err := a(r)
		if err != nil || x.IsNull() {
			return x, err
		}
		y, err := b(r)
		if err != nil || y.IsNull() {
			return y, err
		}
		return row.Bool(mask>>(order(x, y)+1)&1 != 0), nil
	}, nil
}

// resolveIn types x IN (a, b, …): all meet in one type, as = takes them.
func resolveIn(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
	if len(args) < 2 {
		return nil, boolean, undefined(fn, args)
	}
	t := null
	for _, a := range args {
		var ok bool
		if t, ok = common(t, a); !ok {
			return nil, boolean, undefined("=", []plan.Type{args[0], a})
		}
	}
	if t.Kind == plan.Null {
		t = varchar
	}
	want := make([]plan.Type, len(args))
	for i, a := range args {
		want[i] = operand(a, t)
	}
	return want, boolean, nil
}

// compileIn: true when x equals an item; else NULL when x or an item is
// NULL; else false.
func compileIn(c *call) (Eval, error) {
	x, items := c.evals[0], c.evals[1:]
	orders := make([]func(x, y row.Value) int, len(items))
	for i := range items {
		if orders[i] = comparator(c.types[0], c.types[i+1]); orders[i] == nil {
			orders[i] = func(x, y row.Value) int { return cmp.Compare(x.Int(), y.Int()) }
		}
	}
	return func(r row.Row) (row.Value, error) {
		v, err := x(r)
		if err != nil || v.IsNull() {
			return v, err
		}
		null := false
		for i, item := range items {
			w, err := item(r)
			switch {
			case err != nil:
				return w, err
			case w.IsNull():
				null = true
			case orders[i](v, w) == 0:
				return row.Bool(true), nil
			}
		}
		if null {
			return row.Null(), nil
		}
		return row.Bool(false), nil
	}, nil
}

// unify is the type values of types meet in for a CASE or COALESCE (what
// names it in the error).
func unify(what string, types []plan.Type) (plan.Type, error) {
	t := null
	for _, a := range types {
		u, ok := common(t, a)
		if !ok {
			return t, fmt.Errorf("%s types %s and %s cannot be matched", what, t, a)
		}
		t = u
	}
	if t.Kind == plan.Null {
		t = varchar
	}
	return t, nil
}

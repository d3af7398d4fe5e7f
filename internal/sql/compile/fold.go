package compile

import (
	"strconv"

	"github.com/weirproject/weir/internal/sql/expr"
	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

// fold evaluates a call whose arguments are all constants once, at plan
// time (constant folding), unless it depends on when it runs (now()) or
// fails (the error then happens per row, where the row's data is known).
func fold(e plan.Expr) plan.Expr {
	if e.Op != plan.OpCall || e.Fn == "now" {
		return e
	}
	for _, a := range e.Args {
		if a.Op != plan.OpConst {
			return e
		}
	}
	ev, err := expr.Compile(e)
	if err != nil {
		return e
	}
	v, err := ev(nil)
	if err != nil {
		return e
	}
	if v.IsNull() {
		return plan.Expr{Op: plan.OpConst, Type: e.Type, IsNull: true}
	}
	return plan.Expr{Op: plan.OpConst, Type: e.Type, Lit: literalOf(e.Type, v)}
}

// literalOf is v's canonical literal text as plan.Expr.Lit defines it.
func literalOf(t plan.Type, v row.Value) string {
	switch t.Kind {
	case plan.Bool:
		return strconv.FormatBool(v.Bool())
	case plan.Float32, plan.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case plan.Varchar:
		return v.Str()
	}
	return strconv.FormatInt(v.Int(), 10)
}

package compile

import (
	"reflect"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/weirproject/weir/internal/sql/expr"
	"github.com/weirproject/weir/internal/sql/plan"
)

// aggregate binds a SELECT with GROUP BY or aggregates over in. A GROUP
// BY naming a window (window_start or window_end of a window table
// function, or of a relation whose rows are windows' results: a cascade)
// is a window aggregate, append-only; any other is an unbounded
// aggregate, whose results update.
func (b *binder) aggregate(s *pg.SelectStmt, in *rel) (*rel, error) {
	off := location(s.TargetList[0])
	if len(s.GroupClause) > 0 {
		off = location(s.GroupClause[0])
	}
	sc := &scope{cols: in.cols}
	var groups []plan.Expr
	for _, g := range s.GroupClause {
		if g.GetGroupingSet() != nil {
			return nil, b.s.errAt(off, "GROUPING SETS, ROLLUP and CUBE are not supported")
		}
		e, err := b.groupItem(sc, g, s.TargetList)
		if err != nil {
			return nil, err
		}
		groups = append(groups, e)
	}
	// Which window the aggregate is over.
	var w plan.Window
	ws, we := -1, -1
	switch {
	case in.tvf != nil:
		w = *in.tvf
		ws, we = len(in.cols)-2, len(in.cols)-1
	case in.win != nil:
		w = in.win.w
		w.Cascade = true
		ws, we = in.win.start, in.win.end
	}
	windowed := false
	var keys []plan.Expr
	for _, g := range groups {
		if g.Op == plan.OpCol && (g.Col == ws || g.Col == we) && (ws >= 0 || we >= 0) {
			windowed = true
			continue
		}
		keys = append(keys, g)
	}
	if !windowed && in.tvf != nil {
		return nil, b.s.errAt(off, "GROUP BY over a window table function must include window_start or window_end")
	}
	if !windowed {
		// window_start and window_end of an input of windows' results
		// are plain columns to an unbounded aggregate.
		ws, we = -1, -1
	}
	if windowed && in.updating() {
		return nil, b.s.errAt(off, "a window aggregate over results that update (%s) is not supported", in.why)
	}
	if w.Cascade && w.Kind == plan.Session {
		return nil, b.s.errAt(off, "an aggregate over session windows' results is not supported")
	}
	// The select list, with aggregates as placeholders past the input's
	// columns.
	var aggs []aggRef
	asc := &scope{cols: in.cols, aggs: &aggs, aggBase: len(in.cols)}
	type item struct {
		e    plan.Expr
		name string
		off  int
	}
	var items []item
	for _, t := range s.TargetList {
		rt := t.GetResTarget()
		if star, _ := isStar(rt.Val); star {
			return nil, b.s.errAt(int(rt.Location), "* in the select list of an aggregate: name the group columns")
		}
		e, err := b.expr(asc, rt.Val)
		if err != nil {
			return nil, err
		}
		name := rt.Name
		if name == "" {
			name = defaultName(rt.Val)
		}
		items = append(items, item{e, name, int(rt.Location)})
	}
	var having *plan.Expr
	if s.HavingClause != nil {
		h, err := b.expr(asc, s.HavingClause)
		if err != nil {
			return nil, err
		}
		having = &h
	}
	// The calc below the aggregate computes its key, its arguments and
	// its FILTERs, from the rows without the window's columns.
	base := in
	if in.tvf != nil {
		base = &rel{n: in.n, cols: in.cols[:len(in.cols)-2], rowtime: in.rowtime, proctime: in.proctime, watermarked: in.watermarked}
	}
	var pre []plan.Expr
	var preCols []col
	for _, k := range keys {
		if usesWindowCols(k, in.tvf != nil, len(base.cols)) {
			return nil, b.s.errAt(off, "group by window_start or window_end as they are, not in an expression")
		}
		pre = append(pre, k)
		name := "key"
		if k.Op == plan.OpCol {
			name = in.cols[k.Col].name
		}
		preCols = append(preCols, col{name: name, t: k.Type})
	}
	calls := make([]plan.AggCall, len(aggs))
	for i, a := range aggs {
		calls[i] = plan.AggCall{Fn: a.fn, Arg: -1, Filter: -1, Type: a.t}
		if a.arg != nil {
			if usesWindowCols(*a.arg, in.tvf != nil, len(base.cols)) {
				return nil, b.s.errAt(a.off, "aggregates of window_start or window_end are not supported")
			}
			calls[i].Arg = len(pre)
			pre = append(pre, *a.arg)
			preCols = append(preCols, col{name: "arg", t: a.arg.Type})
		}
		if a.filter != nil {
			calls[i].Filter = len(pre)
			pre = append(pre, *a.filter)
			preCols = append(preCols, col{name: "filter", t: a.filter.Type})
		}
	}
	preRel := &rel{n: &calcNode{in: base, project: pre}, cols: preCols, rowtime: -1, proctime: -1, watermarked: in.watermarked}
	groupIdx := make([]int, len(keys))
	for i := range keys {
		groupIdx[i] = i
	}
	preRel.mode, preRel.why = in.mode, in.why
	ts := plan.Type{Kind: plan.Timestamp}
	var out *rel
	// aggAt is where the aggregates' columns begin in the output.
	aggAt := len(keys) + 2
	if windowed {
		out = &rel{n: &aggNode{in: preRel, window: w, groups: groupIdx, aggs: calls}, rowtime: -1, proctime: -1, watermarked: in.watermarked}
		out.cols = append(out.cols, preCols[:len(keys)]...)
		out.cols = append(out.cols, col{name: "window_start", t: ts}, col{name: "window_end", t: ts})
		w.Cascade = false
		out.win = &winAttr{w: w, start: len(keys), end: len(keys) + 1}
	} else {
		// An unbounded aggregate: its results update, one row per
		// group, which the group's keys identify.
		aggAt = len(keys)
		out = &rel{n: &groupAggNode{in: preRel, groups: groupIdx, aggs: calls}, rowtime: -1, proctime: -1, watermarked: in.watermarked,
			mode: plan.Retract, ukey: groupIdx}
		out.why = "GROUP BY without a window"
		if len(keys) > 0 {
			out.why = "GROUP BY " + colList(preCols, groupIdx) + " without a window"
		}
		out.cols = append(out.cols, preCols[:len(keys)]...)
	}
	for i, a := range calls {
		out.cols = append(out.cols, col{name: string(a.Fn), t: aggs[i].t})
	}

	// Lift the select list and HAVING onto the aggregate's output.
	k := len(keys)
	var lift func(e plan.Expr, off int) (plan.Expr, error)
	lift = func(e plan.Expr, off int) (plan.Expr, error) {
		if e.Op == plan.OpCol && e.Fn == "agg" {
			return plan.ColRef(aggAt+e.Col-len(in.cols), e.Type), nil
		}
		for i, g := range keys {
			if reflect.DeepEqual(e, g) {
				return plan.ColRef(i, g.Type), nil
			}
		}
		if e.Op == plan.OpCol {
			switch e.Col {
			case ws:
				return plan.ColRef(k, ts), nil
			case we:
				return plan.ColRef(k+1, ts), nil
			}
			return plan.Expr{}, b.s.errAt(off, "column %q must appear in the GROUP BY clause or be used in an aggregate function", in.cols[e.Col].name)
		}
		if len(e.Args) > 0 {
			args := make([]plan.Expr, len(e.Args))
			for i, a := range e.Args {
				var err error
				if args[i], err = lift(a, off); err != nil {
					return a, err
				}
			}
			e.Args = args
		}
		return e, nil
	}
	var exprs []plan.Expr
	var cols []col
	m := map[int]int{}
	for _, it := range items {
		e, err := lift(it.e, it.off)
		if err != nil {
			return nil, err
		}
		if e.Op == plan.OpCol {
			if _, ok := m[e.Col]; !ok {
				m[e.Col] = len(exprs)
			}
		}
		exprs = append(exprs, e)
		cols = append(cols, col{name: it.name, t: e.Type})
	}
	src := out
	if having != nil {
		h, err := lift(*having, location(s.HavingClause))
		if err != nil {
			return nil, err
		}
		src = filterRel(out, &h)
	}
	final := &rel{n: &calcNode{in: src, project: exprs}, cols: cols}
	src.carry(final, m)
	return final, nil
}

// groupItem binds a GROUP BY item: an expression, or a select list
// position (GROUP BY 1) or alias.
func (b *binder) groupItem(sc *scope, g *pg.Node, targets []*pg.Node) (plan.Expr, error) {
	if c := g.GetAConst(); c != nil && c.GetIval() != nil {
		i := int(c.GetIval().Ival)
		if i < 1 || i > len(targets) {
			return plan.Expr{}, b.s.errAt(int(c.Location), "GROUP BY position %d is not in select list", i)
		}
		return b.expr(sc, targets[i-1].GetResTarget().Val)
	}
	if cr := g.GetColumnRef(); cr != nil && len(cr.Fields) == 1 {
		name := cr.Fields[0].GetString_().GetSval()
		if _, err := b.lookup(sc, "", name, int(cr.Location)); err != nil {
			for _, t := range targets {
				if rt := t.GetResTarget(); rt.Name == name {
					return b.expr(sc, rt.Val)
				}
			}
		}
	}
	return b.expr(sc, g)
}

// usesWindowCols reports whether e reads the window table function's
// window_start or window_end (columns n and n+1).
func usesWindowCols(e plan.Expr, tvf bool, n int) bool {
	if !tvf {
		return false
	}
	_, hi := colRange(e)
	return hi >= n
}

// resolveCommon is the type values of types meet in (CASE, UNION ALL).
func resolveCommon(types []plan.Type) ([]plan.Type, plan.Type, error) {
	return expr.Resolve("coalesce", types)
}

package compile

import (
	"fmt"
	"strings"

	"github.com/weirproject/weir/internal/sql/plan"
)

// The logical plan: what a query computes, as a tree of relations, each
// with its columns and what is known of their time. The physical planner
// (physical.go) fuses it into the runtime's operators.

// node is a logical operator.
type node interface{ isNode() }

// scanNode reads a source.
type scanNode struct{ src *source }

// calcNode filters its input and computes new columns from it.
type calcNode struct {
	in      *rel
	filter  *plan.Expr
	project []plan.Expr
}

// aggNode is a window aggregate: its input's columns are the group keys,
// then the aggregates' arguments (computed by a calc below it); its output
// is the group keys, window_start, window_end, then the aggregates.
type aggNode struct {
	in     *rel
	window plan.Window
	groups []int
	aggs   []plan.AggCall
}

// joinNode is an inner equi-join; filter is over the left columns then
// the right ones.
type joinNode struct {
	left, right  *rel
	kind         plan.JoinKind
	lkeys, rkeys []int
	lower, upper int64
	size         int64
	filter       *plan.Expr
	jtype        plan.JoinType
}

// unionNode is UNION ALL of inputs of one schema.
type unionNode struct{ inputs []*rel }

// groupAggNode is an unbounded GROUP BY: as aggNode without a window, its
// output is the group keys, then the aggregates, and it updates.
type groupAggNode struct {
	in     *rel
	groups []int
	aggs   []plan.AggCall
}

// rankNode is ROW_NUMBER() OVER (PARTITION BY … ORDER BY …): its output is
// its input's columns and the row number. Only the first limit rows of
// each partition can be kept (a TopN), so a WHERE on the row number must
// set limit.
type rankNode struct {
	in        *rel
	partition []int
	order     []plan.SortKey
	limit     int64
	off       int
}

// overNode is aggregates over a ROWS frame (aggregate() OVER (PARTITION
// BY … ORDER BY … ROWS BETWEEN …)): its output is its input's columns,
// then the aggregates, and it updates.
type overNode struct {
	in        *rel
	partition []int
	order     []plan.SortKey
	lo, hi    int64
	aggs      []plan.AggCall
}

func (*scanNode) isNode()     {}
func (*overNode) isNode()     {}
func (*calcNode) isNode()     {}
func (*aggNode) isNode()      {}
func (*joinNode) isNode()     {}
func (*unionNode) isNode()    {}
func (*groupAggNode) isNode() {}
func (*rankNode) isNode()     {}

// col is a column of a relation as names see it.
type col struct {
	name, qual string
	t          plan.Type
}

// winAttr says that a relation's rows are results of windows: each row is
// stamped at its window's last millisecond; start and end are the
// columns holding window_start and window_end (-1 when projected away).
type winAttr struct {
	w          plan.Window
	start, end int
}

// rel is a relation: a node and its columns.
type rel struct {
	n    node
	cols []col
	// rowtime is the column equal to the records' timestamps (the
	// source's WATERMARK column), proctime a PROCTIME() column; -1:
	// none.
	rowtime, proctime int
	win               *winAttr
	// tvf is set on the rows of a window table function, which only an
	// aggregate grouping by its window may read: window_start and
	// window_end are its last two columns.
	tvf *plan.Window
	// watermarked: some source below has a WATERMARK.
	watermarked bool
	// mode is how the rows change the result: "" or plan.AppendOnly, or
	// plan.Retract for results that update, which why says the cause of
	// (for errors).
	mode plan.Mode
	why  string
	// ukey is a unique key of an updating relation's rows (columns), nil
	// when none is known; empty for a relation of one row.
	ukey []int
	// rank is the row number column of a ROW_NUMBER() whose WHERE is
	// still to come.
	rank *rankAttr
}

// rankAttr points at a ROW_NUMBER() column and the node computing it.
type rankAttr struct {
	col  int
	node *rankNode
}

// updating reports whether r's results update (a changelog).
func (r *rel) updating() bool { return r.mode == plan.Retract }

func (r *rel) schema() plan.Schema {
	s := make(plan.Schema, len(r.cols))
	for i, c := range r.cols {
		s[i] = plan.Column{Name: c.name, Type: c.t}
	}
	return s
}

// keep carries r's time knowledge over a projection that maps input
// column i to output column m[i] (absent: dropped).
func (r *rel) carry(out *rel, m map[int]int) {
	out.rowtime, out.proctime = -1, -1
	out.watermarked = r.watermarked
	out.mode, out.why, out.ukey, out.rank = r.mode, r.why, nil, nil
	if r.ukey != nil {
		k := []int{}
		for _, c := range r.ukey {
			j, ok := m[c]
			if !ok {
				k = nil
				break
			}
			k = append(k, j)
		}
		out.ukey = k
	}
	if r.rank != nil {
		if j, ok := m[r.rank.col]; ok {
			out.rank = &rankAttr{col: j, node: r.rank.node}
		}
	}
	if j, ok := m[r.rowtime]; ok && r.rowtime >= 0 {
		out.rowtime = j
	}
	if j, ok := m[r.proctime]; ok && r.proctime >= 0 {
		out.proctime = j
	}
	if r.win != nil {
		w := &winAttr{w: r.win.w, start: -1, end: -1}
		if j, ok := m[r.win.start]; ok && r.win.start >= 0 {
			w.start = j
		}
		if j, ok := m[r.win.end]; ok && r.win.end >= 0 {
			w.end = j
		}
		out.win = w
	}
}

// explainLogical prints a logical plan as an indented tree.
func explainLogical(r *rel) string {
	var b strings.Builder
	var walk func(r *rel, depth int)
	walk = func(r *rel, depth int) {
		ind := strings.Repeat("  ", depth)
		names := make([]string, len(r.cols))
		for i, c := range r.cols {
			names[i] = c.name
		}
		switch n := r.n.(type) {
		case *scanNode:
			fmt.Fprintf(&b, "%sScan %s [%s]\n", ind, n.src.name, strings.Join(names, ", "))
		case *calcNode:
			var parts []string
			if n.filter != nil {
				parts = append(parts, "filter: "+exprString(*n.filter, n.in.cols))
			}
			if n.project != nil {
				ps := make([]string, len(n.project))
				for i, e := range n.project {
					ps[i] = exprString(e, n.in.cols) + " AS " + r.cols[i].name
				}
				parts = append(parts, "project: "+strings.Join(ps, ", "))
			}
			fmt.Fprintf(&b, "%sCalc %s\n", ind, strings.Join(parts, "; "))
			walk(n.in, depth+1)
		case *aggNode:
			fmt.Fprintf(&b, "%sWindowAggregate %s group: [%s] aggs: [%s]\n", ind, windowString(n.window),
				colList(n.in.cols, n.groups), aggList(n.aggs, n.in.cols))
			walk(n.in, depth+1)
		case *joinNode:
			both := append(append([]col{}, n.left.cols...), n.right.cols...)
			var keys []string
			for i := range n.lkeys {
				keys = append(keys, n.left.cols[n.lkeys[i]].name+" = "+n.right.cols[n.rkeys[i]].name)
			}
			extra := ""
			switch n.kind {
			case plan.IntervalJoin:
				extra = fmt.Sprintf(" right.ts in [left.ts%+dms, left.ts%+dms]", n.lower, n.upper)
			case plan.WindowJoin:
				extra = fmt.Sprintf(" per window of %dms", n.size)
			case plan.RegularJoin:
				extra = " (state: unbounded, both inputs kept forever)"
			}
			cond := ""
			if n.filter != nil {
				cond = " filter: " + exprString(*n.filter, both)
			}
			outer := ""
			if n.jtype != plan.InnerJoin {
				outer = outerName(n.jtype)
			}
			fmt.Fprintf(&b, "%s%s%sJoin on %s%s%s\n", ind, joinKindName(n.kind), outer, strings.Join(keys, " AND "), extra, cond)
			walk(n.left, depth+1)
			walk(n.right, depth+1)
		case *groupAggNode:
			fmt.Fprintf(&b, "%sGroupAggregate group: [%s] aggs: [%s]\n", ind, colList(n.in.cols, n.groups), aggList(n.aggs, n.in.cols))
			walk(n.in, depth+1)
		case *rankNode:
			fmt.Fprintf(&b, "%sTopN %d per [%s] order by [%s]\n", ind, n.limit, colList(n.in.cols, n.partition), orderList(n.order, n.in.cols))
			walk(n.in, depth+1)
		case *overNode:
			fmt.Fprintf(&b, "%sOverAggregate per [%s] order by [%s] rows %s compute [%s]\n", ind, colList(n.in.cols, n.partition),
				orderList(n.order, n.in.cols), frameString(n.lo, n.hi), aggList(n.aggs, n.in.cols))
			walk(n.in, depth+1)
		case *unionNode:
			fmt.Fprintf(&b, "%sUnionAll\n", ind)
			for _, in := range n.inputs {
				walk(in, depth+1)
			}
		}
	}
	walk(r, 0)
	return b.String()
}

func joinKindName(k plan.JoinKind) string {
	switch k {
	case plan.IntervalJoin:
		return "Interval"
	case plan.WindowJoin:
		return "Window"
	}
	return "Regular"
}

func windowString(w plan.Window) string {
	t := "event time"
	if w.ProcessingTime {
		t = "processing time"
	}
	c := ""
	if w.Cascade {
		c = ", over its input's windows"
	}
	switch w.Kind {
	case plan.Tumble:
		return fmt.Sprintf("tumble(%dms, %s%s)", w.Size, t, c)
	case plan.Hop:
		return fmt.Sprintf("hop(size %dms, slide %dms, %s%s)", w.Size, w.Slide, t, c)
	}
	return fmt.Sprintf("session(gap %dms, %s)", w.Gap, t)
}

func orderList(order []plan.SortKey, cols []col) string {
	s := make([]string, len(order))
	for i, k := range order {
		s[i] = cols[k.Col].name
		if k.Desc {
			s[i] += " DESC"
		}
		if k.NullsFirst != k.Desc {
			if k.NullsFirst {
				s[i] += " NULLS FIRST"
			} else {
				s[i] += " NULLS LAST"
			}
		}
	}
	return strings.Join(s, ", ")
}

func colList(cols []col, idx []int) string {
	s := make([]string, len(idx))
	for i, j := range idx {
		s[i] = cols[j].name
	}
	return strings.Join(s, ", ")
}

func aggList(aggs []plan.AggCall, cols []col) string {
	s := make([]string, len(aggs))
	for i, a := range aggs {
		arg := "*"
		if a.Arg >= 0 {
			arg = cols[a.Arg].name
		}
		fn := string(a.Fn)
		if a.Fn == plan.CountDistinct {
			fn, arg = "count", "DISTINCT "+arg
		}
		s[i] = fn + "(" + arg + ")"
		if a.Filter >= 0 {
			s[i] += " FILTER (WHERE " + cols[a.Filter].name + ")"
		}
	}
	return strings.Join(s, ", ")
}

// exprString prints an expression with its columns' names.
func exprString(e plan.Expr, cols []col) string {
	switch e.Op {
	case plan.OpCol:
		if e.Col < len(cols) {
			return cols[e.Col].name
		}
		return fmt.Sprintf("$%d", e.Col)
	case plan.OpConst:
		if e.IsNull {
			return "NULL"
		}
		if e.Type.Kind == plan.Varchar {
			return "'" + strings.ReplaceAll(e.Lit, "'", "''") + "'"
		}
		return constString(e)
	}
	args := make([]string, len(e.Args))
	for i, a := range e.Args {
		args[i] = exprString(a, cols)
	}
	switch e.Fn {
	case "+", "-", "*", "/", "%", "=", "<>", "<", "<=", ">", ">=", "||", "like", "not_like", "ilike":
		return "(" + args[0] + " " + strings.ReplaceAll(strings.ToUpper(e.Fn), "_", " ") + " " + args[1] + ")"
	case "and", "or":
		return "(" + strings.Join(args, " "+strings.ToUpper(e.Fn)+" ") + ")"
	case "not":
		return "NOT " + args[0]
	case "neg":
		return "-" + args[0]
	case "is_null":
		return args[0] + " IS NULL"
	case "is_not_null":
		return args[0] + " IS NOT NULL"
	case "cast":
		return "CAST(" + args[0] + " AS " + e.Type.String() + ")"
	case "in":
		return args[0] + " IN (" + strings.Join(args[1:], ", ") + ")"
	case "case":
		var b strings.Builder
		b.WriteString("CASE")
		for i := 0; i+1 < len(args); i += 2 {
			b.WriteString(" WHEN " + args[i] + " THEN " + args[i+1])
		}
		b.WriteString(" ELSE " + args[len(args)-1] + " END")
		return b.String()
	}
	return e.Fn + "(" + strings.Join(args, ", ") + ")"
}

// constString prints a constant in SQL.
func constString(e plan.Expr) string {
	switch e.Type.Kind {
	case plan.Decimal:
		return decimalText(e.Lit, e.Type.Scale)
	case plan.Interval:
		return "INTERVAL '" + e.Lit + " microseconds'"
	case plan.Timestamp, plan.TimestampTZ:
		return "TIMESTAMP(µs " + e.Lit + ")"
	}
	return e.Lit
}

// decimalText is a mantissa's text with scale digits after the point.
func decimalText(mant string, scale int8) string {
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	for len(mant) <= int(scale) {
		mant = "0" + mant
	}
	s := mant
	if scale > 0 {
		s = mant[:len(mant)-int(scale)] + "." + mant[len(mant)-int(scale):]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// frameString writes a ROWS frame as SQL does.
func frameString(lo, hi int64) string {
	bound := func(n int64) string {
		switch {
		case n < 0:
			return fmt.Sprintf("%d PRECEDING", -n)
		case n > 0:
			return fmt.Sprintf("%d FOLLOWING", n)
		}
		return "CURRENT ROW"
	}
	return "BETWEEN " + bound(lo) + " AND " + bound(hi)
}

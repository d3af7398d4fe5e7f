package compile

import (
	"fmt"
	"slices"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/weirproject/weir/internal/sql/plan"
)

// query binds a SELECT (or UNION ALL of them) into a relation. limit is
// its LIMIT (-1: none), which only a SELECT streamed to the terminal may
// have.
func (b *binder) query(s *pg.SelectStmt) (r *rel, limit int64, err error) {
	limit = -1
	if s.LimitCount != nil {
		c := s.LimitCount.GetAConst()
		if c == nil || c.GetIval() == nil {
			return nil, 0, b.s.errAt(location(s.LimitCount), "LIMIT wants a whole number")
		}
		limit = int64(c.GetIval().Ival)
	}
	if s.LimitOffset != nil {
		return nil, 0, b.s.errAt(location(s.LimitOffset), "OFFSET is not supported on a stream")
	}
	if len(s.SortClause) > 0 {
		return nil, 0, b.s.errAt(location(s.SortClause[0]), "ORDER BY is not supported on an unbounded stream (a streaming query's rows come in the order they are computed)")
	}
	if s.WithClause != nil {
		return nil, 0, b.s.errAt(int(s.WithClause.Location), "WITH (common table expressions) is not supported yet: use CREATE VIEW")
	}
	switch s.Op {
	case pg.SetOperation_SETOP_NONE:
	case pg.SetOperation_SETOP_UNION:
		r, err := b.unionAll(s)
		if err == nil && !s.All {
			// UNION removes duplicates: UNION ALL, then DISTINCT.
			r = distinctRel(r)
		}
		return r, limit, err
	default:
		return nil, 0, b.s.errAt(0, "%s is not supported on streams (UNION ALL is)", strings.TrimPrefix(s.Op.String(), "SETOP_"))
	}
	if len(s.ValuesLists) > 0 {
		return nil, 0, b.s.errAt(location(s.ValuesLists[0]), "VALUES is not supported: read a source")
	}
	distinct := len(s.DistinctClause) > 0
	if distinct && (len(s.DistinctClause) > 1 || s.DistinctClause[0].Node != nil) {
		return nil, 0, b.s.errAt(location(s.DistinctClause[0]), "DISTINCT ON is not supported: use ROW_NUMBER() OVER (PARTITION BY …) … WHERE rn = 1")
	}
	if s.IntoClause != nil {
		return nil, 0, b.s.errAt(0, "SELECT INTO is not supported: use CREATE SINK")
	}
	if len(s.FromClause) == 0 {
		return nil, 0, b.s.errAt(location(s.TargetList[0]), "a streaming query reads a source: FROM is missing")
	}
	from, err := b.fromList(s.FromClause)
	if err != nil {
		return nil, 0, err
	}
	if s.WhereClause != nil {
		sc := &scope{cols: from.cols()}
		w, err := b.expr(sc, s.WhereClause)
		if err != nil {
			return nil, 0, err
		}
		if w.Type.Kind != plan.Bool && w.Type.Kind != plan.Null {
			return nil, 0, b.s.errAt(location(s.WhereClause), "argument of WHERE must be boolean, not %s", w.Type)
		}
		from.push(conjuncts(w))
	}
	in, err := b.finish(from)
	if err != nil {
		return nil, 0, err
	}
	hasAgg := len(s.GroupClause) > 0 || s.HavingClause != nil || containsAgg(s.TargetList)
	if in.tvf != nil && !hasAgg {
		return nil, 0, b.s.errAt(location(s.FromClause[0]), "the rows of a window table function must be aggregated: GROUP BY window_start, window_end (windowed rows without an aggregate are not supported yet)")
	}
	if hasAgg {
		r, err = b.aggregate(s, in)
	} else {
		r, err = b.project(s.TargetList, s.WindowClause, in)
	}
	if err == nil && distinct {
		r = distinctRel(r)
	}
	return r, limit, err
}

// distinctRel is SELECT DISTINCT of r: an unbounded aggregate grouping
// by every column, with no aggregate.
func distinctRel(r *rel) *rel {
	all := make([]int, len(r.cols))
	for i := range all {
		all[i] = i
	}
	out := &rel{n: &groupAggNode{in: r, groups: all}, cols: append([]col{}, r.cols...), rowtime: -1, proctime: -1,
		watermarked: r.watermarked, mode: plan.Retract, ukey: all, why: "DISTINCT"}
	return out
}

// containsAgg reports whether a select list calls an aggregate function.
func containsAgg(targets []*pg.Node) bool {
	found := false
	var walk func(n *pg.Node)
	walk = func(n *pg.Node) {
		if n == nil || found {
			return
		}
		if f := n.GetFuncCall(); f != nil {
			name := strings.ToLower(f.Funcname[len(f.Funcname)-1].GetString_().GetSval())
			if _, ok := aggFuncs[name]; ok && f.Over == nil {
				found = true
				return
			}
		}
		m := n.ProtoReflect()
		fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("node"))
		if fd == nil {
			return
		}
		inner := m.Get(fd).Message()
		fields := inner.Descriptor().Fields()
		for i := 0; i < fields.Len(); i++ {
			f := fields.Get(i)
			if f.Message() == nil || f.Message().FullName() != "pg_query.Node" {
				continue
			}
			if f.IsList() {
				l := inner.Get(f).List()
				for j := 0; j < l.Len(); j++ {
					walk(l.Get(j).Message().Interface().(*pg.Node))
				}
			} else if inner.Has(f) {
				walk(inner.Get(f).Message().Interface().(*pg.Node))
			}
		}
	}
	for _, t := range targets {
		walk(t)
	}
	return found
}

// conjuncts splits an AND into its parts.
func conjuncts(e plan.Expr) []plan.Expr {
	if e.Op == plan.OpCall && e.Fn == "and" {
		var out []plan.Expr
		for _, a := range e.Args {
			out = append(out, conjuncts(a)...)
		}
		return out
	}
	return []plan.Expr{e}
}

func and(es []plan.Expr) *plan.Expr {
	switch len(es) {
	case 0:
		return nil
	case 1:
		return &es[0]
	}
	e := plan.Call("and", plan.Type{Kind: plan.Bool}, es...)
	return &e
}

// fromTree is a FROM clause before its WHERE is pushed down: a relation,
// or a join of two trees with the conditions that concern both.
type fromTree struct {
	leaf        *rel
	left, right *fromTree
	conds       []plan.Expr
	// filters are conditions on the leaf alone, applied above it.
	filters []plan.Expr
	off     int
	// jtype is an outer join's type; above are the WHERE conditions on
	// its side that NULLs pad, which hold only after the join.
	jtype plan.JoinType
	above []plan.Expr
}

// preserves reports whether an outer join keeps every row of side (0
// left, 1 right).
func (t *fromTree) preserves(side int) bool {
	switch t.jtype {
	case plan.LeftJoin:
		return side == 0
	case plan.RightJoin:
		return side == 1
	case plan.FullJoin:
		return true
	}
	return false
}

func (t *fromTree) cols() []col {
	if t.leaf != nil {
		return t.leaf.cols
	}
	return append(append([]col{}, t.left.cols()...), t.right.cols()...)
}

// push gives each condition to the lowest part of the tree that has all
// the columns it reads (filter push-down): a leaf's own filter, or the
// join whose both sides it reads.
func (t *fromTree) push(conds []plan.Expr) {
	if t.leaf != nil {
		t.filters = append(t.filters, conds...)
		return
	}
	nl := len(t.left.cols())
	var l, r []plan.Expr
	for _, c := range conds {
		lo, hi := colRange(c)
		switch {
		case t.jtype != plan.InnerJoin && (hi < 0 || hi < nl && !t.preserves(0) || lo >= nl && !t.preserves(1) || lo < nl && hi >= nl):
			// A WHERE condition reading a side NULLs may pad holds
			// after the join, not before.
			t.above = append(t.above, c)
		case hi < 0: // no column: stays here
			t.conds = append(t.conds, c)
		case hi < nl:
			l = append(l, c)
		case lo >= nl:
			r = append(r, shift(c, -nl))
		default:
			t.conds = append(t.conds, c)
		}
	}
	if len(l) > 0 {
		t.left.push(l)
	}
	if len(r) > 0 {
		t.right.push(r)
	}
}

// colRange is the lowest and highest column an expression reads (-1, -1:
// none).
func colRange(e plan.Expr) (lo, hi int) {
	lo, hi = -1, -1
	var walk func(e plan.Expr)
	walk = func(e plan.Expr) {
		if e.Op == plan.OpCol {
			if lo < 0 || e.Col < lo {
				lo = e.Col
			}
			if e.Col > hi {
				hi = e.Col
			}
		}
		for _, a := range e.Args {
			walk(a)
		}
	}
	walk(e)
	return lo, hi
}

// shift moves an expression's column references by d.
func shift(e plan.Expr, d int) plan.Expr {
	if e.Op == plan.OpCol {
		e.Col += d
		return e
	}
	if len(e.Args) > 0 {
		args := make([]plan.Expr, len(e.Args))
		for i, a := range e.Args {
			args[i] = shift(a, d)
		}
		e.Args = args
	}
	return e
}

// fromList binds FROM a, b, … (a comma is an inner join whose conditions
// come from WHERE).
func (b *binder) fromList(items []*pg.Node) (*fromTree, error) {
	t, err := b.fromItem(items[0])
	if err != nil {
		return nil, err
	}
	for _, it := range items[1:] {
		r, err := b.fromItem(it)
		if err != nil {
			return nil, err
		}
		t = &fromTree{left: t, right: r, off: location(it)}
	}
	return t, nil
}

func (b *binder) fromItem(n *pg.Node) (*fromTree, error) {
	switch x := n.Node.(type) {
	case *pg.Node_RangeVar:
		r, err := b.relation(x.RangeVar.Relname, int(x.RangeVar.Location))
		if err != nil {
			return nil, err
		}
		qual := x.RangeVar.Relname
		if x.RangeVar.Alias != nil {
			qual = x.RangeVar.Alias.Aliasname
		}
		return &fromTree{leaf: requalify(r, qual), off: int(x.RangeVar.Location)}, nil
	case *pg.Node_RangeSubselect:
		if x.RangeSubselect.Lateral {
			return nil, b.s.errAt(location(x.RangeSubselect.Subquery), "LATERAL is not supported")
		}
		r, limit, err := b.query(x.RangeSubselect.Subquery.GetSelectStmt())
		if err != nil {
			return nil, err
		}
		if limit >= 0 {
			return nil, b.s.errAt(location(x.RangeSubselect.Subquery), "LIMIT in a subquery is not supported on streams")
		}
		qual := ""
		if x.RangeSubselect.Alias != nil {
			qual = x.RangeSubselect.Alias.Aliasname
		}
		return &fromTree{leaf: requalify(r, qual), off: location(x.RangeSubselect.Subquery)}, nil
	case *pg.Node_RangeFunction:
		r, err := b.windowTVF(x.RangeFunction)
		if err != nil {
			return nil, err
		}
		return &fromTree{leaf: r}, nil
	case *pg.Node_JoinExpr:
		j := x.JoinExpr
		jtype := plan.InnerJoin
		switch j.Jointype {
		case pg.JoinType_JOIN_INNER:
		case pg.JoinType_JOIN_LEFT:
			jtype = plan.LeftJoin
		case pg.JoinType_JOIN_RIGHT:
			jtype = plan.RightJoin
		case pg.JoinType_JOIN_FULL:
			jtype = plan.FullJoin
		default:
			return nil, b.s.errAt(location(j.Rarg), "%s JOIN is not supported", strings.TrimPrefix(j.Jointype.String(), "JOIN_"))
		}
		if j.IsNatural || len(j.UsingClause) > 0 {
			return nil, b.s.errAt(location(j.Rarg), "NATURAL and USING joins are not supported: write ON")
		}
		l, err := b.fromItem(j.Larg)
		if err != nil {
			return nil, err
		}
		r, err := b.fromItem(j.Rarg)
		if err != nil {
			return nil, err
		}
		t := &fromTree{left: l, right: r, off: location(j.Rarg)}
		if j.Quals == nil && jtype != plan.InnerJoin {
			return nil, b.s.errAt(location(j.Rarg), "an outer join needs ON")
		}
		if j.Quals != nil {
			on, err := b.expr(&scope{cols: t.cols()}, j.Quals)
			if err != nil {
				return nil, err
			}
			if jtype == plan.InnerJoin {
				t.push(conjuncts(on))
			} else {
				// ON selects the matches: a condition on the side NULLs
				// pad filters it before the join; any other stays the
				// join's.
				nl := len(l.cols())
				var down []plan.Expr
				for _, c := range conjuncts(on) {
					lo, hi := colRange(c)
					switch {
					case hi >= 0 && hi < nl && !(jtype == plan.LeftJoin || jtype == plan.FullJoin):
						l.push([]plan.Expr{c})
					case lo >= nl && !(jtype == plan.RightJoin || jtype == plan.FullJoin):
						down = append(down, shift(c, -nl))
					default:
						t.conds = append(t.conds, c)
					}
				}
				if len(down) > 0 {
					r.push(down)
				}
			}
			t.jtype = jtype
		}
		return t, nil
	}
	return nil, b.s.errAt(location(n), "unsupported FROM item %s", nodeName(n))
}

// requalify names a relation's columns by qual (a table or an alias).
func requalify(r *rel, qual string) *rel {
	out := *r
	out.cols = make([]col, len(r.cols))
	for i, c := range r.cols {
		c.qual = qual
		out.cols[i] = c
	}
	return &out
}

// relation is a source or view by name.
func (b *binder) relation(name string, off int) (*rel, error) {
	if src, ok := b.cat.sources[name]; ok {
		if src.readErr != nil {
			return nil, src.readErr
		}
		if src.pk != nil && !src.upsert {
			return nil, b.s.errAt(off, "%s has a PRIMARY KEY but its messages are not upserts: declare it FORMAT UPSERT ENCODE JSON (a message is its key's latest row, an empty one deletes it), or drop the key", name)
		}
		r := &rel{n: &scanNode{src: src}, rowtime: src.rowtime, proctime: src.proctime, watermarked: src.rowtime >= 0}
		for _, c := range src.cols {
			r.cols = append(r.cols, col{name: c.Name, t: c.Type, qual: name})
		}
		if src.upsert {
			r.mode, r.why = plan.Retract, "the upsert source "+name
			for _, k := range src.pk {
				r.ukey = append(r.ukey, indexOf(src.cols, k))
			}
		}
		return r, nil
	}
	if v, ok := b.cat.views[name]; ok {
		r, limit, err := b.query(v.query)
		if err != nil {
			return nil, err
		}
		if limit >= 0 {
			return nil, b.s.errAt(off, "view %s has a LIMIT, which streams do not support", name)
		}
		return r, nil
	}
	return nil, b.s.errAt(off, "relation %q does not exist%s", name, didYouMean(name, b.cat.names()))
}

// finish turns a FROM tree with its pushed conditions into a relation.
func (b *binder) finish(t *fromTree) (*rel, error) {
	if t.leaf != nil && t.leaf.rank != nil {
		rest, r, err := b.topN(t.leaf, t.filters, t.off)
		if err != nil {
			return nil, err
		}
		t = &fromTree{leaf: r, filters: rest, off: t.off}
	}
	if t.leaf != nil {
		if len(t.filters) == 0 {
			return t.leaf, nil
		}
		if t.leaf.tvf != nil {
			return nil, b.s.errAt(t.off, "filter the rows of a window table function in a subquery it reads, not in the WHERE of its aggregate")
		}
		return filterRel(t.leaf, and(t.filters)), nil
	}
	l, err := b.finish(t.left)
	if err != nil {
		return nil, err
	}
	r, err := b.finish(t.right)
	if err != nil {
		return nil, err
	}
	j, err := b.join(l, r, t.conds, t.jtype, t.off)
	if err != nil || len(t.above) == 0 {
		return j, err
	}
	return filterRel(j, and(t.above)), nil
}

// filterRel is r filtered by f.
func filterRel(r *rel, f *plan.Expr) *rel {
	out := &rel{n: &calcNode{in: r, filter: f}, cols: r.cols}
	m := map[int]int{}
	for i := range r.cols {
		m[i] = i
	}
	r.carry(out, m)
	out.tvf = r.tvf
	return out
}

// windowTVF binds TUMBLE(t, col, size), HOP(t, col, slide, size) and
// SESSION(t, col, gap).
func (b *binder) windowTVF(f *pg.RangeFunction) (*rel, error) {
	off := 0
	if len(f.Functions) != 1 {
		return nil, b.s.errAt(off, "one table function at a time")
	}
	call := f.Functions[0].GetList().GetItems()[0].GetFuncCall()
	if call == nil {
		return nil, b.s.errAt(off, "unsupported table function")
	}
	off = int(call.Location)
	name := strings.ToLower(call.Funcname[len(call.Funcname)-1].GetString_().GetSval())
	var kind plan.WindowKind
	want := 3
	switch name {
	case "tumble":
		kind = plan.Tumble
	case "hop":
		kind, want = plan.Hop, 4
	case "session":
		kind = plan.Session
	default:
		return nil, b.s.errAt(off, "table function %s does not exist (TUMBLE, HOP and SESSION do)", name)
	}
	if len(call.Args) != want {
		usage := map[plan.WindowKind]string{plan.Tumble: "TUMBLE(relation, time_column, size)", plan.Hop: "HOP(relation, time_column, slide, size)", plan.Session: "SESSION(relation, time_column, gap)"}
		return nil, b.s.errAt(off, "%s takes %d arguments: %s", strings.ToUpper(name), want, usage[kind])
	}
	tref := call.Args[0].GetColumnRef()
	if tref == nil || len(tref.Fields) != 1 {
		return nil, b.s.errAt(location(call.Args[0]), "the first argument of %s is a source or view by name", strings.ToUpper(name))
	}
	tname := tref.Fields[0].GetString_().GetSval()
	in, err := b.relation(tname, int(tref.Location))
	if err != nil {
		return nil, err
	}
	qual := tname
	if f.Alias != nil {
		qual = f.Alias.Aliasname
	}
	in = requalify(in, qual)
	if in.updating() {
		return nil, b.s.errAt(off, "%s over results that update (%s) is not supported: windows take append-only rows", strings.ToUpper(name), in.why)
	}
	tc, err := b.expr(&scope{cols: in.cols}, call.Args[1])
	if err != nil {
		return nil, err
	}
	w := plan.Window{Kind: kind}
	switch {
	case tc.Op != plan.OpCol:
		return nil, b.s.errAt(location(call.Args[1]), "the time column of %s must be a column", strings.ToUpper(name))
	case tc.Col == in.proctime:
		w.ProcessingTime = true
	case tc.Col != in.rowtime:
		return nil, b.s.errAt(location(call.Args[1]), "%s is not a time attribute of %s: windows need the column its WATERMARK FOR declares (event time) or a PROCTIME() column", in.cols[tc.Col].name, tname)
	}
	durs := make([]int64, 0, 2)
	for _, a := range call.Args[2:] {
		d, err := b.duration(a)
		if err != nil {
			return nil, err
		}
		durs = append(durs, d)
	}
	switch kind {
	case plan.Tumble:
		w.Size, w.Slide = durs[0], durs[0]
	case plan.Hop:
		w.Slide, w.Size = durs[0], durs[1]
		if w.Slide > w.Size {
			return nil, b.s.errAt(location(call.Args[2]), "HOP slide %s exceeds the window size %s", ms(w.Slide), ms(w.Size))
		}
		if w.Size%w.Slide != 0 {
			return nil, b.s.errAt(location(call.Args[3]), "HOP size %s must be a multiple of its slide %s", ms(w.Size), ms(w.Slide))
		}
	case plan.Session:
		w.Gap = durs[0]
	}
	out := &rel{n: in.n, cols: append([]col{}, in.cols...), rowtime: in.rowtime, proctime: in.proctime, watermarked: in.watermarked}
	ts := plan.Type{Kind: plan.Timestamp}
	out.cols = append(out.cols, col{name: "window_start", qual: qual, t: ts}, col{name: "window_end", qual: qual, t: ts})
	out.tvf = &w
	if !w.ProcessingTime && !in.watermarked {
		return nil, b.s.errAt(off, "%s has no WATERMARK: event-time windows need one", tname)
	}
	return out, nil
}

func ms(d int64) time.Duration { return time.Duration(d) * time.Millisecond }

// duration is a constant positive INTERVAL in whole milliseconds.
func (b *binder) duration(n *pg.Node) (int64, error) {
	e, err := b.expr(&scope{}, n)
	if err != nil {
		return 0, err
	}
	if e.Op != plan.OpConst || e.Type.Kind != plan.Interval {
		return 0, b.s.errAt(location(n), "want a constant INTERVAL, e.g. INTERVAL '10' SECOND")
	}
	var us int64
	fmt.Sscan(e.Lit, &us)
	if us <= 0 || us%1000 != 0 {
		return 0, b.s.errAt(location(n), "window durations are positive whole milliseconds")
	}
	return us / 1000, nil
}

// project binds a select list without aggregates; windows are the
// SELECT's WINDOW clause.
func (b *binder) project(targets, windows []*pg.Node, in *rel) (*rel, error) {
	// Window functions add their results as columns past in's, which
	// the select items read: ROW_NUMBER() numbers the rows (a TopN),
	// aggregates OVER a ROWS frame compute over the rows around each.
	var overs []*pg.FuncCall
	numbered := false
	for _, t := range targets {
		f := t.GetResTarget().Val.GetFuncCall()
		if f == nil || f.Over == nil {
			continue
		}
		w, err := b.namedWindow(f, windows)
		if err != nil {
			return nil, err
		}
		f.Over = w
		overs = append(overs, f)
		numbered = numbered || funcName(f) == "row_number"
	}
	inCols := len(in.cols)
	overCol := map[*pg.FuncCall]int{}
	switch {
	case numbered && len(overs) > 1:
		return nil, b.s.errAt(int(overs[1].Location), "one window function per SELECT when it is ROW_NUMBER()")
	case numbered:
		r, err := b.rowNumber(in, overs[0])
		if err != nil {
			return nil, err
		}
		in, overCol[overs[0]] = r, r.rank.col
	case len(overs) > 0:
		r, err := b.overAgg(in, overs, overCol)
		if err != nil {
			return nil, err
		}
		in = r
	}
	sc := &scope{cols: in.cols}
	var exprs []plan.Expr
	var cols []col
	m := map[int]int{}
	for _, t := range targets {
		rt := t.GetResTarget()
		if star, qual := isStar(rt.Val); star {
			n := 0
			for i, c := range in.cols {
				if qual != "" && c.qual != qual || i >= inCols {
					continue
				}
				m[i] = len(exprs)
				exprs = append(exprs, plan.ColRef(i, c.t))
				cols = append(cols, col{name: c.name, qual: c.qual, t: c.t})
				n++
			}
			if n == 0 {
				return nil, b.s.errAt(int(rt.Location), "missing FROM-clause entry for table %q", qual)
			}
			continue
		}
		var e plan.Expr
		if f := rt.Val.GetFuncCall(); f != nil && f.Over != nil {
			e = plan.ColRef(overCol[f], in.cols[overCol[f]].t)
		} else {
			var err error
			if e, err = b.expr(sc, rt.Val); err != nil {
				return nil, err
			}
		}
		name := rt.Name
		if name == "" {
			name = defaultName(rt.Val)
		}
		if e.Op == plan.OpCol {
			if _, ok := m[e.Col]; !ok {
				m[e.Col] = len(exprs)
			}
		}
		exprs = append(exprs, e)
		cols = append(cols, col{name: name, t: e.Type})
	}
	out := &rel{n: &calcNode{in: in, project: exprs}, cols: cols}
	in.carry(out, m)
	return out, nil
}

// rowNumber binds ROW_NUMBER() OVER (PARTITION BY … ORDER BY …) over in:
// in's columns and the row number, which a WHERE rn <= N above must
// bound (a TopN).
func (b *binder) rowNumber(in *rel, f *pg.FuncCall) (*rel, error) {
	off := int(f.Location)
	if name := funcName(f); name != "row_number" || len(f.Args) > 0 {
		return nil, b.s.errAt(off, "window function %s() OVER (…) is not supported: ROW_NUMBER() OVER (PARTITION BY … ORDER BY …), filtered by WHERE rn <= N in the query around it, is (a TopN)", name)
	}
	if in.tvf != nil {
		return nil, b.s.errAt(off, "ROW_NUMBER() over a window table function's rows is not supported")
	}
	partition, order, err := b.window(in, f, "ROW_NUMBER() OVER needs an ORDER BY: which rows come first")
	if err != nil {
		return nil, err
	}
	n := &rankNode{in: in, off: off, partition: partition, order: order}
	out := &rel{n: n, cols: append(append([]col{}, in.cols...), col{name: "row_number", t: plan.Type{Kind: plan.Int64}}),
		rowtime: -1, proctime: -1, watermarked: in.watermarked, mode: plan.Retract, why: "ROW_NUMBER() OVER (…)"}
	out.rank = &rankAttr{col: len(in.cols), node: n}
	// Partition and row number identify a row.
	out.ukey = append(append([]int{}, n.partition...), len(in.cols))
	return out, nil
}

// namedWindow resolves the window f names from the WINDOW clause: OVER
// w is w's definition, OVER (w ROWS …) w's with its own frame.
func (b *binder) namedWindow(f *pg.FuncCall, windows []*pg.Node) (*pg.WindowDef, error) {
	w := f.Over
	name := w.Refname
	if name == "" && len(w.PartitionClause) == 0 && len(w.OrderClause) == 0 {
		name = w.Name
	}
	if name == "" {
		return w, nil
	}
	for _, d := range windows {
		def := d.GetWindowDef()
		if def == nil || def.Name != name {
			continue
		}
		if w.Refname == "" {
			return def, nil
		}
		if len(w.PartitionClause) > 0 || len(w.OrderClause) > 0 && len(def.OrderClause) > 0 {
			return nil, b.s.errAt(int(f.Location), "OVER (%s …) cannot override window %s's PARTITION BY or ORDER BY", name, name)
		}
		r := &pg.WindowDef{PartitionClause: def.PartitionClause, OrderClause: def.OrderClause, FrameOptions: def.FrameOptions,
			StartOffset: def.StartOffset, EndOffset: def.EndOffset, Location: w.Location}
		if len(w.OrderClause) > 0 {
			r.OrderClause = w.OrderClause
		}
		if w.FrameOptions&frameNonDefault != 0 {
			r.FrameOptions, r.StartOffset, r.EndOffset = w.FrameOptions, w.StartOffset, w.EndOffset
		}
		return r, nil
	}
	return nil, b.s.errAt(int(f.Location), "window %q does not exist", name)
}

func funcName(f *pg.FuncCall) string {
	return strings.ToLower(f.Funcname[len(f.Funcname)-1].GetString_().GetSval())
}

// window binds the PARTITION BY and ORDER BY of f's OVER clause over in;
// noOrder is the error when there is no ORDER BY.
func (b *binder) window(in *rel, f *pg.FuncCall, noOrder string) ([]int, []plan.SortKey, error) {
	off := int(f.Location)
	w := f.Over
	if len(w.OrderClause) == 0 {
		return nil, nil, b.s.errAt(off, "%s", noOrder)
	}
	sc := &scope{cols: in.cols}
	var partition []int
	for _, p := range w.PartitionClause {
		e, err := b.expr(sc, p)
		if err != nil {
			return nil, nil, err
		}
		if e.Op != plan.OpCol {
			return nil, nil, b.s.errAt(location(p), "PARTITION BY a column (compute expressions in a subquery)")
		}
		partition = append(partition, e.Col)
	}
	var order []plan.SortKey
	for _, o := range w.OrderClause {
		sb := o.GetSortBy()
		e, err := b.expr(sc, sb.Node)
		if err != nil {
			return nil, nil, err
		}
		if e.Op != plan.OpCol {
			return nil, nil, b.s.errAt(location(sb.Node), "ORDER BY a column in OVER (compute expressions in a subquery)")
		}
		k := plan.SortKey{Col: e.Col, Desc: sb.SortbyDir == pg.SortByDir_SORTBY_DESC}
		switch sb.SortbyNulls {
		case pg.SortByNulls_SORTBY_NULLS_FIRST:
			k.NullsFirst = true
		case pg.SortByNulls_SORTBY_NULLS_LAST:
		default:
			// PostgreSQL's default: NULLs are larger than any value.
			k.NullsFirst = k.Desc
		}
		if sb.UseOp != nil {
			return nil, nil, b.s.errAt(location(sb.Node), "ORDER BY … USING is not supported")
		}
		order = append(order, k)
	}
	return partition, order, nil
}

// PostgreSQL's frame options (parsenodes.h's FRAMEOPTION_* bits).
const (
	frameNonDefault      = 0x1
	frameRows            = 0x4
	frameStartUnbounded  = 0x20 | 0x80
	frameEndUnbounded    = 0x40 | 0x100
	frameStartCurrent    = 0x200
	frameEndCurrent      = 0x400
	frameStartPreceding  = 0x800
	frameEndPreceding    = 0x1000
	frameStartFollowing  = 0x2000
	frameEndFollowing    = 0x4000
	frameExcludeAnything = 0x8000 | 0x10000 | 0x20000
)

// maxFrame bounds a frame's offsets: every change folds the frames of
// the rows around it again (the operator's limit).
const maxFrame = 10000

// overAgg binds aggregates OVER a ROWS frame, fs, over in: in's columns
// and one per aggregate, whose index it records in cols. The calls must
// share one window.
func (b *binder) overAgg(in *rel, fs []*pg.FuncCall, cols map[*pg.FuncCall]int) (*rel, error) {
	var n *overNode
	sc := &scope{cols: in.cols}
	for _, f := range fs {
		off := int(f.Location)
		name := funcName(f)
		fn, ok := aggFuncs[name]
		if !ok {
			return nil, b.s.errAt(off, "window function %s() OVER (…) is not supported: ROW_NUMBER() (a TopN, with WHERE rn <= N around it) and the aggregates count, sum, min, max and avg over a ROWS frame are", name)
		}
		if in.tvf != nil {
			return nil, b.s.errAt(off, "an aggregate OVER a window table function's rows is not supported")
		}
		if f.AggDistinct || f.AggFilter != nil || len(f.AggOrder) > 0 {
			return nil, b.s.errAt(off, "DISTINCT, FILTER and ORDER BY inside an aggregate OVER (…) are not supported")
		}
		partition, order, err := b.window(in, f, "an aggregate OVER (…) needs an ORDER BY and a ROWS frame: OVER (PARTITION BY … ORDER BY … ROWS BETWEEN n PRECEDING AND CURRENT ROW)")
		if err != nil {
			return nil, err
		}
		lo, hi, err := b.frame(f)
		if err != nil {
			return nil, err
		}
		if n == nil {
			n = &overNode{in: in, partition: partition, order: order, lo: lo, hi: hi}
		} else if !slices.Equal(n.partition, partition) || !slices.Equal(n.order, order) || n.lo != lo || n.hi != hi {
			return nil, b.s.errAt(off, "aggregates OVER different windows in one SELECT are not supported: one window per SELECT (nest the others in subqueries)")
		}
		call := plan.AggCall{Fn: fn, Arg: -1, Filter: -1}
		switch {
		case f.AggStar:
			if fn != plan.Count {
				return nil, b.s.errAt(off, "%s(*) is not a function: only count(*) is", name)
			}
			call.Type = plan.Type{Kind: plan.Int64}
		case len(f.Args) != 1:
			return nil, b.s.errAt(off, "%s takes one argument", name)
		default:
			arg, err := b.expr(sc, f.Args[0])
			if err != nil {
				return nil, err
			}
			if arg.Op != plan.OpCol {
				return nil, b.s.errAt(location(f.Args[0]), "the argument of an aggregate OVER (…) must be a column (compute it in a subquery)")
			}
			call.Arg = arg.Col
			if call.Type, err = aggType(fn, arg.Type); err != nil {
				return nil, b.s.errAt(off, "%v", err)
			}
		}
		i := slices.Index(n.aggs, call)
		if i < 0 {
			i = len(n.aggs)
			n.aggs = append(n.aggs, call)
		}
		cols[f] = len(in.cols) + i
	}
	out := &rel{n: n, cols: slices.Clone(in.cols), rowtime: -1, proctime: -1, watermarked: in.watermarked,
		mode: plan.Retract, why: "an aggregate OVER (… ROWS …)", ukey: in.ukey}
	for _, a := range n.aggs {
		out.cols = append(out.cols, col{name: string(a.Fn), t: a.Type})
	}
	return out, nil
}

// frame is the ROWS frame of f's OVER clause, as offsets from the current
// row: lo … hi.
func (b *binder) frame(f *pg.FuncCall) (lo, hi int64, err error) {
	off := int(f.Location)
	o := f.Over.FrameOptions
	switch {
	case o&frameNonDefault == 0:
		return 0, 0, b.s.errAt(off, "an aggregate OVER (…) needs a ROWS frame, e.g. ROWS BETWEEN 10 PRECEDING AND CURRENT ROW (the default frame, RANGE UNBOUNDED PRECEDING, is not supported: each row would update every row after it)")
	case o&frameRows == 0:
		return 0, 0, b.s.errAt(off, "RANGE and GROUPS frames are not supported: ROWS BETWEEN n PRECEDING AND … is")
	case o&frameExcludeAnything != 0:
		return 0, 0, b.s.errAt(off, "EXCLUDE in a frame is not supported")
	case o&(frameStartUnbounded|frameEndUnbounded) != 0:
		return 0, 0, b.s.errAt(off, "UNBOUNDED frames are not supported (each row would update every row after it): bound the frame, e.g. ROWS BETWEEN 100 PRECEDING AND CURRENT ROW")
	}
	bound := func(n *pg.Node, preceding, following, current bool) (int64, error) {
		if current {
			return 0, nil
		}
		e, err := b.expr(&scope{}, n)
		if err != nil {
			return 0, err
		}
		var v int64
		if e.Op != plan.OpConst || e.IsNull || !e.Type.Numeric() || e.Type.Kind == plan.Decimal {
			return 0, b.s.errAt(location(n), "a frame's offset must be a constant whole number")
		}
		fmt.Sscan(e.Lit, &v)
		if v < 0 || v > maxFrame {
			return 0, b.s.errAt(location(n), "a frame's offset must be 0 to %d, not %d", maxFrame, v)
		}
		if preceding {
			return -v, nil
		}
		return v, nil
	}
	if lo, err = bound(f.Over.StartOffset, o&frameStartPreceding != 0, o&frameStartFollowing != 0, o&frameStartCurrent != 0); err != nil {
		return 0, 0, err
	}
	if hi, err = bound(f.Over.EndOffset, o&frameEndPreceding != 0, o&frameEndFollowing != 0, o&frameEndCurrent != 0); err != nil {
		return 0, 0, err
	}
	if lo > hi {
		return 0, 0, b.s.errAt(off, "the frame starts after it ends (%s)", frameString(lo, hi))
	}
	if hi-lo >= maxFrame {
		return 0, 0, b.s.errAt(off, "a frame of %d rows: at most %d", hi-lo+1, maxFrame)
	}
	return lo, hi, nil
}

// topN applies the conditions on a ROW_NUMBER() column to its node: rn <=
// N, rn < N or rn = 1 bound it; the rest stay filters. A limit of 1 makes
// the partition a unique key (the row number is always 1).
func (b *binder) topN(r *rel, conds []plan.Expr, off int) ([]plan.Expr, *rel, error) {
	var rest []plan.Expr
	rn := r.rank.col
	for _, c := range conds {
		lo, hi := colRange(c)
		if lo != rn || hi != rn {
			if lo <= rn && rn <= hi {
				return nil, nil, b.s.errAt(off, "a condition on the row number must be alone: rn <= N")
			}
			rest = append(rest, c)
			continue
		}
		x, y := c.Args[0], c.Args[1]
		fn := c.Fn
		if x.Op == plan.OpConst {
			x, y = y, x
			fn = map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}[fn]
		}
		var n int64
		if y.Op != plan.OpConst || y.IsNull || !y.Type.Numeric() || y.Type.Kind == plan.Decimal || x.Op != plan.OpCol {
			return nil, nil, b.s.errAt(off, "the row number's condition must be rn <= N, rn < N or rn = 1 with a whole number N")
		}
		fmt.Sscan(y.Lit, &n)
		switch {
		case fn == "<=":
		case fn == "<":
			n--
		case fn == "=" && n == 1:
		default:
			return nil, nil, b.s.errAt(off, "the row number's condition must be rn <= N, rn < N or rn = 1 (a TopN keeps the first N rows)")
		}
		if n < 1 {
			return nil, nil, b.s.errAt(off, "a TopN of %d rows keeps nothing", n)
		}
		node := r.rank.node
		if node.limit == 0 || n < node.limit {
			node.limit = n
		}
	}
	out := *r
	out.rank = nil
	if r.rank.node.limit == 1 && r.ukey != nil {
		// ukey is the partition and the row number, which is 1.
		out.ukey = r.ukey[:len(r.ukey)-1]
	}
	return rest, &out, nil
}

func isStar(n *pg.Node) (bool, string) {
	c := n.GetColumnRef()
	if c == nil {
		return false, ""
	}
	last := c.Fields[len(c.Fields)-1]
	if _, ok := last.Node.(*pg.Node_AStar); !ok {
		return false, ""
	}
	if len(c.Fields) == 2 {
		return true, c.Fields[0].GetString_().GetSval()
	}
	return true, ""
}

// defaultName is the name PostgreSQL gives an unnamed select item.
func defaultName(n *pg.Node) string {
	switch x := n.Node.(type) {
	case *pg.Node_ColumnRef:
		f := x.ColumnRef.Fields
		return f[len(f)-1].GetString_().GetSval()
	case *pg.Node_FuncCall:
		return strings.ToLower(x.FuncCall.Funcname[len(x.FuncCall.Funcname)-1].GetString_().GetSval())
	case *pg.Node_TypeCast:
		return defaultName(x.TypeCast.Arg)
	case *pg.Node_CaseExpr:
		return "case"
	case *pg.Node_CoalesceExpr:
		return "coalesce"
	}
	return "?column?"
}

// unionAll binds a UNION ALL: every branch's columns cast to a common
// type, by position.
func (b *binder) unionAll(s *pg.SelectStmt) (*rel, error) {
	var branches []*rel
	var collect func(s *pg.SelectStmt) error
	all := s.All
	collect = func(s *pg.SelectStmt) error {
		if s.Op == pg.SetOperation_SETOP_UNION && s.All == all {
			if err := collect(s.Larg); err != nil {
				return err
			}
			return collect(s.Rarg)
		}
		if s.Op != pg.SetOperation_SETOP_NONE {
			r, limit, err := b.query(s)
			if err != nil {
				return err
			}
			if limit >= 0 {
				return b.s.errAt(location(s.LimitCount), "LIMIT inside UNION is not supported")
			}
			branches = append(branches, r)
			return nil
		}
		r, limit, err := b.query(s)
		if err != nil {
			return err
		}
		if limit >= 0 {
			return b.s.errAt(location(s.LimitCount), "LIMIT inside UNION ALL is not supported")
		}
		branches = append(branches, r)
		return nil
	}
	if err := collect(s); err != nil {
		return nil, err
	}
	first := branches[0]
	for _, br := range branches[1:] {
		if len(br.cols) != len(first.cols) {
			return nil, b.s.errAt(location(s.Rarg.GetTargetList()[0]), "each UNION ALL query must have the same number of columns (%d and %d)", len(first.cols), len(br.cols))
		}
	}
	types := make([]plan.Type, len(first.cols))
	for i := range types {
		types[i] = first.cols[i].t
		for _, br := range branches[1:] {
			ts := []plan.Type{types[i], br.cols[i].t}
			_, res, err := resolveCommon(ts)
			if err != nil {
				return nil, b.s.errAt(location(s.Rarg.GetTargetList()[0]), "UNION ALL column %d (%s): types %s and %s cannot be matched", i+1, first.cols[i].name, types[i], br.cols[i].t)
			}
			types[i] = res
		}
	}
	var inputs []*rel
	for _, br := range branches {
		var exprs []plan.Expr
		same := true
		for i, c := range br.cols {
			e, err := b.cast(plan.ColRef(i, c.t), types[i], 0)
			if err != nil {
				return nil, err
			}
			same = same && c.t == types[i]
			exprs = append(exprs, e)
		}
		if !same {
			cols := make([]col, len(br.cols))
			for i, c := range br.cols {
				cols[i] = col{name: c.name, t: types[i]}
			}
			br = &rel{n: &calcNode{in: br, project: exprs}, cols: cols, rowtime: -1, proctime: -1, watermarked: br.watermarked}
		}
		inputs = append(inputs, br)
	}
	out := &rel{n: &unionNode{inputs: inputs}, rowtime: -1, proctime: -1}
	for i, c := range first.cols {
		out.cols = append(out.cols, col{name: c.name, t: types[i]})
	}
	for _, in := range branches {
		out.watermarked = out.watermarked || in.watermarked
		if in.updating() {
			out.mode, out.why = plan.Retract, in.why
		}
	}
	return out, nil
}

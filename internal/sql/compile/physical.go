package compile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/weirproject/weir/internal/sql/plan"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// The physical planner: a logical plan becomes the vertices of a job
// graph. Projections and filters fuse into the operator that produces
// their input where it can take them (a calc after a source decodes and
// filters the source's records in one step; a calc after a join is the
// join's own projection), and every edge into a stateful operator is
// keyed by the columns the operator groups or joins on.

// builder builds one job's graph.
type builder struct {
	set     settings
	g       *weirv1.JobGraph
	par     int32
	ops     map[string]*plan.Operator
	sources map[*source]string
	names   map[string]int
	calcs   int
	// needed says which of each relation's columns some operator above
	// reads (neededColumns); a source's calc writes NULL for the others.
	needed map[*rel][]bool
}

// stage is a vertex whose output a consumer reads: the consumer sets the
// encoding the vertex writes (enc points into its operator).
type stage struct {
	vertex string
	schema plan.Schema
	enc    *plan.Encoding
	// agg is set when the vertex is a window aggregate whose output
	// items a projection of plain columns may reorder in place.
	agg *plan.WindowAgg
	// join is set when the vertex is a join, whose projection and
	// filter a calc above it becomes.
	join *plan.Join
	// mode is the changelog mode of the rows the vertex emits.
	mode plan.Mode
}

// rows has the stage write rows for another SQL operator: the row
// format, with their kinds when they are a changelog.
func (st *stage) rows() {
	st.enc.Format = plan.FormatRow
	st.enc.Changelog = st.updating()
}

func (st *stage) updating() bool { return st.mode == plan.Retract }

// decoding is how an operator reads the stage's rows.
func (st *stage) decoding() plan.Decoding {
	return plan.Decoding{Format: plan.FormatRow, Schema: st.schema, Timestamp: -1, Changelog: st.updating()}
}

func newBuilder(name string, par int, set settings) *builder {
	if par <= 0 {
		par = 1
	}
	return &builder{
		g:       &weirv1.JobGraph{Name: name},
		par:     int32(par),
		ops:     map[string]*plan.Operator{},
		sources: map[*source]string{},
		set:     set,
		names:   map[string]int{},
	}
}

// unique makes a vertex name unique in the job.
func (b *builder) unique(name string) string {
	b.names[name]++
	if n := b.names[name]; n > 1 {
		return fmt.Sprintf("%s-%d", name, n)
	}
	return name
}

// add adds a vertex running a SQL operator.
func (b *builder) add(name, operator string, op *plan.Operator, inputs ...*weirv1.JobEdge) *weirv1.JobVertex {
	v := &weirv1.JobVertex{Name: name, Operator: operator, Parallelism: b.par, Inputs: inputs}
	b.g.Vertices = append(b.g.Vertices, v)
	b.ops[name] = op
	return v
}

// edge is an input edge from a stage, keyed by cols (hash) or forward.
func edge(from *stage, keyed bool) *weirv1.JobEdge {
	p := weirv1.Partitioner_PARTITIONER_FORWARD
	if keyed {
		p = weirv1.Partitioner_PARTITIONER_HASH
	}
	return &weirv1.JobEdge{Source: from.vertex, Partitioner: p}
}

// finish writes each SQL operator's plan into its vertex's config, and
// returns the physical plan as EXPLAIN prints it.
func (b *builder) finish() (*weirv1.JobGraph, string, error) {
	var phys strings.Builder
	for _, v := range b.g.Vertices {
		op, ok := b.ops[v.Name]
		if !ok || op == nil {
			if strings.HasPrefix(v.Description, "Sink ") {
				fmt.Fprintf(&phys, "%s [%s]: %s\n", v.Name, v.Operator, v.Description)
				continue
			}
			fmt.Fprintf(&phys, "%s [%s]\n", v.Name, v.Operator)
			continue
		}
		v.Description = op.Describe
		if op.Mode == "" {
			op.Mode = plan.AppendOnly
		}
		v.ChangelogMode = string(op.Mode)
		mode := ""
		if op.Mode != plan.AppendOnly {
			mode = " → changelog (" + string(op.Mode) + ")"
		}
		fmt.Fprintf(&phys, "%s [%s]: %s%s\n", v.Name, v.Operator, op.Describe, mode)
		s, err := plan.Marshal(op)
		if err != nil {
			return nil, "", err
		}
		cfg, err := structpb.NewStruct(map[string]any{"plan": s})
		if err != nil {
			return nil, "", err
		}
		v.Config = cfg
	}
	return b.g, phys.String(), nil
}

// build turns a relation into the stage producing its rows.
func (b *builder) build(r *rel) (*stage, error) {
	switch n := r.n.(type) {
	case *scanNode:
		if n.src.upsert {
			return b.upsertScan(r, n.src)
		}
		return b.calc(r, r, nil, nil, r.schema())
	case *calcNode:
		return b.calcOver(r, n)
	case *aggNode:
		return b.agg(r, n)
	case *joinNode:
		return b.join(r, n)
	case *unionNode:
		return b.union(r, n)
	case *groupAggNode:
		return b.groupAgg(r, n)
	case *rankNode:
		return b.topN(r, n, true)
	case *overNode:
		return b.overAgg(r, n)
	}
	return nil, fmt.Errorf("sql: unknown plan node %T", r.n)
}

// calcOver builds a projection and filter over its input, fused into it
// where possible.
func (b *builder) calcOver(r *rel, n *calcNode) (*stage, error) {
	in, filter, project := n.in, n.filter, n.project
	// A calc over a calc is one calc: substitute the inner's columns.
	for {
		inner, ok := in.n.(*calcNode)
		if !ok {
			break
		}
		if filter != nil {
			f := substitute(*filter, inner.project)
			filter = &f
		}
		if inner.filter != nil {
			if filter == nil {
				filter = inner.filter
			} else {
				filter = and([]plan.Expr{*inner.filter, *filter})
			}
		}
		if project == nil {
			project = inner.project
		} else if inner.project != nil {
			ps := make([]plan.Expr, len(project))
			for i, p := range project {
				ps[i] = substitute(p, inner.project)
			}
			project = ps
		}
		in = inner.in
	}
	if sc, ok := in.n.(*scanNode); ok && !sc.src.upsert {
		return b.calc(r, in, filter, project, r.schema())
	}
	var st *stage
	var err error
	if rk, ok := in.n.(*rankNode); ok {
		// The row number is an output column of the TopN only when the
		// calc reads it.
		used := make([]bool, len(in.cols))
		if filter != nil {
			markCols(used, *filter)
		}
		for _, p := range project {
			markCols(used, p)
		}
		st, err = b.topN(in, rk, project == nil || used[len(in.cols)-1])
	} else {
		st, err = b.build(in)
	}
	if err != nil {
		return nil, err
	}
	// Fold into a join: its filter and projection are over the pair
	// (not an outer join's filter: it holds after the NULLs pad).
	if st.join != nil && (filter == nil || st.join.Type == plan.InnerJoin) {
		j := st.join
		if filter != nil {
			f := substitute(*filter, j.Project)
			if j.Filter == nil {
				j.Filter = &f
			} else {
				j.Filter = and([]plan.Expr{*j.Filter, f})
			}
		}
		if project != nil {
			ps := make([]plan.Expr, len(project))
			for i, p := range project {
				ps[i] = substitute(p, j.Project)
			}
			j.Project = ps
		}
		j.Out = r.schema()
		st.schema = j.Out
		b.ops[st.vertex].Describe = describeJoin(j)
		return st, nil
	}
	// Reorder a window aggregate's output in place.
	if st.agg != nil && filter == nil && allCols(project) {
		a := st.agg
		items := make([]plan.OutputItem, len(project))
		for i, p := range project {
			items[i] = a.Output[p.Col]
		}
		a.Output, a.Out = items, r.schema()
		st.schema = a.Out
		b.ops[st.vertex].Describe = describeAgg(a)
		return st, nil
	}
	if identity(project, st.schema, r.schema()) {
		project = nil
	}
	if filter == nil && project == nil {
		return st, nil
	}
	st.rows()
	c := &plan.Calc{In: st.decoding(), Filter: filter, Project: project, Out: r.schema()}
	share(c)
	op := &plan.Operator{Calc: c, Describe: describeCalc(c, ""), Mode: st.mode}
	b.calcs++
	name := b.unique(fmt.Sprintf("calc-%d", b.calcs))
	b.add(name, "sql-calc", op, edge(st, false))
	return &stage{vertex: name, schema: c.Out, enc: &c.Enc, mode: st.mode}, nil
}

// pruneColumns writes NULL for the columns of a source's calc (project,
// nil for all of its input's, which out then lists) that nothing above
// reads (needed false), so that joins, TopNs and aggregates above keep
// and decode only what the query uses, as Flink prunes columns: a
// regular join of Nexmark's bids and auctions otherwise keeps every
// bid's url and extra forever. The schema stays the same, so state
// written with the columns still restores.
func pruneColumns(project []plan.Expr, out plan.Schema, needed []bool) []plan.Expr {
	if !slices.Contains(needed, false) {
		return project
	}
	ps := make([]plan.Expr, len(out))
	for i, c := range out {
		switch {
		case !needed[i]:
			ps[i] = plan.Expr{Op: plan.OpConst, IsNull: true, Type: c.Type}
		case project == nil:
			ps[i] = plan.ColRef(i, c.Type)
		default:
			ps[i] = project[i]
		}
	}
	return ps
}

// neededColumns computes, from root down, which columns of each relation
// an operator above reads: all of root's (the sink's), and below each
// node what it computes its used columns from, its keys and its filter.
// A TopN and an OVER aggregate read all their input's (they tell rows
// apart by all their values).
func neededColumns(root *rel) map[*rel][]bool {
	need := map[*rel][]bool{}
	var walk func(r *rel, used []bool)
	walk = func(r *rel, used []bool) {
		if prev, ok := need[r]; ok {
			grew := false
			for i, u := range used {
				if u && !prev[i] {
					prev[i], grew = true, true
				}
			}
			if !grew {
				return
			}
			used = prev
		} else {
			used = slices.Clone(used)
			need[r] = used
		}
		all := func(in *rel) []bool {
			a := make([]bool, len(in.cols))
			for i := range a {
				a[i] = true
			}
			return a
		}
		switch n := r.n.(type) {
		case *calcNode:
			in := make([]bool, len(n.in.cols))
			if n.filter != nil {
				markCols(in, *n.filter)
			}
			for i, p := range n.project {
				if i < len(used) && used[i] {
					markCols(in, p)
				}
			}
			if n.project == nil {
				// A filter alone passes every column on: the ones used
				// above, and the filter's own.
				for i := range in {
					in[i] = in[i] || i < len(used) && used[i]
				}
			}
			walk(n.in, in)
		case *aggNode:
			walk(n.in, aggInputs(len(n.in.cols), n.groups, n.aggs))
		case *groupAggNode:
			walk(n.in, aggInputs(len(n.in.cols), n.groups, n.aggs))
		case *joinNode:
			nl := len(n.left.cols)
			both := make([]bool, nl+len(n.right.cols))
			copy(both, used)
			for _, k := range n.lkeys {
				both[k] = true
			}
			for _, k := range n.rkeys {
				both[nl+k] = true
			}
			if n.filter != nil {
				markCols(both, *n.filter)
			}
			walk(n.left, both[:nl])
			walk(n.right, both[nl:])
		case *unionNode:
			for _, in := range n.inputs {
				walk(in, used)
			}
		case *rankNode:
			walk(n.in, all(n.in))
		case *overNode:
			walk(n.in, all(n.in))
		}
	}
	all := make([]bool, len(root.cols))
	for i := range all {
		all[i] = true
	}
	walk(root, all)
	return need
}

// aggInputs are the input columns an aggregate reads: its groups, its
// calls' arguments and FILTERs.
func aggInputs(n int, groups []int, aggs []plan.AggCall) []bool {
	in := make([]bool, n)
	for _, g := range groups {
		in[g] = true
	}
	for _, a := range aggs {
		if a.Arg >= 0 {
			in[a.Arg] = true
		}
		if a.Filter >= 0 {
			in[a.Filter] = true
		}
	}
	return in
}

// markCols marks the columns e reads.
func markCols(used []bool, e plan.Expr) {
	if e.Op == plan.OpCol && e.Fn != "agg" && e.Col < len(used) {
		used[e.Col] = true
	}
	for _, a := range e.Args {
		markCols(used, a)
	}
}

// identity reports whether a projection passes its input's columns on
// as they are, names included, which a calc can skip.
func identity(es []plan.Expr, in, out plan.Schema) bool {
	if len(es) != len(in) || len(out) != len(in) {
		return false
	}
	for i, e := range es {
		if e.Op != plan.OpCol || e.Col != i || e.Fn == "agg" || in[i].Name != out[i].Name {
			return false
		}
	}
	return true
}

func allCols(es []plan.Expr) bool {
	if es == nil {
		return false
	}
	for _, e := range es {
		if e.Op != plan.OpCol {
			return false
		}
	}
	return true
}

// substitute replaces column i of e by exprs[i].
func substitute(e plan.Expr, exprs []plan.Expr) plan.Expr {
	if exprs == nil {
		return e
	}
	if e.Op == plan.OpCol && e.Fn != "agg" {
		return exprs[e.Col]
	}
	if len(e.Args) > 0 {
		args := make([]plan.Expr, len(e.Args))
		for i, a := range e.Args {
			args[i] = substitute(a, exprs)
		}
		e.Args = args
		return fold(e)
	}
	return e
}

// calc builds the calc that reads a source's records: it decodes them
// into rows, filters and projects (projection and filter push-down: the
// rows a query does not want are dropped where they are read).
func (b *builder) calc(r, scan *rel, filter *plan.Expr, project []plan.Expr, out plan.Schema) (*stage, error) {
	src := scan.n.(*scanNode).src
	if project != nil || len(out) == len(src.cols) {
		// (Not the rows of a window table function, two columns wider
		// than their source, read as they are.)
		project = pruneColumns(project, out, b.needed[r])
	}
	if identity(project, src.cols, out) {
		project = nil
	}
	sv, dec, err := b.source(src)
	if err != nil {
		return nil, err
	}
	c := &plan.Calc{In: dec, Filter: filter, Project: project, Out: out}
	share(c)
	op := &plan.Operator{Calc: c, Describe: describeCalc(c, src.name)}
	b.calcs++
	name := b.unique(fmt.Sprintf("calc-%d", b.calcs))
	b.add(name, "sql-calc", op, &weirv1.JobEdge{Source: sv, Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD})
	return &stage{vertex: name, schema: out, enc: &c.Enc}, nil
}

// upsertScan reads an upsert source: a calc decodes each message into
// its key's latest row (+U) or, for a tombstone, the key's deletion (-D),
// and a normalize keyed by the primary key turns that into a retract
// stream, whose retractions carry the rows they take back. Filters and
// projections come after it: an update that a filter drops must still
// take the key's old row back.
func (b *builder) upsertScan(r *rel, src *source) (*stage, error) {
	sv, dec, err := b.source(src)
	if err != nil {
		return nil, err
	}
	dec.Key, dec.KeyFormat = r.ukey, dec.Format
	c := &plan.Calc{In: dec, Out: src.cols, Enc: plan.Encoding{Format: plan.FormatRow, Changelog: true, Key: r.ukey}}
	op := &plan.Operator{Calc: c, Describe: "Calc: read " + src.name + " (upsert by " + colList(schemaCols(src.cols), r.ukey) + ")", Mode: plan.Upsert}
	b.calcs++
	name := b.unique(fmt.Sprintf("calc-%d", b.calcs))
	b.add(name, "sql-calc", op, &weirv1.JobEdge{Source: sv, Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD})
	nz := &plan.Normalize{In: src.cols, Key: r.ukey, Enc: plan.Encoding{Format: plan.FormatRow, Changelog: true}, TTL: b.set.ttl}
	nop := &plan.Operator{Normalize: nz, Describe: "Normalize: the latest row per [" + colList(schemaCols(src.cols), r.ukey) + "] " + stateNote(nz.TTL, "one row per key"), Mode: plan.Retract}
	nname := b.unique("normalize-" + digest(nz.In, nz.Key))
	b.add(nname, "sql-normalize", nop, &weirv1.JobEdge{Source: name, Partitioner: weirv1.Partitioner_PARTITIONER_HASH})
	return &stage{vertex: nname, schema: src.cols, enc: &nz.Enc, mode: plan.Retract}, nil
}

// agg builds a window aggregate.
func (b *builder) agg(r *rel, n *aggNode) (*stage, error) {
	in, err := b.build(n.in)
	if err != nil {
		return nil, err
	}
	if in.updating() {
		return nil, fmt.Errorf("sql: a window aggregate over results that update")
	}
	in.rows()
	in.enc.Key = n.groups
	a := &plan.WindowAgg{In: in.schema, Window: n.window, Group: n.groups, Aggs: n.aggs, Out: r.schema()}
	for i := range n.groups {
		a.Output = append(a.Output, plan.OutputItem{Kind: "group", Index: i})
	}
	a.Output = append(a.Output, plan.OutputItem{Kind: "window_start"}, plan.OutputItem{Kind: "window_end"})
	for i := range n.aggs {
		a.Output = append(a.Output, plan.OutputItem{Kind: "agg", Index: i})
	}
	op := &plan.Operator{WindowAgg: a, Describe: describeAgg(a)}
	name := b.unique("window-aggregate-" + digest(a.In, a.Window, a.Group, a.Aggs))
	if twoPhase(a) && !idleSource(n.in) {
		// Each subtask folds its rows first, and only a partial per pane
		// crosses the network to the one subtask that has the whole
		// stream's group.
		local := &plan.WindowAgg{In: a.In, Window: a.Window, Group: a.Group, Aggs: a.Aggs, Enc: plan.Encoding{Format: plan.FormatRow, Key: a.Group}}
		lop := &plan.Operator{LocalAgg: local, Describe: "LocalAggregate " + windowString(a.Window) + " compute [" + aggList(a.Aggs, schemaCols(a.In)) + "] (partial, per pane)"}
		lname := b.unique("local-aggregate-" + digest(a.In, a.Window, a.Group, a.Aggs))
		b.add(lname, "sql-local-aggregate", lop, edge(in, false))
		in = &stage{vertex: lname, enc: &local.Enc}
		a.Partial = true
	}
	b.add(name, "sql-window-aggregate", op, edge(in, true))
	return &stage{vertex: name, schema: a.Out, enc: &a.Enc, agg: a}, nil
}

// join builds a join.
func (b *builder) join(r *rel, n *joinNode) (*stage, error) {
	l, err := b.build(n.left)
	if err != nil {
		return nil, err
	}
	rt, err := b.build(n.right)
	if err != nil {
		return nil, err
	}
	if (l.updating() || rt.updating()) && n.kind != plan.RegularJoin {
		return nil, fmt.Errorf("sql: a time-bounded join of results that update")
	}
	l.rows()
	rt.rows()
	l.enc.Key, rt.enc.Key = n.lkeys, n.rkeys
	j := &plan.Join{Kind: n.kind, Left: l.schema, Right: rt.schema, Lower: n.lower, Upper: n.upper, Size: n.size, Filter: n.filter, Out: r.schema()}
	mode := plan.AppendOnly
	if n.kind == plan.RegularJoin {
		j.TTL, j.Type, j.LeftChangelog, j.RightChangelog = b.set.ttl, n.jtype, l.updating(), rt.updating()
		if j.Type != plan.InnerJoin || j.LeftChangelog || j.RightChangelog {
			mode = plan.Retract
			j.Enc.Changelog = true
		}
	}
	for i, c := range r.schema() {
		j.Project = append(j.Project, plan.ColRef(i, c.Type))
	}
	op := &plan.Operator{Join: j, Describe: describeJoin(j), Mode: mode}
	parts := []any{j.Kind, j.Left, j.Right, n.lkeys, n.rkeys, j.Lower, j.Upper, j.Size}
	if mode == plan.Retract || j.TTL > 0 {
		// Another operator, and state layout, than an append-only
		// inner join's without a TTL.
		parts = append(parts, j.Type, j.LeftChangelog, j.RightChangelog, j.TTL > 0)
	}
	name := b.unique(fmt.Sprintf("%s-join-%s", n.kind, digest(parts...)))
	b.add(name, "sql-join", op, edge(l, true), edge(rt, true))
	return &stage{vertex: name, schema: j.Out, enc: &j.Enc, join: j, mode: mode}, nil
}

// twoPhase says whether a window aggregate runs in two phases, a local
// one per subtask and a global one (Flink's local-global aggregation).
// It pays when the aggregate has no group key: the whole stream goes to
// one subtask otherwise. With keys, the rows already spread over the
// subtasks and a local phase mostly adds work. Session windows merge per
// key and processing-time panes are the clock's, so those stay one phase;
// a cascade's rows come when their panes are complete, too late to fold.
func twoPhase(a *plan.WindowAgg) bool {
	return len(a.Group) == 0 && a.Window.Kind != plan.Session && !a.Window.ProcessingTime && !a.Window.Cascade
}

// idleSource reports whether a source below r lets its watermark go
// idle (watermark.idle_timeout). A local aggregate holds a pane's
// partial until its own watermark passes the pane, but the global phase's
// watermark moves on without an idle input: the partial would come late.
func idleSource(r *rel) bool {
	switch n := r.n.(type) {
	case *scanNode:
		return n.src.idle > 0
	case *calcNode:
		return idleSource(n.in)
	case *aggNode:
		return idleSource(n.in)
	case *joinNode:
		return idleSource(n.left) || idleSource(n.right)
	case *unionNode:
		for _, in := range n.inputs {
			if idleSource(in) {
				return true
			}
		}
	}
	return false
}

// union builds UNION ALL: one calc reading every branch.
func (b *builder) union(r *rel, n *unionNode) (*stage, error) {
	var edges []*weirv1.JobEdge
	var stages []*stage
	mode := plan.AppendOnly
	for _, in := range n.inputs {
		st, err := b.build(in)
		if err != nil {
			return nil, err
		}
		if st.updating() {
			mode = plan.Retract
		}
		stages = append(stages, st)
	}
	for _, st := range stages {
		// Every input is read as a changelog when one is: an append-only
		// one's rows are inserts.
		st.enc.Format, st.enc.Changelog = plan.FormatRow, mode == plan.Retract
		p := weirv1.Partitioner_PARTITIONER_REBALANCE
		if mode == plan.Retract {
			// A row's retraction must follow it: the same path.
			p = weirv1.Partitioner_PARTITIONER_FORWARD
		}
		edges = append(edges, &weirv1.JobEdge{Source: st.vertex, Partitioner: p})
	}
	c := &plan.Calc{In: plan.Decoding{Format: plan.FormatRow, Schema: r.schema(), Timestamp: -1, Changelog: mode == plan.Retract}, Out: r.schema()}
	op := &plan.Operator{Calc: c, Describe: "UnionAll", Mode: mode}
	b.calcs++
	name := b.unique(fmt.Sprintf("union-%d", b.calcs))
	b.add(name, "sql-calc", op, edges...)
	return &stage{vertex: name, schema: c.Out, enc: &c.Enc, mode: mode}, nil
}

// groupAgg builds an unbounded GROUP BY.
func (b *builder) groupAgg(r *rel, n *groupAggNode) (*stage, error) {
	in, err := b.build(n.in)
	if err != nil {
		return nil, err
	}
	in.rows()
	in.enc.Key = n.groups
	a := &plan.GroupAgg{In: in.schema, InChangelog: in.updating(), Group: n.groups, Aggs: n.aggs, Out: r.schema(),
		Enc: plan.Encoding{Format: plan.FormatRow, Changelog: true}, TTL: b.set.ttl, MiniBatch: b.set.miniBatch}
	a.Enc.Key = make([]int, len(n.groups))
	for i := range n.groups {
		a.Enc.Key[i] = i
	}
	op := &plan.Operator{GroupAgg: a, Describe: describeGroupAgg(a), Mode: plan.Retract}
	name := b.unique("group-aggregate-" + digest(a.In, a.Group, a.Aggs, a.InChangelog))
	b.add(name, "sql-group-aggregate", op, edge(in, true))
	return &stage{vertex: name, schema: a.Out, enc: &a.Enc, mode: plan.Retract}, nil
}

// topN builds a TopN (ROW_NUMBER() with WHERE rn <= N); rank says
// whether the row number is an output column.
func (b *builder) topN(r *rel, n *rankNode, rank bool) (*stage, error) {
	if n.limit == 0 {
		return nil, fmt.Errorf("ROW_NUMBER() OVER (…) needs WHERE rn <= N in the query around it: a TopN keeps the first N rows of each partition (unbounded numbering is not supported)")
	}
	in, err := b.build(n.in)
	if err != nil {
		return nil, err
	}
	in.rows()
	in.enc.Key = n.partition
	out := r.schema()
	if !rank {
		out = out[:len(out)-1]
	}
	t := &plan.TopN{In: in.schema, InChangelog: in.updating(), Partition: n.partition, Order: n.order, Limit: n.limit, Rank: rank,
		Out: out, Enc: plan.Encoding{Format: plan.FormatRow, Changelog: true}, TTL: b.set.ttl}
	op := &plan.Operator{TopN: t, Describe: describeTopN(t), Mode: plan.Retract}
	name := b.unique("top-n-" + digest(t.In, t.Partition, t.Order, t.Limit, t.InChangelog))
	b.add(name, "sql-top-n", op, edge(in, true))
	return &stage{vertex: name, schema: t.Out, enc: &t.Enc, mode: plan.Retract}, nil
}

// overAgg builds aggregates over a ROWS frame.
func (b *builder) overAgg(r *rel, n *overNode) (*stage, error) {
	in, err := b.build(n.in)
	if err != nil {
		return nil, err
	}
	in.rows()
	in.enc.Key = n.partition
	a := &plan.OverAgg{In: in.schema, InChangelog: in.updating(), Partition: n.partition, Order: n.order, Lo: n.lo, Hi: n.hi,
		Aggs: n.aggs, Out: r.schema(), Enc: plan.Encoding{Format: plan.FormatRow, Changelog: true}, TTL: b.set.ttl}
	op := &plan.Operator{OverAgg: a, Describe: describeOverAgg(a), Mode: plan.Retract}
	name := b.unique("over-aggregate-" + digest(a.In, a.Partition, a.Order, a.Lo, a.Hi, a.Aggs, a.InChangelog))
	b.add(name, "sql-over-aggregate", op, edge(in, true))
	return &stage{vertex: name, schema: a.Out, enc: &a.Enc, mode: plan.Retract}, nil
}

func describeOverAgg(a *plan.OverAgg) string {
	cols := schemaCols(a.In)
	s := fmt.Sprintf("OverAggregate per [%s] order by [%s] rows %s compute [%s]", colList(cols, a.Partition), orderList(a.Order, cols),
		frameString(a.Lo, a.Hi), aggList(a.Aggs, cols))
	return s + " " + stateNote(a.TTL, "every row of each partition")
}

// digest names a stateful operator by what its state means, so that the
// same SQL (or one that changes only projections and filters around it)
// gives it the same name, and a savepoint's state finds it.
func digest(parts ...any) string {
	b, _ := json.Marshal(parts)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:4])
}

func describeCalc(c *plan.Calc, src string) string {
	cols := schemaCols(c.In.Schema)
	var parts []string
	if src != "" {
		parts = append(parts, "read "+src)
	}
	for i, e := range c.Shared {
		parts = append(parts, fmt.Sprintf("$%d = %s", len(cols)+i, exprString(e, cols)))
	}
	if c.Filter != nil {
		parts = append(parts, "filter "+exprString(*c.Filter, cols))
	}
	if c.Project != nil {
		ps := make([]string, len(c.Project))
		for i, p := range c.Project {
			ps[i] = exprString(p, cols)
			if p.Op != plan.OpCol || cols[p.Col].name != c.Out[i].Name {
				ps[i] += " AS " + c.Out[i].Name
			}
		}
		parts = append(parts, "project "+strings.Join(ps, ", "))
	}
	return "Calc: " + strings.Join(parts, "; ")
}

func describeAgg(a *plan.WindowAgg) string {
	cols := schemaCols(a.In)
	return fmt.Sprintf("WindowAggregate %s group by [%s] compute [%s] emit [%s]", windowString(a.Window), colList(cols, a.Group), aggList(a.Aggs, cols), strings.Join(names(a.Out), ", "))
}

// outerName is "LeftOuter", "RightOuter" or "FullOuter".
func outerName(t plan.JoinType) string {
	return strings.ToUpper(string(t[:1])) + string(t[1:]) + "Outer"
}

func describeGroupAgg(a *plan.GroupAgg) string {
	cols := schemaCols(a.In)
	s := fmt.Sprintf("GroupAggregate group by [%s] compute [%s] emit [%s]", colList(cols, a.Group), aggList(a.Aggs, cols), strings.Join(names(a.Out), ", "))
	if a.InChangelog {
		s += " retracting"
	}
	if a.MiniBatch.Size > 0 {
		s += fmt.Sprintf(" (mini-batch of %d groups, %s)", a.MiniBatch.Size, ms(a.MiniBatch.Latency))
	}
	return s + " " + stateNote(a.TTL, "one accumulator per group")
}

func describeTopN(t *plan.TopN) string {
	cols := schemaCols(t.In)
	s := fmt.Sprintf("TopN %d per [%s] order by [%s]", t.Limit, colList(cols, t.Partition), orderList(t.Order, cols))
	if t.Rank {
		s += " with row_number"
	}
	what := fmt.Sprintf("up to %d rows per partition", t.Limit)
	if t.Limit == 1 {
		what = "one row per partition"
	}
	if t.InChangelog {
		what = "every row of each partition (the input updates)"
	}
	return s + " " + stateNote(t.TTL, what)
}

// stateNote says how an operator's state is bounded.
func stateNote(ttl int64, what string) string {
	if ttl > 0 {
		return fmt.Sprintf("(state: %s, each dropped %s after its last change)", what, ms(ttl))
	}
	return fmt.Sprintf("(state: unbounded, %s, kept forever; SET table.exec.state.ttl bounds it)", what)
}

func describeJoin(j *plan.Join) string {
	both := append(schemaCols(j.Left), schemaCols(j.Right)...)
	s := joinKindName(j.Kind) + "Join"
	if j.Type != plan.InnerJoin {
		s = joinKindName(j.Kind) + outerName(j.Type) + "Join"
	}
	if j.LeftChangelog || j.RightChangelog {
		s += " of changelogs"
	}
	switch j.Kind {
	case plan.IntervalJoin:
		s += fmt.Sprintf(" right.ts in [left.ts%+dms, left.ts%+dms]", j.Lower, j.Upper)
	case plan.WindowJoin:
		s += fmt.Sprintf(" per window of %dms", j.Size)
	case plan.RegularJoin:
		if j.TTL == 0 {
			s += " (state: unbounded)"
		}
	}
	if j.Filter != nil {
		s += " on " + exprString(*j.Filter, both)
	}
	ps := make([]string, len(j.Project))
	for i, p := range j.Project {
		ps[i] = exprString(p, both)
	}
	s += " project " + strings.Join(ps, ", ")
	if j.Kind == plan.RegularJoin && j.TTL > 0 {
		s += " " + stateNote(j.TTL, "every row of both inputs")
	}

	return s
}

func schemaCols(s plan.Schema) []col {
	cols := make([]col, len(s))
	for i, c := range s {
		cols[i] = col{name: c.Name, t: c.Type}
	}
	return cols
}

func names(s plan.Schema) []string {
	out := make([]string, len(s))
	for i, c := range s {
		out[i] = c.Name
	}
	return out
}

// pure are the functions that cannot fail at run time, whose calls a
// calc may evaluate once for the whole row: a shared call runs for every
// row, where a CASE or AND might have skipped it.
var pure = map[string]bool{
	"regexp_match_group": true, "regexp_extract": true, "lower": true, "upper": true, "split_part": true,
	"substr": true, "char_length": true, "trim": true, "ltrim": true, "rtrim": true, "replace": true,
	"position": true, "concat": true, "||": true, "to_char": true, "date_trunc": true, "extract": true,
	"like": true, "not_like": true, "ilike": true,
}

// share finds the calls a calc's filter and projection repeat (Nexmark
// q21 matches one regular expression in both) and has the calc evaluate
// each once per row (common-subexpression elimination): they become
// Shared, columns after the input's.
func share(c *plan.Calc) {
	count := map[string]int{}
	var isPure func(e plan.Expr) bool
	isPure = func(e plan.Expr) bool {
		if e.Op == plan.OpCall {
			if !pure[e.Fn] {
				return false
			}
			for _, a := range e.Args {
				if !isPure(a) {
					return false
				}
			}
		}
		return true
	}
	var walk func(e plan.Expr)
	walk = func(e plan.Expr) {
		if e.Op != plan.OpCall {
			return
		}
		if isPure(e) {
			count[key(e)]++
		}
		for _, a := range e.Args {
			walk(a)
		}
	}
	all := append([]plan.Expr{}, c.Project...)
	if c.Filter != nil {
		all = append(all, *c.Filter)
	}
	for _, e := range all {
		walk(e)
	}
	n := len(c.In.Schema)
	at := map[string]int{}
	var rewrite func(e plan.Expr) plan.Expr
	rewrite = func(e plan.Expr) plan.Expr {
		if e.Op != plan.OpCall {
			return e
		}
		k := key(e)
		if count[k] >= 2 && isPure(e) {
			i, ok := at[k]
			if !ok {
				i = len(c.Shared)
				at[k] = i
				c.Shared = append(c.Shared, e)
			}
			return plan.ColRef(n+i, e.Type)
		}
		args := make([]plan.Expr, len(e.Args))
		for i, a := range e.Args {
			args[i] = rewrite(a)
		}
		e.Args = args
		return e
	}
	if c.Filter != nil {
		f := rewrite(*c.Filter)
		c.Filter = &f
	}
	if len(c.Shared) > 0 && c.Project == nil {
		// The output is the input's columns, not the widened row.
		for i, col := range c.In.Schema {
			c.Project = append(c.Project, plan.ColRef(i, col.Type))
		}
	}
	if c.Project == nil {
		return
	}
	ps := make([]plan.Expr, len(c.Project))
	for i, e := range c.Project {
		ps[i] = rewrite(e)
	}
	c.Project = ps
}

func key(e plan.Expr) string {
	b, _ := json.Marshal(e)
	return string(b)
}

// Package compile turns a SQL script into Weir jobs: it parses with
// PostgreSQL's own grammar (libpg_query through cgo, plus a thin layer
// for the streaming DDL PostgreSQL lacks, see script.go), resolves names
// and types, plans (logical plan, filter push-down, constant folding,
// the join and window kinds the streams allow) and writes each sink's job
// graph onto the runtime's operators, with the compiled plan of each SQL
// vertex in its configuration (package sql/plan). Only the CLI links it;
// the daemons run the plans without a parser.
package compile

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/sql/plan"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Options are what a script does not say.
type Options struct {
	// Parallelism of every vertex (0: 1).
	Parallelism int
	// CollectAddress is where a SELECT with no sink sends its rows (the
	// `weir sql` client's listener).
	CollectAddress string
	// CheckpointInterval of the jobs (0: 10s).
	CheckpointInterval time.Duration
	// StateBackend is "heap" (or "") or "pebble" (incremental
	// checkpoints).
	StateBackend string
}

// Result is a script's jobs: one per sink (CREATE SINK, INSERT INTO) and
// one per SELECT with no sink.
type Result struct{ Jobs []Job }

// Job is one job of a script.
type Job struct {
	// Name is the sink's name, or select-N.
	Name      string
	Graph     *weirv1.JobGraph
	Statement string
	Explain   Explain
	// Select is set for a SELECT with no sink, whose rows stream to the
	// client.
	Select *Select
	// ExplainOnly: the statement was EXPLAIN …: print, do not submit.
	ExplainOnly bool
}

// Explain is a job's plan at each step.
type Explain struct{ Logical, Physical, Graph string }

// Select is a SELECT streamed to the client.
type Select struct {
	Schema plan.Schema
	// Limit is the number of rows to show (-1: all).
	Limit int64
}

// Script compiles a script. Nothing is submitted: an error (an *Error,
// with the line and column) means no job.
func Script(src string, o Options) (*Result, error) {
	s := &script{src: src}
	text, ddls, err := s.prepare()
	if err != nil {
		return nil, err
	}
	tree, err := pg.Parse(text)
	if err != nil {
		return nil, s.pgError(err)
	}
	c := &compiler{s: s, b: &binder{s: s, cat: &catalog{sources: map[string]*source{}, views: map[string]*view{}}}, o: o}
	for _, d := range ddls {
		var raw *pg.RawStmt
		for _, r := range tree.Stmts {
			start := int(r.StmtLocation)
			end := start + int(r.StmtLen)
			if r.StmtLen == 0 {
				end = len(text)
			}
			if start <= d.stmtEnd && end >= d.stmtStart && strings.TrimSpace(text[start:min(end, len(text))]) != "" {
				raw = r
				break
			}
		}
		if err := c.statement(d, raw); err != nil {
			return nil, err
		}
	}
	if len(c.res.Jobs) == 0 {
		if len(ddls) == 0 {
			return nil, &Error{Line: 1, Col: 1, Msg: errNoStatements.Error()}
		}
		return nil, s.errAt(ddls[len(ddls)-1].stmtStart, "the script defines no job: add CREATE SINK name AS SELECT …, INSERT INTO, or a SELECT")
	}
	return &c.res, nil
}

// compiler runs a script's statements in order.
type compiler struct {
	s       *script
	b       *binder
	o       Options
	res     Result
	selects int
	// set is what the SET statements so far said, for the jobs after
	// them.
	set settings
}

// settings are a script's SET options (Flink's names).
type settings struct {
	// ttl is table.exec.state.ttl in milliseconds (0: state kept).
	ttl int64
	// miniBatch is table.exec.mini-batch.*: on when enabled and a size
	// is set.
	miniBatch plan.MiniBatch
	miniOn    bool
	miniSize  int
	miniLat   int64
	// autoscaler is what the job.autoscaler.* keys said; nil when none
	// did.
	autoscaler *weirv1.AutoscalerConfig
	// bufferTimeout is execution.buffer-timeout; nil when not set.
	bufferTimeout *durationpb.Duration
}

// apply takes SET key = value.
func (c *compiler) apply(d *ddl) error {
	v := d.setValue
	dur := func() (int64, error) {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			return n, nil // milliseconds, as Flink reads a bare number
		}
		t, err := parseDuration(v)
		if err != nil || t < 0 {
			return 0, c.s.errAt(d.setValueOff, "%s wants a duration such as '1 h', '30 min' or '10s', got %q", d.setKey, v)
		}
		return t.Milliseconds(), nil
	}
	var err error
	if key, ok := autoscalerKey(d.setKey); ok {
		return c.applyAutoscaler(d, key)
	}
	switch d.setKey {
	case "table.exec.state.ttl":
		c.set.ttl, err = dur()
	case "table.exec.mini-batch.enabled":
		on, perr := strconv.ParseBool(v)
		if perr != nil {
			return c.s.errAt(d.setValueOff, "%s wants true or false, got %q", d.setKey, v)
		}
		c.set.miniOn = on
	case "table.exec.mini-batch.size":
		n, perr := strconv.Atoi(v)
		if perr != nil || n <= 0 {
			return c.s.errAt(d.setValueOff, "%s wants a positive number of groups, got %q", d.setKey, v)
		}
		c.set.miniSize = n
	case "table.exec.mini-batch.allow-latency":
		c.set.miniLat, err = dur()
	case "execution.buffer-timeout":
		// Finer than dur's milliseconds: sub-millisecond timeouts are
		// the point of setting it.
		t, perr := parseDuration(v)
		if n, nerr := strconv.ParseInt(v, 10, 64); nerr == nil {
			t, perr = time.Duration(n)*time.Millisecond, nil
		}
		if perr != nil || t < 0 || t > jobgraph.MaxBufferTimeout {
			return c.s.errAt(d.setValueOff, "%s wants a duration between 0 ms and 1 min such as '500 us' or '5 ms', got %q", d.setKey, v)
		}
		c.set.bufferTimeout = durationpb.New(t)
	default:
		return c.s.errAt(d.off, "unknown setting %q%s",
			d.setKey, didYouMean(d.setKey, []string{"table.exec.state.ttl", "table.exec.mini-batch.enabled", "table.exec.mini-batch.size", "table.exec.mini-batch.allow-latency", "execution.buffer-timeout"}))
	}
	if err != nil {
		return err
	}
	c.set.miniBatch = plan.MiniBatch{}
	if c.set.miniOn {
		// Flink's mini-batch needs its latency and size; here a size
		// alone, or a latency alone (5000 groups), will do.
		size := c.set.miniSize
		if size == 0 {
			size = 5000
		}
		c.set.miniBatch = plan.MiniBatch{Size: size, Latency: c.set.miniLat}
	}
	return nil
}

// autoscalerKeys are the autoscaler's settings, by Flink's names
// (job.autoscaler.*; the prefix autoscaler.* as in a job spec does too).
// job.autoscaler.vertex.<name>.min-parallelism and .max-parallelism bound
// one vertex of the plan.
var autoscalerKeys = []string{
	"job.autoscaler.enabled", "job.autoscaler.target-utilization", "job.autoscaler.utilization-boundary",
	"job.autoscaler.interval", "job.autoscaler.metrics-window", "job.autoscaler.stabilization",
	"job.autoscaler.scale-down-delay", "job.autoscaler.catch-up-duration", "job.autoscaler.restart-time",
	"job.autoscaler.max-rescales-per-hour", "job.autoscaler.max-scale-down-factor", "job.autoscaler.max-scale-up-factor",
	"job.autoscaler.min-parallelism", "job.autoscaler.max-parallelism",
}

// autoscalerKey is key without its job.autoscaler. (or autoscaler.)
// prefix, false for another key.
func autoscalerKey(key string) (string, bool) {
	if k, ok := strings.CutPrefix(key, "job.autoscaler."); ok {
		return k, true
	}
	return strings.CutPrefix(key, "autoscaler.")
}

// applyAutoscaler takes SET job.autoscaler.<key> = value.
func (c *compiler) applyAutoscaler(d *ddl, key string) error {
	a := c.set.autoscaler
	if a == nil {
		a = &weirv1.AutoscalerConfig{}
	} else {
		a = proto.Clone(a).(*weirv1.AutoscalerConfig)
	}
	v := d.setValue
	bad := func(want string) error {
		return c.s.errAt(d.setValueOff, "%s wants %s, got %q", d.setKey, want, v)
	}
	num := func() (float64, error) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, bad("a number")
		}
		return f, nil
	}
	count := func() (int32, error) {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return 0, bad("a count")
		}
		return int32(n), nil
	}
	dur := func() (*durationpb.Duration, error) {
		t, err := parseDuration(v)
		if err != nil || t < 0 {
			return nil, bad("a duration such as '30 s' or '5 min'")
		}
		return durationpb.New(t), nil
	}
	var err error
	switch key {
	case "enabled":
		on, perr := strconv.ParseBool(v)
		if perr != nil {
			return bad("true or false")
		}
		a.Enabled = on
	case "target-utilization":
		a.TargetUtilization, err = num()
	case "utilization-boundary":
		var b float64
		b, err = num()
		a.UtilizationBoundary = &b
	case "max-scale-down-factor":
		a.MaxScaleDownFactor, err = num()
	case "max-scale-up-factor":
		a.MaxScaleUpFactor, err = num()
	case "interval":
		a.Interval, err = dur()
	case "metrics-window":
		a.MetricsWindow, err = dur()
	case "stabilization":
		a.Stabilization, err = dur()
	case "scale-down-delay":
		a.ScaleDownDelay, err = dur()
	case "catch-up-duration":
		a.CatchUpDuration, err = dur()
	case "restart-time":
		a.RestartTime, err = dur()
	case "max-rescales-per-hour":
		a.MaxRescalesPerHour, err = count()
		if err == nil && a.MaxRescalesPerHour < 1 {
			return bad("at least 1")
		}
	case "min-parallelism":
		a.MinParallelism, err = count()
	case "max-parallelism":
		a.MaxParallelism, err = count()
	default:
		vertex, bound, ok := strings.Cut(strings.TrimPrefix(key, "vertex."), ".")
		if !strings.HasPrefix(key, "vertex.") || !ok || bound != "min-parallelism" && bound != "max-parallelism" {
			return c.s.errAt(d.off, "unknown setting %q%s", d.setKey, didYouMean(d.setKey, autoscalerKeys))
		}
		if a.Vertices == nil {
			a.Vertices = map[string]*weirv1.ParallelismBounds{}
		}
		b := a.Vertices[vertex]
		if b == nil {
			b = &weirv1.ParallelismBounds{}
			a.Vertices[vertex] = b
		}
		if bound == "min-parallelism" {
			b.Min, err = count()
		} else {
			b.Max, err = count()
		}
	}
	if err != nil {
		return err
	}
	c.set.autoscaler = a
	return nil
}

// parseDuration reads Flink's and PostgreSQL's ways of writing a
// duration: '10s', '1 h', '30 min', '2 hours', '500 ms', '1d'.
func parseDuration(v string) (time.Duration, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	n, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, err
	}
	units := map[string]time.Duration{
		"us": time.Microsecond, "µs": time.Microsecond, "micro": time.Microsecond, "micros": time.Microsecond, "microsecond": time.Microsecond, "microseconds": time.Microsecond,
		"ms": time.Millisecond, "milli": time.Millisecond, "millis": time.Millisecond, "millisecond": time.Millisecond, "milliseconds": time.Millisecond,
		"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
		"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
		"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
		"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	}
	u, ok := units[strings.TrimSpace(s[i:])]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q", s[i:])
	}
	return time.Duration(n * float64(u)), nil
}

func (c *compiler) statement(d *ddl, raw *pg.RawStmt) error {
	cat := c.b.cat
	if d.kind == "set" {
		return c.apply(d)
	}
	if d.kind == "sink" && d.sinkFrom != "" {
		// CREATE SINK name FROM relation: SELECT * FROM relation.
		r, err := c.b.relation(d.sinkFrom, d.sinkFromOff)
		if err != nil {
			return err
		}
		return c.job(d, d.name, r, -1, nil)
	}
	if raw == nil {
		return c.s.errAt(d.stmtStart, "empty statement")
	}
	switch st := raw.Stmt.Node.(type) {
	case *pg.Node_CreateStmt:
		return c.createSource(d, st.CreateStmt)
	case *pg.Node_ViewStmt:
		v := st.ViewStmt
		name := v.View.Relname
		if _, dup := cat.sources[name]; dup {
			return c.s.errAt(d.off, "relation %q already exists", name)
		}
		if _, dup := cat.views[name]; dup && !v.Replace {
			return c.s.errAt(d.off, "relation %q already exists", name)
		}
		if len(v.Aliases) > 0 {
			return c.s.errAt(d.off, "column names after the view's name are not supported: alias the select list")
		}
		q := v.Query.GetSelectStmt()
		if q == nil {
			return c.s.errAt(d.off, "a view is a SELECT")
		}
		if d.kind == "sink" {
			r, limit, err := c.b.query(q)
			if err != nil {
				return err
			}
			if limit >= 0 {
				return c.s.errAt(d.off, "a sink's query cannot have a LIMIT")
			}
			return c.job(d, name, r, -1, nil)
		}
		// Bind it now, so its errors point at it; it is bound again
		// where it is read.
		if _, _, err := c.b.query(q); err != nil {
			return err
		}
		cat.views[name] = &view{name: name, query: q}
		return nil
	case *pg.Node_SelectStmt:
		r, limit, err := c.b.query(st.SelectStmt)
		if err != nil {
			return err
		}
		c.selects++
		return c.job(d, fmt.Sprintf("select-%d", c.selects), r, limit, nil)
	case *pg.Node_InsertStmt:
		return c.insert(d, st.InsertStmt)
	case *pg.Node_ExplainStmt:
		return c.s.errAt(d.stmtStart, "EXPLAIN options are not supported: write EXPLAIN statement")
	}
	return c.s.errAt(d.stmtStart, "unsupported statement %s", nodeName(raw.Stmt))
}

// createSource declares a source (CREATE SOURCE, or CREATE TABLE, which
// INSERT INTO may write instead).
func (c *compiler) createSource(d *ddl, cs *pg.CreateStmt) error {
	name := cs.Relation.Relname
	if _, dup := c.b.cat.sources[name]; dup {
		return c.s.errAt(d.off, "relation %q already exists", name)
	}
	if _, dup := c.b.cat.views[name]; dup {
		return c.s.errAt(d.off, "relation %q already exists", name)
	}
	src := &source{name: name, off: d.off, options: map[string]option{}, rowtime: -1, proctime: -1, encode: d.encode}
	for _, o := range d.options {
		src.options[o.key] = o
	}
	switch d.format {
	case "", "PLAIN":
	case "UPSERT":
		src.upsert = true
	default:
		return c.s.errAt(d.off, "FORMAT %s is not supported for a source: FORMAT PLAIN, or UPSERT (with a PRIMARY KEY)", d.format)
	}
	for _, el := range cs.TableElts {
		cd := el.GetColumnDef()
		if cd == nil {
			if con := el.GetConstraint(); con != nil && con.Contype == pg.ConstrType_CONSTR_PRIMARY {
				if src.pk != nil {
					return c.s.errAt(int(con.Location), "multiple primary keys for table %q are not allowed", name)
				}
				src.pkOff = int(con.Location)
				for _, k := range con.Keys {
					src.pk = append(src.pk, k.GetString_().GetSval())
				}
				continue
			}
			return c.s.errAt(location(el), "only columns are supported in CREATE SOURCE")
		}
		t, err := typeOf(cd.TypeName)
		if err != nil {
			return c.s.errAt(int(cd.Location), "column %s: %v", cd.Colname, err)
		}
		for _, con := range cd.Constraints {
			k := con.GetConstraint()
			if k != nil && k.Contype == pg.ConstrType_CONSTR_PRIMARY {
				if src.pk != nil {
					return c.s.errAt(int(k.Location), "multiple primary keys for table %q are not allowed", name)
				}
				src.pk, src.pkOff = []string{cd.Colname}, int(k.Location)
				continue
			}
			if k != nil && k.Contype != pg.ConstrType_CONSTR_NOTNULL && k.Contype != pg.ConstrType_CONSTR_NULL {
				return c.s.errAt(int(k.Location), "column %s: constraints other than NULL/NOT NULL and PRIMARY KEY are not supported", cd.Colname)
			}
		}
		if indexOf(src.cols, cd.Colname) >= 0 {
			return c.s.errAt(int(cd.Location), "column %q specified more than once", cd.Colname)
		}
		src.cols = append(src.cols, plan.Column{Name: cd.Colname, Type: t})
	}
	for _, k := range src.pk {
		if indexOf(src.cols, k) < 0 {
			return c.s.errAt(src.pkOff, "column %q named in key does not exist%s", k, didYouMean(k, names(src.cols)))
		}
	}
	if src.upsert && src.pk == nil {
		return c.s.errAt(d.off, "FORMAT UPSERT needs a PRIMARY KEY (…) NOT ENFORCED: the message key's columns")
	}
	if conn := src.options["connector"].value; src.upsert && conn != "kafka" {
		return c.s.errAt(d.off, "FORMAT UPSERT reads Kafka (connector = 'kafka'), not %s", conn)
	}
	for _, cc := range d.computed {
		if err := c.computed(src, cc); err != nil {
			return err
		}
	}
	if d.watermarkCol != "" {
		if err := c.watermark(src, d); err != nil {
			return err
		}
	}
	// A table that is only written (INSERT INTO a sink table) need not
	// be a readable connector: check it when it is read.
	conn, ok := src.options["connector"]
	if _, known := connectorOps[conn.value]; ok && !known {
		return c.s.errAt(conn.off, "%s: unknown connector %q%s", name, conn.value, didYouMean(conn.value, connectorNames()))
	}
	if connectorOps[conn.value][0] != "" || !ok {
		if err := c.s.checkSource(src); err != nil {
			if !ok || connectorOps[conn.value][1] == "" || src.rowtime >= 0 || src.proctime >= 0 {
				return err
			}
			// A table of a connector that reads and writes may carry
			// the sink's options (INSERT INTO it): it fails only when
			// read.
			src.readErr = err
		}
	}
	c.b.cat.sources[name] = src
	return nil
}

// computed declares `name [type] AS PROCTIME()`, the one computed column.
func (c *compiler) computed(src *source, cc computed) error {
	tree, err := pg.Parse(cc.exprText)
	if err != nil {
		return c.s.pgError(err)
	}
	sel := tree.Stmts[0].Stmt.GetSelectStmt()
	f := sel.TargetList[0].GetResTarget().Val.GetFuncCall()
	if f == nil || len(f.Args) > 0 || strings.ToLower(f.Funcname[len(f.Funcname)-1].GetString_().GetSval()) != "proctime" {
		return c.s.errAt(cc.off, "computed column %s: only `%s AS PROCTIME()` (a processing-time column) is supported", cc.name, cc.name)
	}
	if src.proctime >= 0 {
		return c.s.errAt(cc.off, "a source has one PROCTIME() column")
	}
	src.proctime = len(src.cols)
	src.cols = append(src.cols, plan.Column{Name: cc.name, Type: plan.Type{Kind: plan.TimestampTZ}})
	return nil
}

// watermark reads WATERMARK FOR col AS col - INTERVAL '…'.
func (c *compiler) watermark(src *source, d *ddl) error {
	i := indexOf(src.cols, d.watermarkCol)
	if i < 0 {
		return c.s.errAt(d.watermarkOff, "WATERMARK FOR %s: no such column%s", d.watermarkCol, didYouMean(d.watermarkCol, names(src.cols)))
	}
	if k := src.cols[i].Type.Kind; k != plan.Timestamp && k != plan.TimestampTZ {
		return c.s.errAt(d.watermarkOff, "WATERMARK FOR %s: the column is %s, not a TIMESTAMP", d.watermarkCol, src.cols[i].Type)
	}
	tree, err := pg.Parse(d.watermarkExpr)
	if err != nil {
		return c.s.pgError(err)
	}
	n := tree.Stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val
	e, err := c.b.expr(&scope{cols: schemaCols(src.cols)}, n)
	if err != nil {
		return err
	}
	var delay int64
	switch {
	case e.Op == plan.OpCol && e.Col == i:
	case e.Op == plan.OpCall && e.Fn == "-" && e.Args[0].Op == plan.OpCol && e.Args[0].Col == i && e.Args[1].Op == plan.OpConst && e.Args[1].Type.Kind == plan.Interval:
		fmt.Sscan(e.Args[1].Lit, &delay)
		delay /= 1000
	default:
		return c.s.errAt(location(n), "WATERMARK FOR %s AS: want %s - INTERVAL '…' (a bounded out-of-orderness)", d.watermarkCol, d.watermarkCol)
	}
	if delay < 0 {
		return c.s.errAt(location(n), "the watermark's delay must not be negative")
	}
	src.rowtime, src.delay = i, delay
	return nil
}

// insert is INSERT INTO table SELECT …: the table's connector is the sink.
func (c *compiler) insert(d *ddl, ins *pg.InsertStmt) error {
	name := ins.Relation.Relname
	t, ok := c.b.cat.sources[name]
	if !ok {
		return c.s.errAt(int(ins.Relation.Location), "relation %q does not exist%s", name, didYouMean(name, c.b.cat.names()))
	}
	q := ins.SelectStmt.GetSelectStmt()
	if q == nil {
		return c.s.errAt(d.stmtStart, "INSERT INTO takes a SELECT")
	}
	r, limit, err := c.b.query(q)
	if err != nil {
		return err
	}
	if limit >= 0 {
		return c.s.errAt(d.stmtStart, "INSERT … SELECT cannot have a LIMIT on a stream")
	}
	target := t.cols
	if len(ins.Cols) > 0 {
		return c.s.errAt(d.stmtStart, "INSERT INTO %s (columns…) is not supported: select every column of the table in order", name)
	}
	if len(r.cols) != len(target) {
		return c.s.errAt(location(q.TargetList[0]), "INSERT has %d expressions, table %s has %d columns", len(r.cols), name, len(target))
	}
	var exprs []plan.Expr
	var cols []col
	for i, tc := range target {
		e, err := c.b.cast(plan.ColRef(i, r.cols[i].t), tc.Type, location(q.TargetList[i]))
		if err != nil {
			return c.s.errAt(location(q.TargetList[i]), "column %s is of type %s but expression is of type %s", tc.Name, tc.Type, r.cols[i].t)
		}
		exprs = append(exprs, e)
		cols = append(cols, col{name: tc.Name, t: tc.Type})
	}
	out := &rel{n: &calcNode{in: r, project: exprs}, cols: cols, rowtime: -1, proctime: -1, mode: r.mode, why: r.why, ukey: r.ukey}
	return c.job(d, name, out, -1, t)
}

// job plans one job: the query r into a sink with options (CREATE SINK's
// when nil), or into the client when it is a SELECT.
func (c *compiler) job(d *ddl, name string, r *rel, limit int64, table *source) error {
	isSelect := d.kind == "select"
	var opts map[string]option
	var pk []string
	pkOff := d.off
	if table != nil {
		opts, pk, pkOff = table.options, table.pk, table.pkOff
	}
	if opts == nil && !isSelect {
		opts = map[string]option{}
		for _, o := range d.options {
			opts[o.key] = o
		}
	}
	if n := unboundedRank(r); n != nil {
		return c.s.errAt(n.off, "ROW_NUMBER() OVER (…) needs WHERE rn <= N in the query around it: a TopN keeps the first N rows of each partition (numbering every row is not supported)")
	}
	b := newBuilder(name, c.o.Parallelism, c.set)
	b.needed = neededColumns(r)
	st, err := b.build(r)
	if err != nil {
		return err
	}
	job := Job{Name: name, Statement: strings.TrimSpace(c.s.src[d.stmtStart:d.stmtEnd]), ExplainOnly: d.explain}
	if isSelect {
		if c.o.CollectAddress == "" && !d.explain {
			return c.s.errAt(d.stmtStart, "a SELECT with no sink streams its rows to `weir sql`, which gives it an address: run it there, or write CREATE SINK")
		}
		st.enc.Format, st.enc.Changelog, st.enc.Key = plan.FormatRow, false, nil
		schema := st.schema
		if r.updating() {
			// The terminal shows a changelog: each row with its kind.
			st.enc.Sink = plan.SinkKindColumn
			schema = append(plan.Schema{{Name: "op", Type: plan.Type{Kind: plan.Varchar}}}, schema...)
		}
		op := &plan.Operator{Collect: &plan.Collect{In: schema, Address: c.o.CollectAddress}, Describe: "Collect: rows to the client"}
		b.add(b.unique("collect"), "sql-collect", op, &weirv1.JobEdge{Source: st.vertex, Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD})
		job.Select = &Select{Schema: schema, Limit: limit}
	} else if err := c.s.sinkVertex(b, st, sinkTarget{name: name, opts: opts, off: d.off, format: d.format, encode: d.encode, pk: pk, pkOff: pkOff, r: r}); err != nil {
		return err
	}
	g, phys, err := b.finish()
	if err != nil {
		return err
	}
	g.Sql = job.Statement
	interval := c.o.CheckpointInterval
	if interval == 0 {
		interval = 10 * time.Second
	}
	g.Checkpointing = &weirv1.CheckpointConfig{Interval: durationpb.New(interval)}
	switch c.o.StateBackend {
	case "", "heap":
	case "pebble":
		g.State = &weirv1.StateBackendConfig{Backend: weirv1.StateBackendConfig_BACKEND_PEBBLE, Incremental: true}
	default:
		return fmt.Errorf("state backend %q: want heap or pebble", c.o.StateBackend)
	}
	if a := c.set.autoscaler; a != nil {
		g.Autoscaler = jobgraph.AutoscalerProto(jobgraph.AutoscalerSettings(a), a.GetEnabled())
	}
	g.BufferTimeout = c.set.bufferTimeout
	if isSelect {
		// A SELECT's rows go to a client that may be gone for good:
		// a few restarts, then the job fails rather than retrying
		// forever.
		g.RestartStrategy = &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_FIXED_DELAY, Attempts: 3, Delay: durationpb.New(time.Second)}
	}
	jobgraph.ApplyDefaults(g)
	if err := jobgraph.Validate(g); err != nil {
		return c.s.errAt(d.off, "the job graph of %s is invalid: %v", name, err)
	}
	spec, err := jobgraph.MarshalSpec(g)
	if err != nil {
		return err
	}
	job.Graph = g
	job.Explain = Explain{Logical: explainLogical(r), Physical: phys, Graph: string(spec)}
	c.res.Jobs = append(c.res.Jobs, job)
	return nil
}

// unboundedRank is a ROW_NUMBER() below r that no WHERE bounded.
func unboundedRank(r *rel) *rankNode {
	var ins []*rel
	switch n := r.n.(type) {
	case *rankNode:
		if n.limit == 0 {
			return n
		}
		ins = []*rel{n.in}
	case *calcNode:
		ins = []*rel{n.in}
	case *aggNode:
		ins = []*rel{n.in}
	case *groupAggNode:
		ins = []*rel{n.in}
	case *overNode:
		ins = []*rel{n.in}
	case *joinNode:
		ins = []*rel{n.left, n.right}
	case *unionNode:
		ins = n.inputs
	}
	for _, in := range ins {
		if n := unboundedRank(in); n != nil {
			return n
		}
	}
	return nil
}

package ops

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

func newWindowAggregate() sdk.Operator { return &WindowAggregate{} }

// aggPlan is a window aggregate of in grouped by column 0, emitting the
// group, window_start, window_end and the aggregates as rows keyed by the
// group.
func aggPlan(in plan.Schema, w plan.Window, aggs ...plan.AggCall) *plan.WindowAgg {
	p := &plan.WindowAgg{In: in, Window: w, Group: []int{0}, Aggs: aggs, Enc: plan.Encoding{Format: plan.FormatRow, Key: []int{0}}}
	p.Output = []plan.OutputItem{{Kind: "group", Index: 0}, {Kind: "window_start"}, {Kind: "window_end"}}
	p.Out = plan.Schema{in[0], {Name: "window_start", Type: tTime}, {Name: "window_end", Type: tTime}}
	for i, a := range aggs {
		p.Output = append(p.Output, plan.OutputItem{Kind: "agg", Index: i})
		p.Out = append(p.Out, plan.Column{Name: string(a.Fn), Type: a.Type})
	}
	return p
}

func agg(fn plan.AggFunc, arg, filter int, t plan.Type) plan.AggCall {
	return plan.AggCall{Fn: fn, Arg: arg, Filter: filter, Type: t}
}

// rowLines are FormatRow records of schema s as "ts: <CSV>" lines,
// sorted, after checking each record's key is its group's (column 0).
func rowLines(t testing.TB, s plan.Schema, recs []sdk.Record) []string {
	t.Helper()
	c := row.NewCodec(s)
	var out []string
	for _, r := range recs {
		d, err := c.Decode(r.Value, nil)
		if err != nil {
			t.Fatalf("decode %x: %v", r.Value, err)
		}
		if k := c.AppendKey(nil, d, []int{0}); string(k) != string(r.Key) {
			t.Fatalf("row %v has key %x, want its group's %x", d, r.Key, k)
		}
		out = append(out, fmt.Sprintf("%d: %s", r.Timestamp, row.AppendCSV(nil, s, d)))
	}
	slices.Sort(out)
	return out
}

var aggIn = schema("g", tVarchar, "x", tBigint, "d", tNumeric(2), "f", tDouble, "s", tVarchar, "flag", tBool)

func aggRow(g string, x, d, f any, s any, flag any) row.Row {
	r := row.Row{row.Str(g), row.Null(), row.Null(), row.Null(), row.Null(), row.Null()}
	if x != nil {
		r[1] = row.Int(int64(x.(int)))
	}
	if d != nil {
		r[2] = row.Int(int64(d.(int)))
	}
	if f != nil {
		r[3] = row.Float(f.(float64))
	}
	if s != nil {
		r[4] = row.Str(s.(string))
	}
	if flag != nil {
		r[5] = row.Bool(flag.(bool))
	}
	return r
}

// TestWindowAggregateFunctions computes every aggregate function, with
// NULLs, FILTERs and DISTINCT, over tumbling windows, and again with a
// checkpoint restored at another parallelism halfway: the same rows.
func TestWindowAggregateFunctions(t *testing.T) {
	p := aggPlan(aggIn, plan.Window{Kind: plan.Tumble, Size: 10},
		agg(plan.Count, -1, -1, tBigint),
		agg(plan.Count, 1, -1, tBigint),
		agg(plan.CountDistinct, 4, -1, tBigint),
		agg(plan.Sum, 1, -1, tNumeric(0)),
		agg(plan.Sum, 2, -1, tNumeric(2)),
		agg(plan.Sum, 3, -1, tDouble),
		agg(plan.Min, 1, -1, tBigint),
		agg(plan.Max, 4, -1, tVarchar),
		agg(plan.Avg, 1, -1, tNumeric(6)),
		agg(plan.Avg, 2, -1, tNumeric(6)),
		agg(plan.Avg, 3, -1, tDouble),
		agg(plan.Count, -1, 5, tBigint),
		agg(plan.Sum, 1, 5, tNumeric(0)),
		agg(plan.Min, 2, -1, tNumeric(2)),
		agg(plan.Max, 3, -1, tDouble),
		agg(plan.CountDistinct, 3, 5, tBigint),
	)
	rows := []struct {
		r  row.Row
		ts int64
	}{
		{aggRow("a", 1, 150, 0.5, "p", true), 1},
		{aggRow("b", nil, nil, nil, nil, nil), 5},
		{aggRow("a", nil, nil, nil, nil, false), 2},
		{aggRow("c", -1, -1, -1.0, "", false), 0},
		{aggRow("a", 4, 225, 1.5, "q", nil), 3},
		{aggRow("c", -1, nil, 0.0, nil, true), 0},
		{aggRow("a", 2, nil, nil, "p", true), 9},
		{aggRow("a", 7, 1, 2.0, "r", true), 12},
		{aggRow("c", 0, nil, math.Copysign(0, -1), "", true), 9},
	}
	var events []event
	for i, r := range rows {
		events = append(events, rec(rowRecord(aggIn, r.r, []int{0}, r.ts)))
		if i == 5 {
			events = append(events, wm(5))
		}
	}
	want := []string{
		"19: a,1970-01-01 00:00:00.01,1970-01-01 00:00:00.02,1,1,1,7,0.01,2,7,r,7.000000,0.010000,2,1,7,0.01,2,1",
		"9: a,1970-01-01 00:00:00,1970-01-01 00:00:00.01,4,3,2,7,3.75,2,1,q,2.333333,1.875000,1,2,3,1.50,1.5,1",
		"9: b,1970-01-01 00:00:00,1970-01-01 00:00:00.01,1,0,0,,,,,,,,,0,,,,0",
		"9: c,1970-01-01 00:00:00,1970-01-01 00:00:00.01,3,3,1,-2,-0.01,-1,-1,\"\",-0.666667,-0.010000,-0.3333333333333333,2,-1,-0.01,0,1",
	}
	cfg := config(t, &plan.Operator{WindowAgg: p})
	for _, restoreAfter := range []int{-1, 3, 6} {
		got := rowLines(t, p.Out, run(t, newWindowAggregate, cfg, events, restoreAfter))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("restored after event %d: rows\n%s\nwant\n%s", restoreAfter, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestWindowAggregateWindows counts and sums per tumbling, hopping and
// session window, on event and processing time, and over windows'
// results (a cascade), with a restore halfway.
func TestWindowAggregateWindows(t *testing.T) {
	in := schema("g", tBigint, "x", tBigint)
	r := func(g, x, ts int64) event { return rec(rowRecord(in, row.Row{row.Int(g), row.Int(x)}, []int{0}, ts)) }
	events := []event{r(1, 1, 1), r(1, 2, 4), r(2, 10, 7), wm(3), r(1, 3, 12), r(1, 4, 20), wm(12), r(2, 20, 21)}
	ms := func(ms int64) string { return string(row.AppendText(nil, tTime, row.Int(ms*1000))) }
	line := func(ts int64, g, start, end, count, sum int64) string {
		return fmt.Sprintf("%d: %d,%s,%s,%d,%d", ts, g, ms(start), ms(end), count, sum)
	}
	for _, tc := range []struct {
		name   string
		w      plan.Window
		events []event
		want   []string
	}{
		{"tumble", plan.Window{Kind: plan.Tumble, Size: 10, Slide: 10}, events, []string{
			line(9, 1, 0, 10, 2, 3), line(9, 2, 0, 10, 1, 10), line(19, 1, 10, 20, 1, 3),
			line(29, 1, 20, 30, 1, 4), line(29, 2, 20, 30, 1, 20)}},
		{"hop", plan.Window{Kind: plan.Hop, Size: 10, Slide: 5}, events, []string{
			line(4, 1, -5, 5, 2, 3), line(9, 1, 0, 10, 2, 3), line(9, 2, 0, 10, 1, 10), line(14, 1, 5, 15, 1, 3),
			line(14, 2, 5, 15, 1, 10), line(19, 1, 10, 20, 1, 3), line(24, 1, 15, 25, 1, 4), line(24, 2, 15, 25, 1, 20),
			line(29, 1, 20, 30, 1, 4), line(29, 2, 20, 30, 1, 20)}},
		{"session", plan.Window{Kind: plan.Session, Gap: 5}, events, []string{
			line(8, 1, 1, 9, 2, 3), line(11, 2, 7, 12, 1, 10), line(16, 1, 12, 17, 1, 3),
			line(24, 1, 20, 25, 1, 4), line(25, 2, 21, 26, 1, 20)}},
		// Rows of hopping windows of 10 every 5, at their windows' last
		// millisecond: each is counted in the window it stands for.
		{"cascade", plan.Window{Kind: plan.Hop, Size: 10, Slide: 5, Cascade: true},
			[]event{r(1, 1, 9), r(1, 2, 9), r(1, 3, 14), wm(9), r(2, 5, 14), r(1, 4, 19)}, []string{
				line(9, 1, 0, 10, 2, 3), line(14, 1, 5, 15, 1, 3), line(14, 2, 5, 15, 1, 5), line(19, 1, 10, 20, 1, 4)}},
		{"tumble cascade", plan.Window{Kind: plan.Tumble, Size: 10, Cascade: true},
			[]event{r(1, 1, 9), r(1, 2, 19), wm(9), r(1, 3, 19)}, []string{line(9, 1, 0, 10, 1, 1), line(19, 1, 10, 20, 2, 5)}},
		// The clock, not the records' timestamps, puts rows in windows.
		{"processing time", plan.Window{Kind: plan.Tumble, Size: 10, ProcessingTime: true},
			[]event{clock(3), r(1, 1, 500), r(1, 2, -7), clock(10), r(1, 3, 0), r(2, 4, 0), clock(25), r(1, 5, 0), clock(40)}, []string{
				line(9, 1, 0, 10, 2, 3), line(19, 1, 10, 20, 1, 3), line(19, 2, 10, 20, 1, 4), line(29, 1, 20, 30, 1, 5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := aggPlan(in, tc.w, agg(plan.Count, -1, -1, tBigint), agg(plan.Sum, 1, -1, tNumeric(0)))
			cfg := config(t, &plan.Operator{WindowAgg: p})
			for _, restoreAfter := range []int{-1, 3} {
				got := rowLines(t, p.Out, run(t, newWindowAggregate, cfg, tc.events, restoreAfter))
				slices.Sort(tc.want)
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("restored after event %d: rows\n%s\nwant\n%s", restoreAfter, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
				}
			}
		})
	}
}

// TestWindowAggregateOutput: the output items in any order, without the
// window's columns, as text keyed by another column; a global aggregate
// (no group) has an empty key.
func TestWindowAggregateOutput(t *testing.T) {
	in := schema("g", tVarchar, "x", tInt)
	p := &plan.WindowAgg{In: in, Window: plan.Window{Kind: plan.Tumble, Size: 10}, Group: []int{0},
		Aggs:   []plan.AggCall{agg(plan.Sum, 1, -1, tBigint), agg(plan.Max, 1, -1, tInt)},
		Output: []plan.OutputItem{{Kind: "agg", Index: 1}, {Kind: "window_end"}, {Kind: "group", Index: 0}, {Kind: "agg", Index: 0}},
		Out:    schema("m", tInt, "window_end", tTime, "g", tVarchar, "s", tBigint),
		Enc:    plan.Encoding{Format: plan.FormatCSV, Key: []int{0}, KeyFormat: plan.FormatJSON},
	}
	r := func(g string, x int64) event {
		return rec(rowRecord(in, row.Row{row.Str(g), row.Int(x)}, []int{0}, 1))
	}
	got := run(t, newWindowAggregate, config(t, &plan.Operator{WindowAgg: p}), []event{r("a", 2), r("a", 5), r("b,c", 1)}, -1)
	lines := []string{}
	for _, r := range got {
		lines = append(lines, string(r.Key)+" "+string(r.Value))
	}
	slices.Sort(lines)
	want := []string{`{"m":1} 1,1970-01-01 00:00:00.01,"b,c",1`, `{"m":5} 5,1970-01-01 00:00:00.01,a,7`}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("records %q, want %q", lines, want)
	}

	p = &plan.WindowAgg{In: in, Window: plan.Window{Kind: plan.Tumble, Size: 10},
		Aggs: []plan.AggCall{agg(plan.Count, -1, -1, tBigint)}, Output: []plan.OutputItem{{Kind: "window_start"}, {Kind: "agg"}},
		Out: schema("window_start", tTime, "n", tBigint), Enc: plan.Encoding{Format: plan.FormatCSV}}
	e := func(x int64) event { return rec(rowRecord(in, row.Row{row.Str("g"), row.Int(x)}, nil, 1)) }
	got = run(t, newWindowAggregate, config(t, &plan.Operator{WindowAgg: p}), []event{e(1), e(2)}, -1)
	if len(got) != 1 || got[0].Key != nil || string(got[0].Value) != "1970-01-01 00:00:00,2" {
		t.Errorf("global aggregate: %q", csvLines(got))
	}
}

// TestWindowAggregateDistinct: a window aggregate of no aggregate calls
// (GROUP BY alone, a SELECT DISTINCT per window) emits each group of each
// window once.
func TestWindowAggregateDistinct(t *testing.T) {
	in := schema("g", tVarchar)
	p := aggPlan(in, plan.Window{Kind: plan.Tumble, Size: 10})
	r := func(g string, ts int64) event { return rec(rowRecord(in, row.Row{row.Str(g)}, []int{0}, ts)) }
	events := []event{r("a", 1), r("a", 2), r("b", 3), wm(5), r("a", 12)}
	want := []string{"19: a,1970-01-01 00:00:00.01,1970-01-01 00:00:00.02", "9: a,1970-01-01 00:00:00,1970-01-01 00:00:00.01",
		"9: b,1970-01-01 00:00:00,1970-01-01 00:00:00.01"}
	for _, restoreAfter := range []int{-1, 3} {
		got := rowLines(t, p.Out, run(t, newWindowAggregate, config(t, &plan.Operator{WindowAgg: p}), events, restoreAfter))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("restored after event %d: rows %q, want %q", restoreAfter, got, want)
		}
	}
}

func TestWindowAggregateOverflow(t *testing.T) {
	in := schema("g", tBigint, "x", tBigint)
	for _, tc := range []struct {
		name string
		call plan.AggCall
		xs   []int64
		want string
	}{
		{"sum", agg(plan.Sum, 1, -1, tNumeric(0)), []int64{math.MaxInt64, 1}, "sum: BIGINT out of range"},
		{"avg", agg(plan.Avg, 1, -1, tNumeric(6)), []int64{math.MinInt64, -1}, "avg: BIGINT out of range"},
		{"avg past its scale", agg(plan.Avg, 1, -1, tNumeric(6)), []int64{math.MaxInt64 / 10}, "numeric field overflow"},
	} {
		p := aggPlan(in, plan.Window{Kind: plan.Tumble, Size: 10}, tc.call)
		s := newSubtask(t, &WindowAggregate{}, config(t, &plan.Operator{WindowAgg: p}), 0, 1, nil)
		var err error
		for _, x := range tc.xs {
			if err = s.process(-1, rowRecord(in, row.Row{row.Int(1), row.Int(x)}, []int{0}, 1)); err != nil {
				break
			}
		}
		if err == nil {
			s.timers.wm = 9
			tm, _ := s.timers.svc.Pop(0, 9)
			err = s.op.(sdk.TimerHandler).OnTimer(sdk.Timer{Timestamp: tm.Timestamp, Key: tm.Key}, s)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestWindowAggregateErrors(t *testing.T) {
	in := schema("g", tBigint, "x", tVarchar, "b", tBool)
	count := agg(plan.Count, -1, -1, tBigint)
	for _, tc := range []struct {
		name string
		p    *plan.WindowAgg
		want string
	}{
		{"hop slide above size", aggPlan(in, plan.Window{Kind: plan.Hop, Size: 5, Slide: 10}, count), "want 0 < slide <= size"},
		{"no size", aggPlan(in, plan.Window{Kind: plan.Tumble}, count), "want 0 < slide <= size"},
		{"no gap", aggPlan(in, plan.Window{Kind: plan.Session}, count), "positive gap"},
		{"session cascade", aggPlan(in, plan.Window{Kind: plan.Session, Gap: 5, Cascade: true}, count), "session windows' results"},
		{"processing-time cascade", aggPlan(in, plan.Window{Kind: plan.Tumble, Size: 5, ProcessingTime: true, Cascade: true}, count), "processing-time windows' results"},
		{"unknown window", aggPlan(in, plan.Window{Kind: "slide", Size: 5}, count), `unknown window kind "slide"`},
		{"unknown function", aggPlan(in, plan.Window{Kind: plan.Tumble, Size: 5}, agg("median", 1, -1, tBigint)), `unknown aggregate function "median"`},
		{"sum of text", aggPlan(in, plan.Window{Kind: plan.Tumble, Size: 5}, agg(plan.Sum, 1, -1, tBigint)), "sum of VARCHAR"},
		{"max of another type", aggPlan(in, plan.Window{Kind: plan.Tumble, Size: 5}, agg(plan.Max, 1, -1, tBigint)), "max(VARCHAR) returns VARCHAR, not BIGINT"},
		{"filter not boolean", aggPlan(in, plan.Window{Kind: plan.Tumble, Size: 5}, agg(plan.Count, -1, 1, tBigint)), "FILTER column x is VARCHAR"},
		{"argument out of range", aggPlan(in, plan.Window{Kind: plan.Tumble, Size: 5}, agg(plan.Min, 3, -1, tBigint)), "argument column 3"},
		{"sum without argument", aggPlan(in, plan.Window{Kind: plan.Tumble, Size: 5}, agg(plan.Sum, -1, -1, tBigint)), "argument column -1"},
	} {
		if err := (&WindowAggregate{}).Open(newSubtaskContext(config(t, &plan.Operator{WindowAgg: tc.p}))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Open = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	p := aggPlan(in, plan.Window{Kind: plan.Tumble, Size: 5}, count)
	p.Output[0].Index = 1
	if err := (&WindowAggregate{}).Open(newSubtaskContext(config(t, &plan.Operator{WindowAgg: p}))); err == nil || !strings.Contains(err.Error(), "input column 1 is not a group column") {
		t.Errorf("output of a column not grouped by: %v", err)
	}
}

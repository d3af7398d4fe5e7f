package ops

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

// TestTwoPhaseEqualsOnePhase: a global aggregate (no group key) folded
// first by local aggregates on two subtasks, which send what they hold at
// two checkpoints and restart from nothing, then merged by the global
// phase, gives the rows one phase gives over the same stream — on
// tumbling and hopping windows, with every aggregate function, and with
// rows that reach a local aggregate after their pane was sent.
func TestTwoPhaseEqualsOnePhase(t *testing.T) {
	in := schema("x", tBigint, "s", tVarchar)
	aggs := []plan.AggCall{
		agg(plan.Count, -1, -1, tBigint), agg(plan.Sum, 0, -1, tNumeric(0)), agg(plan.Min, 0, -1, tBigint),
		agg(plan.Max, 1, -1, tVarchar), agg(plan.CountDistinct, 0, -1, tBigint), agg(plan.Avg, 0, -1, tNumeric(6)),
	}
	for _, w := range []plan.Window{{Kind: plan.Tumble, Size: 10, Slide: 10}, {Kind: plan.Hop, Size: 30, Slide: 10}} {
		global := &plan.WindowAgg{In: in, Window: w, Aggs: aggs, Enc: plan.Encoding{Format: plan.FormatRow}}
		global.Output = []plan.OutputItem{{Kind: "window_start"}, {Kind: "window_end"}}
		global.Out = plan.Schema{{Name: "window_start", Type: tTime}, {Name: "window_end", Type: tTime}}
		for i, a := range aggs {
			global.Output = append(global.Output, plan.OutputItem{Kind: "agg", Index: i})
			global.Out = append(global.Out, plan.Column{Name: string(a.Fn), Type: a.Type})
		}
		// Hopping windows take rows after some of their panes were sent
		// (a late pane, whose later windows are open).
		late := w.Kind == plan.Hop
		one := run(t, newWindowAggregate, config(t, &plan.Operator{WindowAgg: global}), twoPhaseStream(in, late, nil), -1)

		local := &plan.WindowAgg{In: in, Window: w, Aggs: aggs, Enc: plan.Encoding{Format: plan.FormatRow}}
		localCfg := config(t, &plan.Operator{LocalAgg: local})
		var locals [2]*subtask
		for i := range locals {
			locals[i] = newSubtask(t, &LocalAggregate{}, localCfg, i, 2, nil)
		}
		var partials []event
		twoPhaseStream(in, late, func(e event, step int) {
			if e.wm == 0 {
				locals[step%2].record(-1, e.rec)
				return
			}
			for i, l := range locals {
				l.watermark(e.wm)
				if err := l.op.(sdk.WatermarkObserver).OnWatermark(e.wm, l); err != nil {
					t.Fatal(err)
				}
				for _, r := range l.take() {
					partials = append(partials, rec(r))
				}
				if step == 40 || step == 120 {
					// A checkpoint: the partials go before the
					// barrier, and the restored subtask starts with
					// none (at any parallelism).
					if err := l.op.(sdk.PreBarrierHook).PrepareSnapshotPreBarrier(1, l); err != nil {
						t.Fatal(err)
					}
					for _, r := range l.take() {
						partials = append(partials, rec(r))
					}
					locals[i] = newSubtask(t, &LocalAggregate{}, localCfg, i, 2, nil)
					locals[i].watermark(e.wm)
				}
			}
			partials = append(partials, e)
		})
		for _, l := range locals {
			if err := l.op.(sdk.WatermarkObserver).OnWatermark(sdk.MaxWatermark, l); err != nil {
				t.Fatal(err)
			}
			for _, r := range l.take() {
				partials = append(partials, rec(r))
			}
		}
		global.Partial = true
		two := run(t, newWindowAggregate, config(t, &plan.Operator{WindowAgg: global}), partials, -1)
		a, b := lines(t, global.Out, one), lines(t, global.Out, two)
		if len(a) == 0 || !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two phases\n%s\none phase\n%s", w.Kind, strings.Join(b, "\n"), strings.Join(a, "\n"))
		}
	}
}

// twoPhaseStream is 200 rows of random values, a little out of order,
// with the watermark 5 ms behind after every 10 (and, when late, every
// 17th row 15 ms behind); each event goes to visit (with its index) and
// all of them are returned.
func twoPhaseStream(in plan.Schema, late bool, visit func(event, int)) []event {
	rnd := rand.New(rand.NewPCG(1, 2))
	var events []event
	for i := range 200 {
		ts := int64(i) - rnd.Int64N(4)
		if late && i%17 == 16 {
			ts = int64(i) - 15
		}
		r := row.Row{row.Int(rnd.Int64N(20) - 5), row.Str(string(rune('a' + rnd.IntN(5))))}
		events = append(events, rec(rowRecord(in, r, nil, ts)))
		if i%10 == 9 {
			events = append(events, wm(int64(i)-5))
		}
	}
	if visit != nil {
		for i, e := range events {
			visit(e, i)
		}
	}
	return events
}

// lines are the rows of recs as sorted "ts: CSV" lines.
func lines(t testing.TB, s plan.Schema, recs []sdk.Record) []string {
	t.Helper()
	c := row.NewCodec(s)
	var out []string
	for _, r := range recs {
		d, err := c.Decode(r.Value, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(row.AppendCSV(nil, s, d)))
	}
	slices.Sort(out)
	return out
}

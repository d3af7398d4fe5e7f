package ops

import (
	"testing"

	"github.com/weirproject/weir/internal/nexmark"
	"github.com/weirproject/weir/internal/sql/expr"
	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

// typed is the call fn(args…) typed as the planner types it: arguments
// cast to what the function takes.
func typed(tb testing.TB, fn string, args ...plan.Expr) plan.Expr {
	tb.Helper()
	want, res, err := expr.ResolveCall(fn, args)
	if err != nil {
		tb.Fatal(err)
	}
	for i, w := range want {
		if args[i].Type != w {
			args[i] = plan.Call("cast", w, args[i])
		}
	}
	return plan.Call(fn, res, args...)
}

// discard counts what an operator emits.
type discard struct{ n int }

func (d *discard) Collect(sdk.Record) { d.n++ }

// BenchmarkCalcNexmarkBid is Nexmark q1 with a filter over the source's
// binary bids: decode, filter (price > 100), project (auction, bidder,
// 0.908 * price, date_time), encode the row keyed by auction.
func BenchmarkCalcNexmarkBid(b *testing.B) {
	var recs []sdk.Record
	for n := int64(0); len(recs) < 4096; n++ {
		if e := nexmark.Generate(nexmark.Config{}, n); e.Kind == nexmark.KindBid {
			recs = append(recs, eventRecord(e))
		}
	}
	price := typed(b, "*", lit(tNumeric(3), "908"), col(2, tBigint))
	out := schema("auction", tBigint, "bidder", tBigint, "price", price.Type, "date_time", tTime)
	c := &Calc{}
	ctx := newSubtaskContext(nil)
	err := c.open(&plan.Calc{
		In:      plan.Decoding{Format: plan.FormatNexmarkBid, Schema: bidTable, Timestamp: -1},
		Filter:  cmp(">", col(2, tBigint), lit(tBigint, "100")),
		Project: []plan.Expr{col(0, tBigint), col(1, tBigint), price, col(5, tTime)},
		Out:     out,
		Enc:     plan.Encoding{Format: plan.FormatRow, Key: []int{0}},
	}, ctx.TimerService)
	if err != nil {
		b.Fatal(err)
	}
	d := &discard{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := c.ProcessRecord(recs[i%len(recs)], d); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if d.n == 0 {
		b.Fatal("nothing passed the filter")
	}
}

// BenchmarkWindowAggregateCount counts rows per key in tumbling windows
// of 100ms, 1000 keys, the watermark following the rows.
func BenchmarkWindowAggregateCount(b *testing.B) {
	in := schema("k", tBigint, "v", tBigint)
	p := aggPlan(in, plan.Window{Kind: plan.Tumble, Size: 100}, agg(plan.Count, -1, -1, tBigint))
	s := newSubtask(b, &WindowAggregate{}, config(b, &plan.Operator{WindowAgg: p}), 0, 1, nil)
	const keys = 1000
	recs := make([]sdk.Record, keys)
	for k := range recs {
		recs[k] = rowRecord(in, row.Row{row.Int(int64(k)), row.Int(1)}, []int{0}, 0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := int64(0); b.Loop(); i++ {
		r := recs[i%keys]
		r.Timestamp = i / 100 // 100 rows a millisecond: 10 windows of every key
		if err := s.process(-1, r); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			s.watermark(r.Timestamp - 1)
			s.out = s.out[:0]
		}
	}
}

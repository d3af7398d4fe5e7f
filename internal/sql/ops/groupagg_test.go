package ops

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/sdktest"
	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

func newGroupAggregate() sdk.Operator { return &GroupAggregate{} }

// gaPlan is a group aggregate of in by the group columns, emitting them
// and the aggregates as a changelog keyed by the group.
func gaPlan(in plan.Schema, changelog bool, group []int, aggs ...plan.AggCall) *plan.GroupAgg {
	p := &plan.GroupAgg{In: in, InChangelog: changelog, Group: group, Aggs: aggs}
	var key []int
	for i, c := range group {
		p.Out = append(p.Out, in[c])
		key = append(key, i)
	}
	for _, a := range aggs {
		p.Out = append(p.Out, plan.Column{Name: string(a.Fn), Type: a.Type})
	}
	p.Enc = plan.Encoding{Format: plan.FormatRow, Changelog: true, Key: key}
	return p
}

// gaRecord is the record of r as the upstream operator writes it, keyed
// by the group columns: with its kind on a changelog input.
func gaRecord(p *plan.GroupAgg, kind row.Kind, r row.Row, ts int64) sdk.Record {
	rec := rowRecord(p.In, r, p.Group, ts)
	if p.InChangelog {
		rec.Value = append([]byte{byte(kind)}, rec.Value...)
	}
	if len(p.Group) == 0 {
		rec.Key = nil
	}
	return rec
}

// gaChanges are the changelog records recs as "<kind> <CSV>" lines, in
// order, after checking each record's key is its row's group.
func gaChanges(t testing.TB, p *plan.GroupAgg, recs []sdk.Record) []string {
	t.Helper()
	c := row.NewCodec(p.Out)
	var out []string
	for _, r := range recs {
		kind, v, err := row.SplitKind(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Decode(v, nil)
		if err != nil {
			t.Fatalf("decode %x: %v", v, err)
		}
		if k := c.AppendKey(nil, d, p.Enc.Key); string(k) != string(r.Key) {
			t.Fatalf("row %v has key %x, want its group's %x", d, r.Key, k)
		}
		out = append(out, kind.String()+" "+string(row.AppendCSV(nil, p.Out, d)))
	}
	return out
}

// gaReplay applies a changelog to a table keyed by the records' keys and
// returns it (key → CSV row). Every change must fit the table: an add
// (+I, +U) a key that has no row, a retraction (-U, -D) the row the key
// has, and a -U is followed by the +U of its key.
func gaReplay(s plan.Schema, recs []sdk.Record) (map[string]string, error) {
	c := row.NewCodec(s)
	table := map[string]string{}
	var pendingU *string
	for i, r := range recs {
		kind, v, err := row.SplitKind(r.Value)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		d, err := c.Decode(v, nil)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		line := string(row.AppendCSV(nil, s, d))
		key := string(r.Key)
		if pendingU != nil && (kind != row.UpdateAfter || key != *pendingU) {
			return nil, fmt.Errorf("record %d: %s %s after the -U of key %x", i, kind, line, *pendingU)
		}
		pendingU = nil
		old, ok := table[key]
		switch kind {
		case row.Insert, row.UpdateAfter:
			if ok {
				return nil, fmt.Errorf("record %d: %s %s, and key %x has row %s", i, kind, line, key, old)
			}
			table[key] = line
		case row.UpdateBefore, row.Delete:
			if !ok || old != line {
				return nil, fmt.Errorf("record %d: %s %s, and key %x has row %q", i, kind, line, key, old)
			}
			delete(table, key)
			if kind == row.UpdateBefore {
				pendingU = &key
			}
		}
	}
	if pendingU != nil {
		return nil, fmt.Errorf("a -U of key %x without its +U at the end", *pendingU)
	}
	return table, nil
}

func mustReplay(t testing.TB, s plan.Schema, recs []sdk.Record) map[string]string {
	t.Helper()
	m, err := gaReplay(s, recs)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func tableLines(m map[string]string) []string {
	return slices.Sorted(maps.Values(m))
}

func checkChanges(t *testing.T, name string, got, want []string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: changelog\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestGroupAggregateAppendOnly computes every aggregate function, with
// NULLs, FILTERs and DISTINCT, over an append-only input: a +I for a new
// group, a -U/+U pair for every change.
func TestGroupAggregateAppendOnly(t *testing.T) {
	p := gaPlan(aggIn, false, []int{0},
		agg(plan.Count, -1, -1, tBigint),
		agg(plan.Count, 1, -1, tBigint),
		agg(plan.Sum, 1, -1, tBigint),
		agg(plan.Avg, 1, -1, tNumeric(2)),
		agg(plan.Min, 1, -1, tBigint),
		agg(plan.Max, 4, -1, tVarchar),
		agg(plan.CountDistinct, 4, -1, tBigint),
		agg(plan.Count, -1, 5, tBigint),
		agg(plan.CountDistinct, 4, 5, tBigint),
		agg(plan.Sum, 3, -1, tDouble),
		agg(plan.Sum, 2, 5, tNumeric(2)),
	)
	rows := []row.Row{
		aggRow("a", 1, 150, 0.5, "p", true),
		aggRow("a", nil, nil, nil, nil, false),
		aggRow("b", 5, nil, nil, "q", nil),
		aggRow("a", 3, 25, 1.5, "p", true),
		aggRow("a", -2, 1, nil, "r", false),
		aggRow("a", 0, -5, nil, "r", true),
	}
	var events []event
	for i, r := range rows {
		events = append(events, rec(gaRecord(p, row.Insert, r, int64(i))))
	}
	want := []string{
		"+I a,1,1,1,1.00,1,p,1,1,1,0.5,1.50",
		"-U a,1,1,1,1.00,1,p,1,1,1,0.5,1.50",
		"+U a,2,1,1,1.00,1,p,1,1,1,0.5,1.50",
		"+I b,1,1,5,5.00,5,q,1,0,0,,",
		"-U a,2,1,1,1.00,1,p,1,1,1,0.5,1.50",
		"+U a,3,2,4,2.00,1,p,1,2,1,2,1.75",
		"-U a,3,2,4,2.00,1,p,1,2,1,2,1.75",
		"+U a,4,3,2,0.67,-2,r,2,2,1,2,1.75",
		"-U a,4,3,2,0.67,-2,r,2,2,1,2,1.75",
		"+U a,5,4,2,0.50,-2,r,2,3,2,2,1.70",
	}
	got := run(t, newGroupAggregate, config(t, &plan.Operator{GroupAgg: p}), events, -1)
	checkChanges(t, "append-only", gaChanges(t, p, got), want)
	var stamps []int64
	for _, r := range got {
		stamps = append(stamps, r.Timestamp)
	}
	if want := []int64{0, 1, 1, 2, 3, 3, 4, 4, 5, 5}; !reflect.DeepEqual(stamps, want) {
		t.Errorf("changes at %v, want their rows' timestamps %v", stamps, want)
	}
}

var gaRetractIn = schema("g", tVarchar, "x", tBigint, "s", tVarchar, "flag", tBool)

func gaRetractRow(g string, x int64, s string, flag bool) row.Row {
	return row.Row{row.Str(g), row.Int(x), row.Str(s), row.Bool(flag)}
}

// TestGroupAggregateRetract takes rows back: the current min and max
// (twice, the second time with another row of the value left), distinct
// values, and the last row of the group, which emits -D and drops its
// state; a retraction for an unknown group is ignored.
func TestGroupAggregateRetract(t *testing.T) {
	p := gaPlan(gaRetractIn, true, []int{0},
		agg(plan.Count, -1, -1, tBigint),
		agg(plan.Min, 1, -1, tBigint),
		agg(plan.Max, 1, -1, tBigint),
		agg(plan.CountDistinct, 2, -1, tBigint),
		agg(plan.CountDistinct, 2, 3, tBigint),
		agg(plan.Sum, 1, -1, tBigint),
		agg(plan.Max, 2, -1, tVarchar),
		agg(plan.Min, 2, 3, tVarchar),
	)
	r := func(kind row.Kind, g string, x int64, s string, flag bool) event {
		return rec(gaRecord(p, kind, gaRetractRow(g, x, s, flag), 1))
	}
	events := []event{
		r(row.Insert, "a", 5, "p", true),
		r(row.Insert, "a", 3, "q", false),
		r(row.Insert, "a", 7, "p", true),
		r(row.Insert, "a", 3, "r", true),
		r(row.UpdateBefore, "a", 3, "q", false),
		r(row.Delete, "a", 3, "r", true),
		r(row.Delete, "a", 7, "p", true),
		r(row.Delete, "b", 1, "x", true),
		r(row.Delete, "a", 5, "p", true),
		r(row.Delete, "a", 5, "p", true),
		r(row.Insert, "a", 2, "z\x00", false),
		r(row.Insert, "a", 2, "z", true),
		r(row.UpdateAfter, "a", 9, "z", false),
		r(row.Delete, "a", 2, "z", true),
	}
	want := []string{
		"+I a,1,5,5,1,1,5,p,p",
		"-U a,1,5,5,1,1,5,p,p",
		"+U a,2,3,5,2,1,8,q,p",
		"-U a,2,3,5,2,1,8,q,p",
		"+U a,3,3,7,2,1,15,q,p",
		"-U a,3,3,7,2,1,15,q,p",
		"+U a,4,3,7,3,2,18,r,p",
		// -U of (3, q): another 3 is left, so the min stays.
		"-U a,4,3,7,3,2,18,r,p",
		"+U a,3,3,7,2,2,15,r,p",
		// -D of (3, r): the min goes to 5, r goes.
		"-U a,3,3,7,2,2,15,r,p",
		"+U a,2,5,7,1,1,12,p,p",
		// -D of (7, p): the max goes to 5, p stays (another row).
		"-U a,2,5,7,1,1,12,p,p",
		"+U a,1,5,5,1,1,5,p,p",
		// The last row: -D; the second one finds nothing to take
		// back from.
		"-D a,1,5,5,1,1,5,p,p",
		"+I a,1,2,2,1,0,2,\"z\x00\",",
		"-U a,1,2,2,1,0,2,\"z\x00\",",
		"+U a,2,2,2,2,1,4,z\x00,z",
		"-U a,2,2,2,2,1,4,z\x00,z",
		"+U a,3,2,9,2,1,13,z\x00,z",
		"-U a,3,2,9,2,1,13,z\x00,z",
		"+U a,2,2,9,2,0,11,z\x00,",
	}
	cfg := config(t, &plan.Operator{GroupAgg: p})
	got := gaChanges(t, p, run(t, newGroupAggregate, cfg, events, -1))
	// CSV quotes what needs quoting: compare without the quotes.
	for i := range got {
		got[i] = strings.ReplaceAll(got[i], `"`, "")
	}
	for i := range want {
		want[i] = strings.ReplaceAll(want[i], `"`, "")
	}
	checkChanges(t, "retract", got, want)

	// The group's state is gone with its last row: no accumulator, no
	// map entries.
	s := newSubtask(t, &GroupAggregate{}, cfg, 0, 1, nil)
	for _, e := range events[:9] {
		s.record(-1, e.rec)
	}
	key := events[0].rec.Key
	s.ctx.Heap.SetCurrentKey(key)
	if _, ok := s.ctx.ValueState("acc").Value(); ok {
		t.Error("the accumulator of an empty group is kept")
	}
	for _, name := range []string{"distinct", "minmax"} {
		if !s.ctx.MapState(name).IsEmpty() {
			t.Errorf("map %q of an empty group keeps entries", name)
		}
	}
}

// TestGroupAggregateUnchanged: a row that changes no result emits
// nothing, on an append-only input and on a changelog.
func TestGroupAggregateUnchanged(t *testing.T) {
	in := schema("g", tBigint, "x", tBigint, "s", tVarchar)
	for _, changelog := range []bool{false, true} {
		p := gaPlan(in, changelog, []int{0}, agg(plan.Max, 1, -1, tBigint), agg(plan.CountDistinct, 2, -1, tBigint))
		r := func(kind row.Kind, x int64, s string) event {
			return rec(gaRecord(p, kind, row.Row{row.Int(1), row.Int(x), row.Str(s)}, 0))
		}
		events := []event{r(row.Insert, 5, "p"), r(row.Insert, 3, "p"), r(row.Insert, 5, "p"), r(row.Insert, 6, "p")}
		want := []string{"+I 1,5,1", "-U 1,5,1", "+U 1,6,1"}
		if changelog {
			// Taking back a 5 (another is left) and the 3 changes
			// nothing either.
			events = append(events, r(row.Delete, 5, "p"), r(row.UpdateBefore, 3, "p"), r(row.UpdateAfter, 4, "p"))
		}
		got := run(t, newGroupAggregate, config(t, &plan.Operator{GroupAgg: p}), events, -1)
		checkChanges(t, fmt.Sprintf("changelog %v", changelog), gaChanges(t, p, got), want)
	}
}

// gaStream is a random changelog of rows of gaRetractIn over 8 groups,
// consistent (only rows added are taken back), ts its index; and the
// rows left in each group at its end.
func gaStream(p *plan.GroupAgg, n int) ([]event, map[string][]row.Row) {
	rnd := rand.New(rand.NewPCG(3, 4))
	live := map[string][]row.Row{}
	var events []event
	for i := 0; len(events) < n; i++ {
		g := string(rune('a' + rnd.IntN(8)))
		rows := live[g]
		if len(rows) > 0 && rnd.IntN(3) == 0 {
			j := rnd.IntN(len(rows))
			old := rows[j]
			live[g] = slices.Delete(rows, j, j+1)
			if rnd.IntN(2) == 0 {
				events = append(events, rec(gaRecord(p, row.Delete, old, int64(len(events)))))
				continue
			}
			events = append(events, rec(gaRecord(p, row.UpdateBefore, old, int64(len(events)))))
			nr := gaRetractRow(g, rnd.Int64N(20)-5, string(rune('p'+rnd.IntN(5))), rnd.IntN(2) == 0)
			live[g] = append(live[g], nr)
			events = append(events, rec(gaRecord(p, row.UpdateAfter, nr, int64(len(events)))))
			continue
		}
		r := gaRetractRow(g, rnd.Int64N(20)-5, string(rune('p'+rnd.IntN(5))), rnd.IntN(2) == 0)
		if rnd.IntN(10) == 0 {
			r[1] = row.Null()
		}
		live[g] = append(live[g], r)
		events = append(events, rec(gaRecord(p, row.Insert, r, int64(len(events)))))
	}
	return events, live
}

// gaStreamAggs are the aggregates the random stream's tests compute, and
// gaExpected their results over the rows of a group (CSV, with it).
var gaStreamAggs = []plan.AggCall{
	agg(plan.Count, -1, -1, tBigint),
	agg(plan.Count, 1, -1, tBigint),
	agg(plan.Sum, 1, -1, tBigint),
	agg(plan.Min, 1, -1, tBigint),
	agg(plan.Max, 1, 3, tBigint),
	agg(plan.Max, 2, -1, tVarchar),
	agg(plan.Min, 2, -1, tVarchar),
	agg(plan.CountDistinct, 2, -1, tBigint),
	agg(plan.CountDistinct, 2, 3, tBigint),
	agg(plan.Count, -1, 3, tBigint),
	agg(plan.Avg, 1, -1, tNumeric(3)),
}

func gaExpected(g string, rows []row.Row) string {
	var n, nx, sum, nf int64
	var minX, maxXf *int64
	var minS, maxS string
	distinct, distinctF := map[string]bool{}, map[string]bool{}
	for _, r := range rows {
		n++
		flag := r[3].Bool()
		if flag {
			nf++
			distinctF[r[2].Str()] = true
		}
		distinct[r[2].Str()] = true
		if minS == "" || r[2].Str() < minS {
			minS = r[2].Str()
		}
		maxS = max(maxS, r[2].Str())
		if r[1].IsNull() {
			continue
		}
		x := r[1].Int()
		nx++
		sum += x
		if minX == nil || x < *minX {
			minX = &x
		}
		if flag && (maxXf == nil || x > *maxXf) {
			maxXf = &x
		}
	}
	str := func(p *int64) string {
		if p == nil {
			return ""
		}
		return fmt.Sprint(*p)
	}
	sumS, avg := "", ""
	if nx > 0 {
		sumS = fmt.Sprint(sum)
		v, _ := ratio(sum, 0, uint64(nx), tNumeric(3))
		avg = string(row.AppendText(nil, tNumeric(3), v))
	}
	return fmt.Sprintf("%s,%d,%d,%s,%s,%s,%s,%s,%d,%d,%d,%s", g, n, nx, sumS, str(minX), str(maxXf), maxS, minS,
		len(distinct), len(distinctF), nf, avg)
}

func gaExpectedTable(live map[string][]row.Row) []string {
	var out []string
	for g, rows := range live {
		if len(rows) > 0 {
			out = append(out, gaExpected(g, rows))
		}
	}
	slices.Sort(out)
	return out
}

// TestGroupAggregateRestore runs a random changelog, restored at
// parallelism 3 at several points: the table the changelog makes is the
// same, and each group's row is what its rows left compute.
func TestGroupAggregateRestore(t *testing.T) {
	p := gaPlan(gaRetractIn, true, []int{0}, gaStreamAggs...)
	events, live := gaStream(p, 400)
	want := gaExpectedTable(live)
	cfg := config(t, &plan.Operator{GroupAgg: p})
	base := run(t, newGroupAggregate, cfg, events, -1)
	if got := tableLines(mustReplay(t, p.Out, base)); !reflect.DeepEqual(got, want) {
		t.Fatalf("table\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, restoreAfter := range []int{0, 57, 200, 399} {
		got := run(t, newGroupAggregate, cfg, events, restoreAfter)
		if len(got) != len(base) {
			t.Errorf("restored after event %d: %d changes, want %d", restoreAfter, len(got), len(base))
		}
		if table := tableLines(mustReplay(t, p.Out, got)); !reflect.DeepEqual(table, want) {
			t.Errorf("restored after event %d: table\n%s\nwant\n%s", restoreAfter, strings.Join(table, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestGroupAggregateReplayCatches: the replay the restore tests compare
// by fails, or makes another table, when a change of the changelog is
// dropped or duplicated.
func TestGroupAggregateReplayCatches(t *testing.T) {
	p := gaPlan(gaRetractIn, true, []int{0}, gaStreamAggs...)
	events, _ := gaStream(p, 120)
	changes := run(t, newGroupAggregate, config(t, &plan.Operator{GroupAgg: p}), events, -1)
	want := mustReplay(t, p.Out, changes)
	kinds := map[row.Kind]int{}
	for i := range changes {
		kinds[row.Kind(changes[i].Value[0])]++
		dropped := slices.Delete(slices.Clone(changes), i, i+1)
		if got, err := gaReplay(p.Out, dropped); err == nil && maps.Equal(got, want) {
			t.Errorf("dropping change %d (%s) goes unnoticed", i, row.Kind(changes[i].Value[0]))
		}
		doubled := slices.Insert(slices.Clone(changes), i, changes[i])
		if got, err := gaReplay(p.Out, doubled); err == nil && maps.Equal(got, want) {
			t.Errorf("duplicating change %d (%s) goes unnoticed", i, row.Kind(changes[i].Value[0]))
		}
	}
	for _, k := range []row.Kind{row.Insert, row.UpdateBefore, row.UpdateAfter, row.Delete} {
		if kinds[k] == 0 {
			t.Errorf("the changelog has no %s to drop", k)
		}
	}
}

// TestGroupAggregateTTL: a group no row touched for the TTL is dropped
// without a change (a later row starts it again, +I); one touched since
// survives its first timer and goes a TTL after its last touch. Again
// with a restore in the middle: the timers come back with the state.
func TestGroupAggregateTTL(t *testing.T) {
	in := schema("g", tVarchar, "x", tBigint)
	p := gaPlan(in, false, []int{0}, agg(plan.Count, -1, -1, tBigint), agg(plan.CountDistinct, 1, -1, tBigint))
	p.TTL = 10
	r := func(g string, x int64) event { return rec(gaRecord(p, row.Insert, row.Row{row.Str(g), row.Int(x)}, 0)) }
	events := []event{
		clock(1), r("a", 1), r("b", 1), r("c", 1),
		clock(6), r("a", 2),
		clock(11), // b and c expire; a, touched at 6, lives to 16
		r("b", 1),
		clock(15), r("a", 1),
		clock(24), // a, touched at 15, survives; b, from 11, expires
		r("a", 3), r("b", 1),
		clock(50), // all expire
		r("a", 1),
	}
	want := []string{
		"+I a,1,1", "+I b,1,1", "+I c,1,1",
		"-U a,1,1", "+U a,2,2",
		"+I b,1,1",
		"-U a,2,2", "+U a,3,2",
		"-U a,3,2", "+U a,4,3", "+I b,1,1",
		"+I a,1,1",
	}
	cfg := config(t, &plan.Operator{GroupAgg: p})
	for _, restoreAfter := range []int{-1, 3, 6, 12} {
		got := gaChanges(t, p, run(t, newGroupAggregate, cfg, events, restoreAfter))
		if restoreAfter >= 0 {
			// Subtasks' changes come one subtask after another: order
			// by group, keeping each group's order.
			slices.SortStableFunc(got, func(a, b string) int { return strings.Compare(a[3:4], b[3:4]) })
			slices.SortStableFunc(want, func(a, b string) int { return strings.Compare(a[3:4], b[3:4]) })
		}
		checkChanges(t, fmt.Sprintf("restored after event %d", restoreAfter), got, want)
	}

	// One timer per group at a time: a group touched often has one
	// pending, and none is left once it expired.
	s := newSubtask(t, &GroupAggregate{}, cfg, 0, 1, nil)
	for ms := int64(1); ms < 30; ms++ {
		s.timers.nowMs = ms
		s.record(-1, r("a", ms).rec)
		s.clock(ms)
	}
	if n := s.timers.svc.Len(); n != 1 {
		t.Errorf("%d timers pending for one group, want 1", n)
	}
	s.clock(100)
	if n := s.timers.svc.Len(); n != 0 {
		t.Errorf("%d timers pending after the group expired, want 0", n)
	}
	// A group its last row left drops its timer with its state.
	q := gaPlan(in, true, []int{0}, agg(plan.Count, -1, -1, tBigint))
	q.TTL = 10
	s = newSubtask(t, &GroupAggregate{}, config(t, &plan.Operator{GroupAgg: q}), 0, 1, nil)
	s.record(-1, gaRecord(q, row.Insert, row.Row{row.Str("a"), row.Int(1)}, 0))
	s.record(-1, gaRecord(q, row.Delete, row.Row{row.Str("a"), row.Int(1)}, 0))
	if n := s.timers.svc.Len(); n != 0 {
		t.Errorf("%d timers pending for a group gone, want 0", n)
	}
}

// gaRunBatched is run for operators that hold changes back: it calls
// PrepareSnapshotPreBarrier before the checkpoint of a restore (and after
// every barrierEvery events, 0: never), and EndInput at the end.
func gaRunBatched(t testing.TB, cfg sdk.Config, events []event, restoreAfter, barrierEvery int) []sdk.Record {
	t.Helper()
	subs := []*subtask{newSubtask(t, newGroupAggregate(), cfg, 0, 1, nil)}
	var out []sdk.Record
	barrier := func() {
		for _, s := range subs {
			if err := s.op.(sdk.PreBarrierHook).PrepareSnapshotPreBarrier(1, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	root := t.TempDir()
	for i, e := range events {
		switch {
		case e.clock != 0:
			for _, s := range subs {
				s.clock(e.clock)
			}
		default:
			kg := keygroup.Of(e.rec.Key, sdktest.MaxParallelism)
			subs[keygroup.OperatorIndex(kg, sdktest.MaxParallelism, len(subs))].record(e.input, e.rec)
		}
		if barrierEvery > 0 && i%barrierEvery == barrierEvery-1 {
			barrier()
		}
		if i != restoreAfter {
			continue
		}
		barrier()
		states := checkpoint(t, subs, root, 1)
		restored := make([]*subtask, 3)
		for j := range restored {
			ctx := sdktest.Restore(t, "sql", cfg, j, len(restored), 1, 1, states)
			restored[j] = newSubtask(t, newGroupAggregate(), cfg, j, len(restored), ctx)
			restored[j].timers.nowMs = subs[0].timers.nowMs
		}
		for _, s := range subs {
			out = append(out, s.take()...)
		}
		subs = restored
	}
	for _, s := range subs {
		if err := s.op.(sdk.InputEnder).EndInput(s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s.take()...)
	}
	return out
}

// TestGroupAggregateMiniBatch: the changes of a group in a batch are
// folded into one, emitted before the checkpoint barrier, when the batch
// holds Size groups, or when its latency passed; the table the changelog
// makes is the one without mini-batch.
func TestGroupAggregateMiniBatch(t *testing.T) {
	in := schema("g", tVarchar, "x", tBigint)
	p := gaPlan(in, true, []int{0}, agg(plan.Count, -1, -1, tBigint), agg(plan.Sum, 1, -1, tBigint))
	p.MiniBatch = plan.MiniBatch{Size: 100}
	r := func(kind row.Kind, g string, x, ts int64) sdk.Record {
		return gaRecord(p, kind, row.Row{row.Str(g), row.Int(x)}, ts)
	}
	s := newSubtask(t, &GroupAggregate{}, config(t, &plan.Operator{GroupAgg: p}), 0, 1, nil)
	barrier := func() []string {
		if err := s.op.(sdk.PreBarrierHook).PrepareSnapshotPreBarrier(1, s); err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, r := range s.take() {
			lines = append(lines, fmt.Sprintf("%d: %s", r.Timestamp, gaChanges(t, p, []sdk.Record{r})[0]))
		}
		return lines
	}
	for i := range int64(10) {
		s.record(-1, r(row.Insert, "a", i, i))
	}
	s.record(-1, r(row.Insert, "b", 1, 10))
	s.record(-1, r(row.Delete, "b", 1, 11)) // b comes and goes: nothing
	s.record(-1, r(row.Insert, "c", 1, 12))
	if len(s.out) != 0 {
		t.Fatalf("%d changes before the batch ended", len(s.out))
	}
	checkChanges(t, "first batch", barrier(), []string{"9: +I a,10,45", "12: +I c,1,1"})
	for i := range int64(10) {
		s.record(-1, r(row.Insert, "a", 1, 20+i))
	}
	s.record(-1, r(row.Insert, "c", 5, 30))
	s.record(-1, r(row.Delete, "c", 5, 31)) // back to what it was: nothing
	s.record(-1, r(row.Delete, "d", 5, 32)) // unknown: nothing
	checkChanges(t, "second batch", barrier(), []string{"29: -U a,10,45", "29: +U a,20,55"})
	s.record(-1, r(row.Delete, "c", 1, 40))
	checkChanges(t, "third batch", barrier(), []string{"40: -D c,1,1"})
	checkChanges(t, "empty batch", barrier(), nil)

	// Size: the batch ends when it holds 2 groups.
	p.MiniBatch = plan.MiniBatch{Size: 2}
	s = newSubtask(t, &GroupAggregate{}, config(t, &plan.Operator{GroupAgg: p}), 0, 1, nil)
	s.record(-1, r(row.Insert, "a", 1, 1))
	s.record(-1, r(row.Insert, "a", 2, 2))
	if len(s.out) != 0 {
		t.Fatalf("%d changes from a batch of one group", len(s.out))
	}
	s.record(-1, r(row.Insert, "b", 1, 3))
	checkChanges(t, "full batch", gaChanges(t, p, s.take()), []string{"+I a,2,3", "+I b,1,1"})
	s.record(-1, r(row.Insert, "a", 2, 4))
	if err := s.op.(sdk.InputEnder).EndInput(s); err != nil {
		t.Fatal(err)
	}
	checkChanges(t, "end of input", gaChanges(t, p, s.take()), []string{"-U a,2,3", "+U a,3,5"})

	// Latency: the batch ends 5ms after its first change, stamped then.
	p.MiniBatch = plan.MiniBatch{Size: 100, Latency: 5}
	s = newSubtask(t, &GroupAggregate{}, config(t, &plan.Operator{GroupAgg: p}), 0, 1, nil)
	s.clock(10)
	s.record(-1, r(row.Insert, "a", 1, 1))
	s.clock(12)
	s.record(-1, r(row.Insert, "b", 1, 2))
	s.clock(14)
	if len(s.out) != 0 {
		t.Fatalf("%d changes before the latency passed", len(s.out))
	}
	s.clock(15)
	got := s.take()
	checkChanges(t, "latency", gaChanges(t, p, got), []string{"+I a,1,1", "+I b,1,1"})
	for _, r := range got {
		if r.Timestamp != 15 {
			t.Errorf("a change of a batch ended by its timer at %d, want 15", r.Timestamp)
		}
	}
	// A batch flushed before its timer: the stale timer ends nothing of
	// the next batch.
	s.record(-1, r(row.Insert, "a", 1, 3)) // a batch until 20
	barrier()
	s.clock(17)
	s.record(-1, r(row.Insert, "a", 1, 4)) // a batch until 22
	s.clock(20)
	if len(s.out) != 0 {
		t.Errorf("a stale timer ended the batch: %q", gaChanges(t, p, s.out))
	}
	s.clock(22)
	checkChanges(t, "second latency", gaChanges(t, p, s.take()), []string{"-U a,2,2", "+U a,3,3"})
}

// TestGroupAggregateMiniBatchEqualsUnbatched: the random changelog in
// batches of 3 groups, with barriers and a restore at parallelism 3, makes
// the table it makes without.
func TestGroupAggregateMiniBatchEqualsUnbatched(t *testing.T) {
	p := gaPlan(gaRetractIn, true, []int{0}, gaStreamAggs...)
	events, live := gaStream(p, 400)
	want := gaExpectedTable(live)
	unbatched := run(t, newGroupAggregate, config(t, &plan.Operator{GroupAgg: p}), events, -1)
	if base := tableLines(mustReplay(t, p.Out, unbatched)); !reflect.DeepEqual(base, want) {
		t.Fatalf("unbatched table\n%s\nwant\n%s", strings.Join(base, "\n"), strings.Join(want, "\n"))
	}
	p.MiniBatch = plan.MiniBatch{Size: 3}
	cfg := config(t, &plan.Operator{GroupAgg: p})
	for _, tc := range []struct{ restoreAfter, barrierEvery int }{{-1, 0}, {-1, 7}, {150, 0}, {150, 13}} {
		changes := gaRunBatched(t, cfg, events, tc.restoreAfter, tc.barrierEvery)
		if len(changes) >= len(unbatched) {
			t.Errorf("%+v: %d changes, %d without mini-batch: nothing folded", tc, len(changes), len(unbatched))
		}
		if got := tableLines(mustReplay(t, p.Out, changes)); !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: table\n%s\nwant\n%s", tc, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestGroupAggregateValues: min and max over a changelog of every type,
// whose values the state orders by their encoding: taking back the
// extremes one by one walks them in SQL's order.
func TestGroupAggregateValues(t *testing.T) {
	for _, tc := range []struct {
		t    plan.Type
		vals []row.Value
	}{
		{tBigint, []row.Value{row.Int(math.MinInt64), row.Int(-300), row.Int(-1), row.Int(0), row.Int(1), row.Int(255), row.Int(256), row.Int(math.MaxInt64)}},
		{tInt, []row.Value{row.Int(math.MinInt32), row.Int(-2), row.Int(7), row.Int(math.MaxInt32)}},
		{tNumeric(2), []row.Value{row.Int(-150), row.Int(-1), row.Int(99)}},
		{tTime, []row.Value{row.Int(-1_000_000), row.Int(0), row.Int(1_700_000_000_000_000)}},
		{plan.Type{Kind: plan.Date}, []row.Value{row.Int(-1), row.Int(0), row.Int(20000)}},
		{plan.Type{Kind: plan.Interval}, []row.Value{row.Int(-5), row.Int(3)}},
		{tDouble, []row.Value{row.Float(math.Inf(-1)), row.Float(-1e300), row.Float(-1.5), row.Float(-1e-300), row.Float(0), row.Float(1e-300), row.Float(2.5), row.Float(math.Inf(1)), row.Float(math.NaN())}},
		{plan.Type{Kind: plan.Float32}, []row.Value{row.Float(-3), row.Float(0.5), row.Float(1)}},
		{tBool, []row.Value{row.Bool(false), row.Bool(true)}},
		{tVarchar, []row.Value{row.Str(""), row.Str("\x00"), row.Str("\x00\x00"), row.Str("\x00\x01"), row.Str("\x00a"), row.Str("a"), row.Str("a\x00"), row.Str("a\x00b"), row.Str("a\x01"), row.Str("ab"), row.Str("b"), row.Str("\xff")}},
	} {
		t.Run(tc.t.String(), func(t *testing.T) {
			in := plan.Schema{{Name: "g", Type: tBigint}, {Name: "v", Type: tc.t}}
			p := gaPlan(in, true, []int{0}, agg(plan.Min, 1, -1, tc.t), agg(plan.Max, 1, -1, tc.t))
			for i, v := range tc.vals {
				enc := appendOrdered(nil, tc.t.Kind, v)
				d, err := decodeOrdered(tc.t.Kind, enc)
				if err != nil || compareEncoded(tc.t.Kind, appendValue(nil, tc.t.Kind, d), appendValue(nil, tc.t.Kind, v)) != 0 {
					t.Errorf("value %d decodes as %v, %v", i, d, err)
				}
				if i > 0 && string(appendOrdered(nil, tc.t.Kind, tc.vals[i-1])) >= string(enc) {
					t.Errorf("value %d does not encode above value %d", i, i-1)
				}
			}
			// Added in a shuffled order, twice each, then taken back
			// from the least: the min walks up, the max stays until
			// the end.
			rnd := rand.New(rand.NewPCG(5, 6))
			order := rnd.Perm(len(tc.vals))
			r := func(kind row.Kind, v row.Value) sdk.Record {
				return gaRecord(p, kind, row.Row{row.Int(1), v}, 0)
			}
			s := newSubtask(t, &GroupAggregate{}, config(t, &plan.Operator{GroupAgg: p}), 0, 1, nil)
			for _, i := range append(order, order...) {
				s.record(-1, r(row.Insert, tc.vals[i]))
			}
			c := row.NewCodec(p.Out)
			last := func() row.Row {
				t.Helper()
				if len(s.out) == 0 {
					t.Fatal("no change")
				}
				_, v, _ := row.SplitKind(s.out[len(s.out)-1].Value)
				d, err := c.Decode(v, nil)
				if err != nil {
					t.Fatal(err)
				}
				s.out = nil
				return d
			}
			text := func(v row.Value) string { return string(row.AppendText(nil, tc.t, v)) }
			top := tc.vals[len(tc.vals)-1]
			if got := last(); text(got[1]) != text(tc.vals[0]) || text(got[2]) != text(top) {
				t.Fatalf("min, max %s, %s; want %s, %s", text(got[1]), text(got[2]), text(tc.vals[0]), text(top))
			}
			for i, v := range tc.vals[:len(tc.vals)-1] {
				s.record(-1, r(row.Delete, v))
				if len(s.out) != 0 {
					t.Fatalf("taking back one of two %s changed the result", text(v))
				}
				s.record(-1, r(row.UpdateBefore, v))
				if got := last(); text(got[1]) != text(tc.vals[i+1]) || text(got[2]) != text(top) {
					t.Fatalf("after taking back %s: min, max %s, %s; want %s, %s", text(v), text(got[1]), text(got[2]), text(tc.vals[i+1]), text(top))
				}
			}
			// And from the greatest: the max walks down.
			s = newSubtask(t, &GroupAggregate{}, config(t, &plan.Operator{GroupAgg: p}), 0, 1, nil)
			for _, i := range order {
				s.record(-1, r(row.Insert, tc.vals[i]))
			}
			for i := len(tc.vals) - 1; i > 0; i-- {
				s.record(-1, r(row.Delete, tc.vals[i]))
				if got := last(); text(got[2]) != text(tc.vals[i-1]) || text(got[1]) != text(tc.vals[0]) {
					t.Fatalf("after taking back %s: max %s, want %s", text(tc.vals[i]), text(got[2]), text(tc.vals[i-1]))
				}
			}
		})
	}
}

// TestGroupAggregateOutputs: a global aggregate (no group) and the sink
// modes: an upsert output writes the +U over the -U, and a tombstone for
// the -D.
func TestGroupAggregateOutputs(t *testing.T) {
	in := schema("g", tBigint, "x", tBigint)
	p := gaPlan(in, true, nil, agg(plan.Sum, 1, -1, tBigint))
	r := func(kind row.Kind, g, x int64) event {
		return rec(gaRecord(p, kind, row.Row{row.Int(g), row.Int(x)}, 0))
	}
	got := run(t, newGroupAggregate, config(t, &plan.Operator{GroupAgg: p}), []event{r(row.Insert, 1, 2), r(row.Insert, 2, 3), r(row.Delete, 1, 2), r(row.Delete, 2, 3)}, -1)
	checkChanges(t, "global", gaChanges(t, p, got), []string{"+I 2", "-U 2", "+U 5", "-U 5", "+U 3", "-D 3"})

	p = gaPlan(in, true, []int{0}, agg(plan.Sum, 1, -1, tBigint))
	p.Enc = plan.Encoding{Format: plan.FormatJSON, Sink: plan.SinkUpsert, Key: []int{0}, KeyFormat: plan.FormatCSV}
	s := newSubtask(t, &GroupAggregate{}, config(t, &plan.Operator{GroupAgg: p}), 0, 1, nil)
	for _, e := range []event{r(row.Insert, 1, 2), r(row.Insert, 1, 3), r(row.Insert, 7, 1), r(row.Delete, 1, 2), r(row.Delete, 1, 3)} {
		s.record(-1, e.rec)
	}
	if err := s.op.(sdk.PreBarrierHook).PrepareSnapshotPreBarrier(1, s); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range s.take() {
		lines = append(lines, string(r.Key)+" "+string(r.Value))
	}
	want := []string{`1 {"g":1,"sum":2}`, `1 {"g":1,"sum":5}`, `7 {"g":7,"sum":1}`, `1 {"g":1,"sum":3}`, `1 `}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("upsert records %q, want %q", lines, want)
	}
}

func TestGroupAggregateErrors(t *testing.T) {
	in := schema("g", tBigint, "x", tBigint, "s", tVarchar)
	count := agg(plan.Count, -1, -1, tBigint)
	for _, tc := range []struct {
		name string
		op   *plan.Operator
		want string
	}{
		{"not a group aggregate", &plan.Operator{Calc: &plan.Calc{}}, "not a group aggregate's"},
		{"group column", &plan.Operator{GroupAgg: func() *plan.GroupAgg { p := gaPlan(in, false, []int{0}, count); p.Group = []int{3}; return p }()}, "group column 3"},
		{"aggregate", &plan.Operator{GroupAgg: gaPlan(in, false, []int{0}, agg(plan.Sum, 2, -1, tBigint))}, "aggregate 0: sum of VARCHAR"},
		{"output", &plan.Operator{GroupAgg: func() *plan.GroupAgg { p := gaPlan(in, false, []int{0}, count); p.Out = p.Out[:1]; return p }()}, "output of 1 columns"},
		{"TTL", &plan.Operator{GroupAgg: func() *plan.GroupAgg { p := gaPlan(in, false, []int{0}, count); p.TTL = -1; return p }()}, "negative"},
		{"encoding", &plan.Operator{GroupAgg: func() *plan.GroupAgg {
			p := gaPlan(in, false, []int{0}, count)
			p.Enc.Format = plan.FormatCSV
			return p
		}()}, "changelog output between operators is in the row format"},
	} {
		err := (&GroupAggregate{}).Open(newSubtaskContext(config(t, tc.op)))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "sql-group-aggregate: ") {
			t.Errorf("%s: Open = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}

	p := gaPlan(in, true, []int{0}, agg(plan.Sum, 1, -1, tBigint), agg(plan.Max, 2, -1, tVarchar), agg(plan.CountDistinct, 2, -1, tBigint))
	cfg := config(t, &plan.Operator{GroupAgg: p})
	r := func(kind row.Kind, x int64) sdk.Record {
		return gaRecord(p, kind, row.Row{row.Int(1), row.Int(x), row.Str("s")}, 0)
	}
	s := newSubtask(t, &GroupAggregate{}, cfg, 0, 1, nil)
	s.record(-1, r(row.Insert, math.MaxInt64))
	if err := s.process(-1, r(row.Insert, 1)); err == nil || !strings.Contains(err.Error(), "sql-group-aggregate: sum: BIGINT out of range") {
		t.Errorf("sum past 64 bits: %v", err)
	}
	s.record(-1, r(row.Insert, -1))
	if err := s.process(-1, r(row.Delete, math.MinInt64)); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("taking back past 64 bits: %v", err)
	}
	if err := s.process(-1, sdk.Record{Key: r(row.Insert, 1).Key, Value: []byte{9}}); err == nil || !strings.Contains(err.Error(), "row kind") {
		t.Errorf("a record without a kind: %v", err)
	}
	if err := s.process(-1, sdk.Record{Key: r(row.Insert, 1).Key, Value: []byte{0, 0xff}}); err == nil || !strings.HasPrefix(err.Error(), "sql-group-aggregate: decode") {
		t.Errorf("a corrupt row: %v", err)
	}

	// Corrupt state is an error, whatever the bytes.
	good := newSubtask(t, &GroupAggregate{}, cfg, 0, 1, nil)
	key := r(row.Insert, 1).Key
	good.record(-1, r(row.Insert, 1))
	good.ctx.Heap.SetCurrentKey(key)
	acc, _ := good.ctx.ValueState("acc").Value()
	var uk []byte
	for k := range good.ctx.MapState("distinct").All() {
		uk = k
	}
	rnd := rand.New(rand.NewPCG(7, 8))
	for i := range 300 {
		s := newSubtask(t, &GroupAggregate{}, cfg, 0, 1, nil)
		s.ctx.Heap.SetCurrentKey(key)
		bad := slices.Clone(acc)
		switch i % 3 {
		case 0:
			bad = bad[:rnd.IntN(len(bad))]
		case 1:
			bad[rnd.IntN(len(bad))] ^= byte(1 + rnd.IntN(255))
		case 2:
			bad = append(bad, byte(rnd.IntN(256)))
		}
		s.ctx.ValueState("acc").Update(bad)
		s.ctx.MapState("distinct").Put(uk, []byte{0x80})
		err := s.process(-1, r(row.Insert, 2))
		if err != nil && !strings.HasPrefix(err.Error(), "sql-group-aggregate: ") {
			t.Errorf("corrupt state %x: %v", bad, err)
		}
		if err == nil {
			t.Errorf("corrupt state %x: no error", bad)
		}
	}
}

// BenchmarkGroupAggregate is Nexmark q15's shape over an append-only
// input: per group (1000 of them), count(*), sum(x), and two
// count(DISTINCT d) with FILTERs, one record per op.
func BenchmarkGroupAggregate(b *testing.B) {
	in := schema("k", tBigint, "x", tBigint, "d", tBigint, "f1", tBool, "f2", tBool)
	p := gaPlan(in, false, []int{0},
		agg(plan.Count, -1, -1, tBigint),
		agg(plan.Sum, 1, -1, tBigint),
		agg(plan.CountDistinct, 2, 3, tBigint),
		agg(plan.CountDistinct, 2, 4, tBigint),
	)
	s := newSubtask(b, &GroupAggregate{}, config(b, &plan.Operator{GroupAgg: p}), 0, 1, nil)
	const keys = 1000
	rnd := rand.New(rand.NewPCG(9, 10))
	recs := make([]sdk.Record, 64<<10)
	for i := range recs {
		x := rnd.Int64N(10_000)
		r := row.Row{row.Int(int64(i % keys)), row.Int(x), row.Int(rnd.Int64N(200)), row.Bool(x < 5000), row.Bool(x >= 8000)}
		recs[i] = gaRecord(p, row.Insert, r, int64(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := s.process(-1, recs[i%len(recs)]); err != nil {
			b.Fatal(err)
		}
		if len(s.out) >= 1024 {
			s.out = s.out[:0]
		}
	}
}

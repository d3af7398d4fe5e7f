package ops

import (
	"bytes"
	stdcmp "cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

func newTopN() sdk.Operator { return &TopN{} }

// topIn is the tests' input: a partition, a nullable number to order by,
// and a name telling the rows apart.
var topIn = schema("p", tVarchar, "x", tBigint, "s", tVarchar)

// topPlan ranks topIn's rows per partition p, emitting a changelog keyed
// by the partition (and the row number, when ranked).
func topPlan(limit int64, rank, changelog bool, order ...plan.SortKey) *plan.TopN {
	p := &plan.TopN{In: topIn, InChangelog: changelog, Partition: []int{0}, Order: order, Limit: limit, Rank: rank,
		Out: topIn, Enc: plan.Encoding{Format: plan.FormatRow, Changelog: true, Key: []int{0}}}
	if rank {
		p.Out = append(slices.Clone(topIn), plan.Column{Name: "rn", Type: tBigint})
		p.Enc.Key = []int{0, 3}
	}
	return p
}

func topAsc(c int) plan.SortKey  { return plan.SortKey{Col: c} }
func topDesc(c int) plan.SortKey { return plan.SortKey{Col: c, Desc: true} }

func topRow(p string, x any, s string) row.Row {
	r := row.Row{row.Str(p), row.Null(), row.Str(s)}
	if x != nil {
		r[1] = row.Int(int64(x.(int)))
	}
	return r
}

// topRecord is the record of row (p, x, s) at ts keyed by its partition:
// of an append-only input when kind is nil, else a changelog's.
func topRecord(kind *row.Kind, ts int64, p string, x any, s string) sdk.Record {
	r := rowRecord(topIn, topRow(p, x, s), []int{0}, ts)
	if kind != nil {
		r.Value = append([]byte{byte(*kind)}, r.Value...)
	}
	return r
}

func topKind(k row.Kind) *row.Kind { return &k }

// changes are changelog records of rows of schema s as "ts: kind CSV"
// lines, in order.
func topNChanges(t testing.TB, s plan.Schema, recs []sdk.Record) []string {
	t.Helper()
	c := row.NewCodec(s)
	var out []string
	for _, r := range recs {
		k, b, err := row.SplitKind(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Decode(b, nil)
		if err != nil {
			t.Fatalf("decode %x: %v", b, err)
		}
		out = append(out, fmt.Sprintf("%d: %s %s", r.Timestamp, k, row.AppendCSV(nil, s, d)))
	}
	return out
}

// topScript is the steps of a test: rows of append-only input (kind nil)
// or of a changelog, at timestamps 1, 2, …
type topStep struct {
	kind row.Kind
	p    string
	x    any
	s    string
}

func topEvents(changelog bool, steps []topStep) []event {
	var events []event
	for i, st := range steps {
		var k *row.Kind
		if changelog {
			k = topKind(st.kind)
		}
		events = append(events, rec(topRecord(k, int64(i+1), st.p, st.x, st.s)))
	}
	return events
}

func checkTopNChanges(t *testing.T, name string, p *plan.TopN, events []event, want []string) {
	t.Helper()
	got := topNChanges(t, p.Out, run(t, newTopN, config(t, &plan.Operator{TopN: p}), events, -1))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: changes\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestTopNAppendOnly keeps the top 3 rows of each partition of an
// append-only input, with ties (ranked in arrival order) and NULLs.
func TestTopNAppendOnly(t *testing.T) {
	steps := []topStep{
		{p: "a", x: 5, s: "r1"},
		{p: "a", x: 3, s: "r2"},
		{p: "a", x: nil, s: "r3"},
		{p: "a", x: 3, s: "r4"},
		{p: "b", x: 7, s: "s1"},
		{p: "a", x: nil, s: "r5"},
		{p: "a", x: 5, s: "r6"},
		{p: "a", x: 1, s: "r7"},
		{p: "b", x: nil, s: "s2"},
	}
	events := topEvents(false, steps)
	checkTopNChanges(t, "x ASC", topPlan(3, false, false, topAsc(1)), events, []string{
		"1: +I a,5,r1",
		"2: +I a,3,r2",
		"3: +I a,,r3",
		"4: +I a,3,r4", "4: -D a,,r3",
		"5: +I b,7,s1",
		"8: +I a,1,r7", "8: -D a,5,r1",
		"9: +I b,,s2",
	})
	checkTopNChanges(t, "x ASC, ranked", topPlan(3, true, false, topAsc(1)), events, []string{
		"1: +I a,5,r1,1",
		"2: -U a,5,r1,1", "2: +U a,3,r2,1", "2: +I a,5,r1,2",
		"3: +I a,,r3,3",
		"4: -U a,5,r1,2", "4: +U a,3,r4,2", "4: -U a,,r3,3", "4: +U a,5,r1,3",
		"5: +I b,7,s1,1",
		"8: -U a,3,r2,1", "8: +U a,1,r7,1", "8: -U a,3,r4,2", "8: +U a,3,r2,2", "8: -U a,5,r1,3", "8: +U a,3,r4,3",
		"9: +I b,,s2,2",
	})
	checkTopNChanges(t, "x DESC NULLS FIRST, s", topPlan(3, false, false, plan.SortKey{Col: 1, Desc: true, NullsFirst: true}, topAsc(2)), events, []string{
		"1: +I a,5,r1",
		"2: +I a,3,r2",
		"3: +I a,,r3",
		"5: +I b,7,s1",
		"6: +I a,,r5", "6: -D a,3,r2",
		"9: +I b,,s2",
	})
}

// TestTopNDeduplicate keeps the last row (ORDER BY ts DESC) and the
// first (ts ASC) of each partition: one row replacing another is -U, +U.
func TestTopNDeduplicate(t *testing.T) {
	events := topEvents(false, []topStep{
		{p: "a", x: 10, s: "r1"},
		{p: "a", x: 20, s: "r2"},
		{p: "a", x: 15, s: "r3"},
		{p: "a", x: 20, s: "r4"},
		{p: "b", x: 5, s: "s1"},
		{p: "a", x: 30, s: "r5"},
		{p: "a", x: nil, s: "r6"},
		{p: "a", x: 5, s: "r7"},
	})
	checkTopNChanges(t, "keep last", topPlan(1, false, false, topDesc(1)), events, []string{
		"1: +I a,10,r1",
		"2: -U a,10,r1", "2: +U a,20,r2",
		"5: +I b,5,s1",
		"6: -U a,20,r2", "6: +U a,30,r5",
	})
	checkTopNChanges(t, "keep first", topPlan(1, false, false, topAsc(1)), events, []string{
		"1: +I a,10,r1",
		"5: +I b,5,s1",
		"8: -U a,10,r1", "8: +U a,5,r7",
	})
	checkTopNChanges(t, "keep last, ranked", topPlan(1, true, false, topDesc(1)), events, []string{
		"1: +I a,10,r1,1",
		"2: -U a,10,r1,1", "2: +U a,20,r2,1",
		"5: +I b,5,s1,1",
		"6: -U a,20,r2,1", "6: +U a,30,r5,1",
	})
}

// TestTopNChangelog retracts rows of a changelog input: a row leaving
// the top brings the next one in, a row below the top or never stored
// changes nothing.
func TestTopNChangelog(t *testing.T) {
	ins, ub, ua, del := row.Insert, row.UpdateBefore, row.UpdateAfter, row.Delete
	events := topEvents(true, []topStep{
		{ins, "a", 1, "r1"},
		{ins, "a", 2, "r2"},
		{ins, "a", 3, "r3"},
		{ins, "a", 4, "r4"},
		{del, "a", 1, "r1"},
		{ub, "a", 2, "r2"},
		{ua, "a", 0, "r5"},
		{del, "a", 9, "r9"},
		{del, "a", 4, "r4"},
		{del, "a", 3, "r3"},
		{del, "a", 0, "r5"},
		{ins, "a", 7, "r7"},
		{del, "b", 1, "z"},
	})
	checkTopNChanges(t, "top 2", topPlan(2, false, true, topAsc(1)), events, []string{
		"1: +I a,1,r1",
		"2: +I a,2,r2",
		"5: -D a,1,r1", "5: +I a,3,r3",
		"6: -D a,2,r2", "6: +I a,4,r4",
		"7: +I a,0,r5", "7: -D a,4,r4",
		"10: -D a,3,r3",
		"11: -D a,0,r5",
		"12: +I a,7,r7",
	})
	checkTopNChanges(t, "top 2, ranked", topPlan(2, true, true, topAsc(1)), events, []string{
		"1: +I a,1,r1,1",
		"2: +I a,2,r2,2",
		"5: -U a,1,r1,1", "5: +U a,2,r2,1", "5: -U a,2,r2,2", "5: +U a,3,r3,2",
		"6: -U a,2,r2,1", "6: +U a,3,r3,1", "6: -U a,3,r3,2", "6: +U a,4,r4,2",
		"7: -U a,3,r3,1", "7: +U a,0,r5,1", "7: -U a,4,r4,2", "7: +U a,3,r3,2",
		"10: -D a,3,r3,2",
		"11: -D a,0,r5,1",
		"12: +I a,7,r7,1",
	})
	// Equal rows: a retraction takes back one of them.
	events = topEvents(true, []topStep{
		{ins, "a", 2, "d"},
		{ins, "a", 2, "d"},
		{ins, "a", 3, "e"},
		{del, "a", 2, "d"},
		{del, "a", 2, "d"},
		{del, "a", 3, "e"},
	})
	checkTopNChanges(t, "deduplicated", topPlan(1, false, true, topAsc(1)), events, []string{
		"1: +I a,2,d",
		"4: -U a,2,d", "4: +U a,2,d",
		"5: -U a,2,d", "5: +U a,3,e",
		"6: -D a,3,e",
	})
}

// topReplayKeyed applies changelog records to a table by their keys, as a
// keyed sink would, strictly: an add to a key holding a row or a
// retraction of a row the key does not hold is an error.
func topReplayKeyed(t testing.TB, s plan.Schema, recs []sdk.Record) (map[string]string, error) {
	t.Helper()
	c := row.NewCodec(s)
	table := map[string]string{}
	for i, r := range recs {
		k, b, err := row.SplitKind(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Decode(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		line := string(row.AppendCSV(nil, s, d))
		key := string(r.Key)
		old, ok := table[key]
		switch {
		case k.Adds() && ok:
			return nil, fmt.Errorf("record %d: %s %s: the key holds %s", i, k, line, old)
		case k.Adds():
			table[key] = line
		case old != line:
			return nil, fmt.Errorf("record %d: %s %s: the key holds %q", i, k, line, old)
		default:
			delete(table, key)
		}
	}
	return table, nil
}

// topReplayRows applies changelog records to a multiset of rows, strictly.
func topReplayRows(t testing.TB, s plan.Schema, recs []sdk.Record) (map[string]string, error) {
	t.Helper()
	c := row.NewCodec(s)
	count := map[string]int{}
	for i, r := range recs {
		k, b, err := row.SplitKind(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Decode(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		line := string(row.AppendCSV(nil, s, d))
		if k.Adds() {
			count[line]++
			continue
		}
		if count[line] == 0 {
			return nil, fmt.Errorf("record %d: %s %s: not in the table", i, k, line)
		}
		if count[line]--; count[line] == 0 {
			delete(count, line)
		}
	}
	table := map[string]string{}
	for line, n := range count {
		table[line] = fmt.Sprint(n)
	}
	return table, nil
}

// topReference is the final table of a TopN by brute force: every
// partition's live rows in arrival order (a retraction takes back the
// first equal row), stably sorted, cut to the limit.
func topReference(p *plan.TopN, steps []topStep) map[string]string {
	live := map[string][]topStep{}
	var parts []string
	for _, st := range steps {
		if _, ok := live[st.p]; !ok {
			parts = append(parts, st.p)
		}
		l := live[st.p]
		if st.kind.Adds() {
			live[st.p] = append(l, st)
			continue
		}
		if i := slices.IndexFunc(l, func(o topStep) bool { return o.p == st.p && o.x == st.x && o.s == st.s }); i >= 0 {
			live[st.p] = slices.Delete(l, i, i+1)
		}
	}
	out := row.NewCodec(p.Out)
	table := map[string]string{}
	count := map[string]int{}
	for _, part := range parts {
		rows := live[part]
		slices.SortStableFunc(rows, func(a, b topStep) int {
			for _, k := range p.Order {
				var c int
				va, vb := topRow(a.p, a.x, a.s)[k.Col], topRow(b.p, b.x, b.s)[k.Col]
				switch {
				case va.IsNull() && vb.IsNull():
				case va.IsNull() || vb.IsNull():
					if c = 1; va.IsNull() == k.NullsFirst {
						c = -1
					}
				default:
					if c = stdcmp.Compare(va.Int(), vb.Int()); k.Col == 2 {
						c = strings.Compare(va.Str(), vb.Str())
					}
					if k.Desc {
						c = -c
					}
				}
				if c != 0 {
					return c
				}
			}
			return 0
		})
		for i, st := range rows[:min(len(rows), int(p.Limit))] {
			r := topRow(st.p, st.x, st.s)
			if p.Rank {
				r = append(r, row.Int(int64(i+1)))
			}
			line := string(row.AppendCSV(nil, p.Out, r))
			if p.Rank {
				table[string(out.AppendKey(nil, r, p.Enc.Key))] = line
			} else {
				count[line]++
			}
		}
	}
	for line, n := range count {
		table[line] = fmt.Sprint(n)
	}
	return table
}

// topRandomSteps is a stream over 8 partitions: numbers 0…9 (ties) or NULL;
// for a changelog, a third of the steps retract a live row (-D, or -U
// and then +U of a new one), and a few retract one never added.
func topRandomSteps(rng *rand.Rand, n int, changelog bool) []topStep {
	var steps []topStep
	live := map[string][]topStep{}
	for i := 0; len(steps) < n; i++ {
		p := fmt.Sprintf("k%d", rng.IntN(8))
		var x any
		if rng.IntN(10) > 0 {
			x = rng.IntN(10)
		}
		st := topStep{kind: row.Insert, p: p, x: x, s: fmt.Sprintf("r%d", i)}
		if changelog && rng.IntN(3) == 0 && len(live[p]) > 0 {
			l := live[p]
			j := rng.IntN(len(l))
			old := l[j]
			live[p] = slices.Delete(l, j, j+1)
			if rng.IntN(2) == 0 {
				old.kind = row.Delete
				steps = append(steps, old)
			} else {
				old.kind = row.UpdateBefore
				st.kind = row.UpdateAfter
				steps = append(steps, old, st)
				live[p] = append(live[p], st)
			}
			continue
		}
		if changelog && rng.IntN(20) == 0 {
			steps = append(steps, topStep{kind: row.Delete, p: p, x: 99, s: "never"})
			continue
		}
		steps = append(steps, st)
		live[p] = append(live[p], st)
	}
	return steps
}

// TestTopNRestore runs random streams with a checkpoint restored at
// parallelism 3 at several points: the table the changelog makes is the
// brute-force one each time. And the comparison sees a lost or doubled
// change: the changelog with any one record dropped or duplicated does
// not replay to that table.
func TestTopNRestore(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *plan.TopN
	}{
		{"append-only ranked", topPlan(3, true, false, topDesc(1))},
		{"append-only", topPlan(3, false, false, plan.SortKey{Col: 1, NullsFirst: true})},
		{"changelog ranked", topPlan(3, true, true, topAsc(1))},
		{"changelog", topPlan(2, false, true, topDesc(1), topAsc(2))},
		{"changelog deduplicated", topPlan(1, false, true, topDesc(1))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := topRandomSteps(rand.New(rand.NewPCG(1, uint64(len(tc.name)))), 120, tc.p.InChangelog)
			events := topEvents(tc.p.InChangelog, steps)
			cfg := config(t, &plan.Operator{TopN: tc.p})
			replay := topReplayRows
			if tc.p.Rank {
				replay = topReplayKeyed
			}
			want := topReference(tc.p, steps)
			var first []sdk.Record
			for _, restoreAfter := range []int{-1, 0, 17, 60, 101, len(events) - 1} {
				out := run(t, newTopN, cfg, events, restoreAfter)
				if first == nil {
					first = out
				}
				got, err := replay(t, tc.p.Out, out)
				if err != nil {
					t.Fatalf("restored after %d: %v", restoreAfter, err)
				}
				if !maps.Equal(got, want) {
					t.Fatalf("restored after %d: table\n%s\nwant\n%s", restoreAfter, topTableLines(got), topTableLines(want))
				}
			}
			for i := range first {
				dropped := slices.Delete(slices.Clone(first), i, i+1)
				if got, err := replay(t, tc.p.Out, dropped); err == nil && maps.Equal(got, want) {
					t.Errorf("the changelog without record %d of %d replays to the same table", i, len(first))
				}
				doubled := slices.Insert(slices.Clone(first), i, first[i])
				if got, err := replay(t, tc.p.Out, doubled); err == nil && maps.Equal(got, want) {
					t.Errorf("the changelog with record %d of %d twice replays to the same table", i, len(first))
				}
			}
		})
	}
}

func topTableLines(m map[string]string) string {
	var lines []string
	for k, v := range m {
		lines = append(lines, fmt.Sprintf("%x: %s", k, v))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestTopNTTL drops a partition no row touched for the TTL, silently,
// with one cleanup timer per partition at most.
func TestTopNTTL(t *testing.T) {
	for _, changelog := range []bool{false, true} {
		t.Run(fmt.Sprint("changelog=", changelog), func(t *testing.T) {
			p := topPlan(1, false, changelog, topAsc(1))
			p.TTL = 100
			s := newSubtask(t, &TopN{}, config(t, &plan.Operator{TopN: p}), 0, 1, nil)
			var kind *row.Kind
			if changelog {
				kind = topKind(row.Insert)
			}
			ts := int64(0)
			send := func(part string, x int) {
				ts++
				s.record(-1, topRecord(kind, ts, part, x, fmt.Sprint("r", ts)))
			}
			// has reports whether partition part holds state.
			has := func(part string) bool {
				s.ctx.Heap.SetCurrentKey(row.NewCodec(topIn).AppendKey(nil, topRow(part, nil, ""), []int{0}))
				if changelog {
					_, ok := s.ctx.Heap.ValueState("meta").Value()
					if empty := s.ctx.Heap.MapState("rows").IsEmpty(); empty == ok {
						t.Fatalf("partition %s: meta %v, rows %v", part, ok, !empty)
					}
					return ok
				}
				_, ok := s.ctx.Heap.ValueState("top").Value()
				return ok
			}
			check := func(at string, a, b bool, timers int) {
				t.Helper()
				if has("a") != a || has("b") != b {
					t.Errorf("%s: partitions a and b hold state: %v, %v; want %v, %v", at, has("a"), has("b"), a, b)
				}
				if n := s.timers.svc.Len(); n != timers {
					t.Errorf("%s: %d timers pending, want %d", at, n, timers)
				}
			}
			send("a", 1)
			send("b", 1)
			check("first rows", true, true, 2)
			s.clock(50)
			send("b", 9) // not in b's top, but touches b
			send("b", 8)
			check("b touched", true, true, 2)
			s.clock(100)
			check("a expired", false, true, 1)
			send("a", 5) // a afresh
			send("b", 5) // b still has 1
			s.clock(150)
			check("b's timer moved on", true, true, 2)
			s.clock(200)
			check("both expired", false, false, 0)
			send("b", 7)
			got := topNChanges(t, p.Out, s.take())
			want := []string{"1: +I a,1,r1", "2: +I b,1,r2", "5: +I a,5,r5", "7: +I b,7,r7"}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("changes\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestTopNCorruptState fails on state it cannot read, and on a plan it
// cannot run.
func TestTopNCorruptState(t *testing.T) {
	for _, changelog := range []bool{false, true} {
		p := topPlan(3, true, changelog, topAsc(1))
		s := newSubtask(t, &TopN{}, config(t, &plan.Operator{TopN: p}), 0, 1, nil)
		var kind *row.Kind
		if changelog {
			kind = topKind(row.Insert)
		}
		r := topRecord(kind, 1, "a", 1, "r1")
		s.ctx.Heap.SetCurrentKey(r.Key)
		if changelog {
			s.ctx.Heap.ValueState("meta").Update([]byte{topNFormat, 0, 0, 1})
			// A row of a NULL x (after 1, which moves it down).
			s.ctx.Heap.MapState("rows").Put([]byte{2, 0, 0, 0, 0, 0, 0, 0, 0}, []byte{0xff, 1})
		} else {
			s.ctx.Heap.ValueState("top").Update([]byte{topNFormat, 0, 0, 1, 1, 9, 0xff})
		}
		if err := s.process(-1, r); err == nil || !strings.Contains(err.Error(), "sql-top-n: partition") || !strings.Contains(err.Error(), "corrupt state") {
			t.Errorf("changelog=%v: processing over corrupt state: %v", changelog, err)
		}
		s.ctx.Heap.ValueState("top").Update([]byte{7})
		s.ctx.Heap.ValueState("meta").Update([]byte{7})
		if err := s.process(-1, r); err == nil || !strings.Contains(err.Error(), "corrupt state") {
			t.Errorf("changelog=%v: processing over a state of another format: %v", changelog, err)
		}
	}
	for _, bad := range []func(p *plan.TopN){
		func(p *plan.TopN) { p.Limit = 0 },
		func(p *plan.TopN) { p.Order = []plan.SortKey{{Col: 3}} },
		func(p *plan.TopN) { p.Out = p.Out[:3] },
		func(p *plan.TopN) { p.Out[3].Type = tInt },
		func(p *plan.TopN) { p.Enc.Changelog = false },
		func(p *plan.TopN) { p.TTL = -1 },
	} {
		p := topPlan(3, true, false, topAsc(1))
		bad(p)
		err := (&TopN{}).Open(newSubtaskContext(config(t, &plan.Operator{TopN: p})))
		if err == nil || !strings.HasPrefix(err.Error(), "sql-top-n: ") {
			t.Errorf("open %+v: %v", p, err)
		}
	}
	if err := (&TopN{}).Open(newSubtaskContext(config(t, &plan.Operator{Blackhole: &plan.Blackhole{}}))); err == nil {
		t.Error("open without a TopN plan: no error")
	}
}

// TestTopNSortKey checks the sort key's byte order against SQL's, for
// every kind of value, ascending and descending, NULLs first and last,
// over two ORDER BY items (the first's encoding must end where it ends).
func TestTopNSortKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	kinds := []plan.Type{tBool, tInt, tBigint, tDouble, {Kind: plan.Float32}, tVarchar, tNumeric(2), tTime, {Kind: plan.Date}, {Kind: plan.Interval}}
	floats := []float64{math.Inf(-1), -1e300, -1.5, -1e-300, math.Copysign(0, -1), 0, 1e-300, 2.5, 1e300, math.Inf(1), math.NaN()}
	strs := []string{"", "\x00", "\x00\x00", "\x00\x01", "\x01", "a", "a\x00", "a\x00b", "a\x01", "ab", "b", "\xff", "\xff\x00"}
	ints := []int64{math.MinInt64, -1 << 40, -2, -1, 0, 1, 2, 1 << 40, math.MaxInt64}
	value := func(k plan.Kind) row.Value {
		if rng.IntN(8) == 0 {
			return row.Null()
		}
		switch k {
		case plan.Bool:
			return row.Bool(rng.IntN(2) == 0)
		case plan.Float32, plan.Float64:
			return row.Float(floats[rng.IntN(len(floats))])
		case plan.Varchar:
			return row.Str(strs[rng.IntN(len(strs))])
		}
		return row.Int(ints[rng.IntN(len(ints))])
	}
	compare := func(k plan.Kind, a, b row.Value) int {
		switch k {
		case plan.Float32, plan.Float64:
			x, y := a.Float(), b.Float()
			switch {
			case x != x || y != y:
				return compareBool(x != x, y != y)
			}
			return stdcmp.Compare(x, y)
		case plan.Varchar:
			return strings.Compare(a.Str(), b.Str())
		case plan.Bool:
			return compareBool(a.Bool(), b.Bool())
		}
		return stdcmp.Compare(a.Int(), b.Int())
	}
	for _, k1 := range kinds {
		for _, k2 := range []plan.Type{tVarchar, tBigint} {
			for m := range 8 {
				keys := []plan.SortKey{{Col: 0, Desc: m&1 != 0, NullsFirst: m&2 != 0}, {Col: 1, Desc: m&4 != 0}}
				in := schema("a", k1, "b", k2)
				p := &plan.TopN{In: in, Order: keys, Limit: 1, Out: in, Enc: plan.Encoding{Format: plan.FormatRow, Changelog: true}}
				op := &TopN{}
				if err := op.open(p); err != nil {
					t.Fatal(err)
				}
				for range 300 {
					a := row.Row{value(k1.Kind), value(k2.Kind)}
					b := row.Row{value(k1.Kind), value(k2.Kind)}
					want := 0
					for _, k := range keys {
						kind := in[k.Col].Type.Kind
						x, y := a[k.Col], b[k.Col]
						var c int
						switch {
						case x.IsNull() && y.IsNull():
						case x.IsNull() != y.IsNull():
							if c = 1; x.IsNull() == k.NullsFirst {
								c = -1
							}
						default:
							if c = compare(kind, x, y); k.Desc {
								c = -c
							}
						}
						if c != 0 && want == 0 {
							want = c
						}
					}
					got := bytes.Compare(op.appendSortKey(nil, a), op.appendSortKey(nil, b))
					if got != want {
						t.Fatalf("%s, %s, %+v: %v vs %v: keys compare %d, want %d", k1, k2, keys, a, b, got, want)
					}
				}
			}
		}
	}
}

// BenchmarkTopN is Nexmark q19's TopN: the 10 highest bids of each
// auction, ranked, 1000 auctions open at a time and each closed after 64
// bids at random prices (a bid enters the top 10 of its auction, and
// renumbers the rows below it, ever more rarely).
func BenchmarkTopN(b *testing.B) {
	in := schema("auction", tBigint, "bidder", tBigint, "price", tBigint, "channel", tVarchar, "date_time", tTime)
	p := &plan.TopN{In: in, Partition: []int{0}, Order: []plan.SortKey{topDesc(2)}, Limit: 10, Rank: true,
		Out: append(slices.Clone(in), plan.Column{Name: "rank_number", Type: tBigint}),
		Enc: plan.Encoding{Format: plan.FormatRow, Changelog: true, Key: []int{0}}}
	s := newSubtask(b, &TopN{}, config(b, &plan.Operator{TopN: p}), 0, 1, nil)
	const auctions, bids = 1000, 64
	rng := rand.New(rand.NewPCG(5, 6))
	recs := make([]sdk.Record, auctions*bids)
	for i := range recs {
		r := row.Row{row.Int(int64(i % auctions)), row.Int(rng.Int64N(10000)), row.Int(rng.Int64N(1e6)), row.Str("channel-1"), row.Int(int64(i) * 1000)}
		recs[i] = rowRecord(in, r, []int{0}, int64(i))
	}
	keys := make([][]byte, auctions)
	d := &discard{}
	s.ctx.Heap.SetCurrentKey(nil)
	op := s.op.(*TopN)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		j := i % len(recs)
		if j == 0 {
			// The next 1000 auctions.
			for a := range keys {
				keys[a] = binary.BigEndian.AppendUint64(keys[a][:0], uint64(i/len(recs)*auctions+a))
			}
		}
		r := recs[j]
		r.Key = keys[j%auctions]
		s.ctx.Heap.SetCurrentKey(r.Key)
		if err := op.ProcessRecord(r, d); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(d.n)/float64(b.N), "changes/op")
}

package ops

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

func newOverAgg() sdk.Operator { return &OverAggregate{} }

// overPlan aggregates topIn's x over the frame lo … hi of each
// partition p ordered by x: sum, count(*), min, max and avg.
func overPlan(lo, hi int64, changelog bool) *plan.OverAgg {
	aggs := []plan.AggCall{
		{Fn: plan.Sum, Arg: 1, Filter: -1, Type: tNumeric(0)},
		{Fn: plan.Count, Arg: -1, Filter: -1, Type: tBigint},
		{Fn: plan.Min, Arg: 1, Filter: -1, Type: tBigint},
		{Fn: plan.Max, Arg: 1, Filter: -1, Type: tBigint},
		{Fn: plan.Avg, Arg: 1, Filter: -1, Type: tNumeric(0)},
	}
	out := slices.Clone(topIn)
	for _, a := range aggs {
		out = append(out, plan.Column{Name: string(a.Fn), Type: a.Type})
	}
	return &plan.OverAgg{In: topIn, InChangelog: changelog, Partition: []int{0}, Order: []plan.SortKey{topAsc(1)}, Lo: lo, Hi: hi,
		Aggs: aggs, Out: out, Enc: plan.Encoding{Format: plan.FormatRow, Changelog: true}}
}

func checkOverChanges(t *testing.T, name string, p *plan.OverAgg, events []event, want []string) {
	t.Helper()
	got := topNChanges(t, p.Out, run(t, newOverAgg, config(t, &plan.Operator{OverAgg: p}), events, -1))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: changes\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestOverAggFrame adds rows in and out of order and takes some back:
// each change updates the rows whose frames (1 PRECEDING AND CURRENT
// ROW) it enters or leaves. Rows of equal x are ordered by their values.
func TestOverAggFrame(t *testing.T) {
	ins, del := row.Insert, row.Delete
	events := topEvents(true, []topStep{
		{ins, "a", 10, "r1"},
		{ins, "a", 30, "r3"},
		{ins, "a", 20, "r2"},
		{ins, "b", 5, "s1"},
		{ins, "a", 20, "r0"}, // ties with r2, ordered before it by s
		{del, "a", 10, "r1"},
		{del, "a", 99, "r9"}, // never stored: nothing
		{ins, "a", nil, "rn"},
		{del, "b", 5, "s1"},
	})
	checkOverChanges(t, "1 PRECEDING", overPlan(-1, 0, true), events, []string{
		"1: +I a,10,r1,10,1,10,10,10",
		"2: +I a,30,r3,40,2,10,30,20",
		"3: +I a,20,r2,30,2,10,20,15",
		"3: -U a,30,r3,40,2,10,30,20", "3: +U a,30,r3,50,2,20,30,25",
		"4: +I b,5,s1,5,1,5,5,5",
		"5: +I a,20,r0,30,2,10,20,15",
		"5: -U a,20,r2,30,2,10,20,15", "5: +U a,20,r2,40,2,20,20,20",
		"6: -D a,10,r1,10,1,10,10,10",
		"6: -U a,20,r0,30,2,10,20,15", "6: +U a,20,r0,20,1,20,20,20",
		// NULLs come last, and count(*) counts them, the rest does not.
		"8: +I a,,rn,30,2,30,30,30",
		"9: -D b,5,s1,5,1,5,5,5",
	})
	checkOverChanges(t, "1 FOLLOWING AND 2 FOLLOWING, append-only", overPlan(1, 2, false), topEvents(false, []topStep{
		{p: "a", x: 1, s: "r1"},
		{p: "a", x: 3, s: "r3"},
		{p: "a", x: 2, s: "r2"},
	}), []string{
		"1: +I a,1,r1,,0,,,",
		"2: +I a,3,r3,,0,,,",
		"2: -U a,1,r1,,0,,,", "2: +U a,1,r1,3,1,3,3,3",
		"3: +I a,2,r2,3,1,3,3,3",
		"3: -U a,1,r1,3,1,3,3,3", "3: +U a,1,r1,5,2,2,3,3",
	})
}

// TestOverAggMatchesRecomputation drives random changelogs, with copies
// of rows, retractions of rows never stored and a restore at parallelism
// 3 midway, through frames of every shape: replaying the changes must
// leave, row for row, what computing each frame from scratch over the
// rows left gives, and never take back a row it does not have.
func TestOverAggMatchesRecomputation(t *testing.T) {
	frames := [][2]int64{{-10, 0}, {-2, 1}, {0, 0}, {1, 3}, {-3, -1}, {0, 4}}
	for seed := range uint64(36) {
		fr := frames[seed%uint64(len(frames))]
		rng := rand.New(rand.NewPCG(seed, 7))
		var steps []topStep
		type key struct {
			p, s string
			x    any
		}
		var live []key
		for range 300 {
			if len(live) > 0 && rng.IntN(3) == 0 {
				i := rng.IntN(len(live))
				k := live[i]
				live = slices.Delete(live, i, i+1)
				steps = append(steps, topStep{row.Delete, k.p, k.x, k.s})
				continue
			}
			if rng.IntN(20) == 0 {
				steps = append(steps, topStep{row.Delete, "a", 1000, "ghost"})
				continue
			}
			var x any = rng.IntN(12)
			if rng.IntN(10) == 0 {
				x = nil
			}
			k := key{p: []string{"a", "b", "c"}[rng.IntN(3)], x: x, s: fmt.Sprintf("s%d", rng.IntN(4))}
			live = append(live, k)
			kind := row.Insert
			if rng.IntN(2) == 0 {
				kind = row.UpdateAfter
			}
			steps = append(steps, topStep{kind, k.p, k.x, k.s})
		}
		p := overPlan(fr[0], fr[1], true)
		cfg := config(t, &plan.Operator{OverAgg: p})
		// Odd seeds read the state with one ordered pass from the start,
		// as over a map state that cannot seek.
		newOp := newOverAgg
		if seed%2 == 1 {
			newOp = func() sdk.Operator { return &overAggAllOnly{} }
		}
		recs := run(t, newOp, cfg, topEvents(true, steps), len(steps)/2)
		got := replayMultiset(t, topNChanges(t, p.Out, recs))

		// From scratch: every live row, per partition, in order.
		var o OverAggregate
		if err := o.open(p); err != nil {
			t.Fatal(err)
		}
		byPart := map[string][]row.Row{}
		for _, k := range live {
			byPart[k.p] = append(byPart[k.p], topRow(k.p, k.x, k.s))
		}
		want := map[string]int{}
		for _, rows := range byPart {
			sort.Slice(rows, func(i, j int) bool {
				return string(appendRowSortKey(nil, o.keys, rows[i])) < string(appendRowSortKey(nil, o.keys, rows[j]))
			})
			o.dec = rows
			seq := make([]int, len(rows))
			for i := range seq {
				seq[i] = i
			}
			for i, r := range rows {
				res, err := o.frame(nil, seq, i)
				if err != nil {
					t.Fatal(err)
				}
				want[string(row.AppendCSV(nil, p.Out, append(slices.Clone(r), res...)))]++
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("seed %d, frame %v: replayed\n%v\nwant\n%v", seed, fr, got, want)
		}
	}
}

// replayMultiset applies changes ("ts: kind CSV") to a multiset of rows,
// failing on a row taken back that is not there.
func replayMultiset(t *testing.T, changes []string) map[string]int {
	t.Helper()
	m := map[string]int{}
	for _, c := range changes {
		_, rest, _ := strings.Cut(c, ": ")
		kind, r, _ := strings.Cut(rest, " ")
		switch kind {
		case "+I", "+U":
			m[r]++
		case "-U", "-D":
			if m[r] == 0 {
				t.Fatalf("%s takes back a row not there", c)
			}
			if m[r]--; m[r] == 0 {
				delete(m, r)
			}
		}
	}
	return m
}

// TestOverAggTTL drops a partition idle for the TTL: a row after that
// starts it anew, and a retraction of a dropped row changes nothing.
func TestOverAggTTL(t *testing.T) {
	ins, del := row.Insert, row.Delete
	p := overPlan(-1, 0, true)
	p.TTL = 100
	events := []event{
		clock(1000),
		rec(topRecord(topKind(ins), 1, "a", 1, "r1")),
		clock(1050),
		rec(topRecord(topKind(ins), 2, "a", 2, "r2")),
		clock(1140), // 90 ms after the last access: kept
		rec(topRecord(topKind(ins), 3, "b", 7, "s1")),
		clock(1151), // 101 ms: a goes
		rec(topRecord(topKind(del), 4, "a", 1, "r1")),
		rec(topRecord(topKind(ins), 5, "a", 3, "r3")),
	}
	checkOverChanges(t, "TTL", p, events, []string{
		"1: +I a,1,r1,1,1,1,1,1",
		"2: +I a,2,r2,3,2,1,2,2",
		"3: +I b,7,s1,7,1,7,7,7",
		"5: +I a,3,r3,3,1,3,3,3",
	})
}

// TestOverAggBadPlan refuses plans it cannot run, saying why.
func TestOverAggBadPlan(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(p *plan.OverAgg)
		want string
	}{
		"frame":        {func(p *plan.OverAgg) { p.Lo, p.Hi = 2, 1 }, "frame 2 … 1"},
		"huge frame":   {func(p *plan.OverAgg) { p.Lo = -maxOverFrame }, "at most"},
		"no aggregate": {func(p *plan.OverAgg) { p.Aggs = nil; p.Out = p.Out[:3] }, "no aggregates"},
		"out":          {func(p *plan.OverAgg) { p.Out = p.Out[:4] }, "want 8"},
		"distinct": {func(p *plan.OverAgg) {
			p.Aggs[1] = plan.AggCall{Fn: plan.CountDistinct, Arg: 1, Filter: -1, Type: tBigint}
		}, "count(DISTINCT)"},
		"append-only": {func(p *plan.OverAgg) { p.Enc.Changelog = false }, "append-only output"},
		"order":       {func(p *plan.OverAgg) { p.Order[0].Col = 9 }, "ORDER BY column 9"},
	} {
		p := overPlan(-1, 0, true)
		c.edit(p)
		err := (&OverAggregate{}).open(p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// overAggAllOnly is an OverAggregate whose map state cannot seek.
type overAggAllOnly struct{ OverAggregate }

func (o *overAggAllOnly) Open(ctx sdk.Context) error {
	if err := o.OverAggregate.Open(ctx); err != nil {
		return err
	}
	o.rows = struct{ sdk.MapState }{o.rows}
	return nil
}

package ops

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/operators"
	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

// rjOut is the output of rjPlan's joins: both rows whole.
var rjOut = schema("lk", tBigint, "lv", tVarchar, "rk", tBigint, "rv", tBigint)

// rjPlan is a regular join of joinLeft and joinRight on k where rv > 10
// (filter false: on k alone), emitting both rows as a changelog.
func rjPlan(typ plan.JoinType, leftChangelog, rightChangelog, filter bool, ttl int64) *plan.Join {
	j := &plan.Join{Kind: plan.RegularJoin, Type: typ, Left: joinLeft, Right: joinRight,
		LeftChangelog: leftChangelog, RightChangelog: rightChangelog, TTL: ttl,
		Project: []plan.Expr{col(0, tBigint), col(1, tVarchar), col(2, tBigint), col(3, tBigint)},
		Out:     rjOut,
		Enc:     plan.Encoding{Format: plan.FormatRow, Changelog: true},
	}
	if filter {
		j.Filter = cmp(">", col(3, tBigint), lit(tBigint, "10"))
	}
	return j
}

// rjLeft and rjRight are a row of the join's input, with its kind when
// the plan says the input is a changelog.
func rjLeft(p *plan.Join, kind row.Kind, k int64, v string, ts int64) event {
	rec := rowRecord(joinLeft, row.Row{row.Int(k), row.Str(v)}, []int{0}, ts)
	if p.LeftChangelog {
		rec.Value = append([]byte{byte(kind)}, rec.Value...)
	}
	return recFrom(0, rec)
}

func rjRight(p *plan.Join, kind row.Kind, k, v, ts int64) event {
	rec := rowRecord(joinRight, row.Row{row.Int(k), row.Int(v)}, []int{0}, ts)
	if p.RightChangelog {
		rec.Value = append([]byte{byte(kind)}, rec.Value...)
	}
	return recFrom(1, rec)
}

// rjChanges are the changelog records recs as "<ts>: <kind> <CSV>" lines,
// in order. The join emits +I and -D only.
func rjChanges(t testing.TB, recs []sdk.Record) []string {
	t.Helper()
	c := row.NewCodec(rjOut)
	var out []string
	for _, r := range recs {
		kind, v, err := row.SplitKind(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if kind != row.Insert && kind != row.Delete {
			t.Fatalf("a join emitted %s", kind)
		}
		d, err := c.Decode(v, nil)
		if err != nil {
			t.Fatalf("decode %x: %v", v, err)
		}
		out = append(out, fmt.Sprintf("%d: %s %s", r.Timestamp, kind, row.AppendCSV(nil, rjOut, d)))
	}
	return out
}

// rjReplay applies a retract stream without a unique key to a multiset
// of rows (CSV → copies): a -D must take back a row the multiset holds.
func rjReplay(recs []sdk.Record) (map[string]int, error) {
	c := row.NewCodec(rjOut)
	set := map[string]int{}
	for i, r := range recs {
		kind, v, err := row.SplitKind(r.Value)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		d, err := c.Decode(v, nil)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		line := string(row.AppendCSV(nil, rjOut, d))
		if kind.Adds() {
			set[line]++
			continue
		}
		if set[line] == 0 {
			return nil, fmt.Errorf("record %d: %s %s, which the result does not hold", i, kind, line)
		}
		if set[line]--; set[line] == 0 {
			delete(set, line)
		}
	}
	return set, nil
}

func rjCheck(t *testing.T, name string, got, want []string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: changelog\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRegularJoinChangelogs runs inner and outer joins of retract
// streams row by row: the exact changelog each row makes.
func TestRegularJoinChangelogs(t *testing.T) {
	const (
		I = row.Insert
		B = row.UpdateBefore
		A = row.UpdateAfter
		D = row.Delete
	)
	type step struct {
		ev   event
		want []string // the changes it makes, "<kind> <CSV>"
	}
	for _, tc := range []struct {
		name  string
		p     *plan.Join
		steps func(p *plan.Join) []step
	}{
		{"inner", rjPlan(plan.InnerJoin, true, true, true, 0), func(p *plan.Join) []step {
			return []step{
				{rjLeft(p, I, 1, "a", 1), nil},
				{rjRight(p, I, 1, 20, 2), []string{"+I 1,a,1,20"}},
				{rjRight(p, I, 1, 5, 3), nil}, // rv > 10 fails
				{rjLeft(p, I, 1, "b", 4), []string{"+I 1,b,1,20"}},
				{rjRight(p, B, 1, 20, 5), []string{"-D 1,a,1,20", "-D 1,b,1,20"}},
				{rjRight(p, A, 1, 30, 5), []string{"+I 1,a,1,30", "+I 1,b,1,30"}},
				{rjLeft(p, D, 1, "a", 6), []string{"-D 1,a,1,30"}},
				{rjLeft(p, D, 1, "zz", 7), nil}, // never added
				{rjLeft(p, A, 1, "b", 8), []string{"+I 1,b,1,30"}},
				{rjRight(p, D, 1, 30, 9), []string{"-D 1,b,1,30", "-D 1,b,1,30"}},
				{rjRight(p, D, 1, 30, 10), nil}, // gone already
				{rjRight(p, I, 2, 50, 11), nil},
				{rjLeft(p, I, 2, "c", 12), []string{"+I 2,c,2,50"}},
			}
		}},
		{"left", rjPlan(plan.LeftJoin, true, true, true, 0), func(p *plan.Join) []step {
			return []step{
				{rjLeft(p, I, 1, "a", 1), []string{"+I 1,a,,"}},
				{rjRight(p, I, 1, 5, 2), nil}, // no match: the padded row stays
				{rjRight(p, I, 1, 20, 3), []string{"-D 1,a,,", "+I 1,a,1,20"}},
				{rjRight(p, I, 1, 30, 4), []string{"+I 1,a,1,30"}},
				{rjLeft(p, I, 1, "b", 5), []string{"+I 1,b,1,20", "+I 1,b,1,30"}},
				{rjRight(p, B, 1, 20, 6), []string{"-D 1,a,1,20", "-D 1,b,1,20"}},
				{rjRight(p, D, 1, 30, 7), []string{"-D 1,a,1,30", "+I 1,a,,", "-D 1,b,1,30", "+I 1,b,,"}},
				{rjLeft(p, D, 1, "a", 8), []string{"-D 1,a,,"}},
				{rjLeft(p, A, 1, "b", 9), []string{"+I 1,b,,"}}, // b twice
				{rjRight(p, I, 1, 40, 10), []string{"-D 1,b,,", "+I 1,b,1,40", "-D 1,b,,", "+I 1,b,1,40"}},
				{rjLeft(p, D, 1, "b", 11), []string{"-D 1,b,1,40"}},
				{rjRight(p, D, 1, 40, 12), []string{"-D 1,b,1,40", "+I 1,b,,"}},
				{rjRight(p, D, 1, 5, 13), nil},
				{rjRight(p, D, 1, 5, 14), nil}, // gone already
				{rjLeft(p, I, 2, "c", 15), []string{"+I 2,c,,"}},
			}
		}},
		{"right", rjPlan(plan.RightJoin, true, false, true, 0), func(p *plan.Join) []step {
			return []step{
				{rjRight(p, I, 1, 20, 1), []string{"+I ,,1,20"}},
				{rjRight(p, I, 1, 5, 2), []string{"+I ,,1,5"}}, // the padded row is not filtered
				{rjLeft(p, I, 1, "a", 3), []string{"-D ,,1,20", "+I 1,a,1,20"}},
				{rjLeft(p, B, 1, "a", 4), []string{"-D 1,a,1,20", "+I ,,1,20"}},
				{rjLeft(p, A, 1, "b", 4), []string{"-D ,,1,20", "+I 1,b,1,20"}},
				{rjRight(p, I, 1, 20, 5), []string{"+I 1,b,1,20"}}, // (1,20) twice
				{rjLeft(p, D, 1, "b", 6), []string{"-D 1,b,1,20", "+I ,,1,20", "-D 1,b,1,20", "+I ,,1,20"}},
				{rjLeft(p, I, 2, "x", 7), nil},
				{rjLeft(p, D, 1, "b", 8), nil}, // gone already
				{rjLeft(p, I, 1, "c", 9), []string{"-D ,,1,20", "+I 1,c,1,20", "-D ,,1,20", "+I 1,c,1,20"}},
			}
		}},
		{"full", rjPlan(plan.FullJoin, true, true, true, 0), func(p *plan.Join) []step {
			return []step{
				{rjLeft(p, I, 1, "a", 1), []string{"+I 1,a,,"}},
				{rjRight(p, I, 1, 5, 2), []string{"+I ,,1,5"}},
				{rjRight(p, I, 1, 20, 3), []string{"-D 1,a,,", "+I 1,a,1,20"}},
				{rjLeft(p, I, 1, "b", 4), []string{"+I 1,b,1,20"}},
				{rjRight(p, D, 1, 20, 5), []string{"-D 1,a,1,20", "+I 1,a,,", "-D 1,b,1,20", "+I 1,b,,"}},
				{rjLeft(p, D, 1, "a", 6), []string{"-D 1,a,,"}},
				{rjRight(p, A, 1, 30, 7), []string{"-D 1,b,,", "+I 1,b,1,30"}},
				{rjRight(p, D, 1, 5, 8), []string{"-D ,,1,5"}},
				{rjLeft(p, B, 1, "b", 9), []string{"-D 1,b,1,30", "+I ,,1,30"}},
				{rjLeft(p, D, 1, "b", 9), nil}, // gone already
				{rjRight(p, D, 1, 30, 10), []string{"-D ,,1,30"}},
				{rjRight(p, D, 1, 99, 11), nil},
			}
		}},
		{"full on the keys alone", rjPlan(plan.FullJoin, false, true, false, 0), func(p *plan.Join) []step {
			return []step{
				{rjRight(p, I, 1, 5, 1), []string{"+I ,,1,5"}},
				{rjLeft(p, I, 1, "a", 2), []string{"-D ,,1,5", "+I 1,a,1,5"}},
				{rjLeft(p, I, 1, "a", 3), []string{"+I 1,a,1,5"}},
				{rjRight(p, I, 1, 6, 4), []string{"+I 1,a,1,6", "+I 1,a,1,6"}},
				{rjRight(p, D, 1, 5, 5), []string{"-D 1,a,1,5", "-D 1,a,1,5"}},
				{rjRight(p, D, 1, 6, 6), []string{"-D 1,a,1,6", "+I 1,a,,", "-D 1,a,1,6", "+I 1,a,,"}},
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := tc.steps(tc.p)
			s := newSubtask(t, &Join{}, config(t, &plan.Operator{Join: tc.p}), 0, 1, nil)
			var all []sdk.Record
			for i, st := range steps {
				s.record(st.ev.input, st.ev.rec)
				recs := s.take()
				all = append(all, recs...)
				var want []string
				for _, w := range st.want {
					want = append(want, fmt.Sprintf("%d: %s", st.ev.rec.Timestamp, w))
				}
				rjCheck(t, fmt.Sprintf("step %d", i), rjChanges(t, recs), want)
			}
			if _, err := rjReplay(all); err != nil {
				t.Errorf("replay: %v", err)
			}
		})
	}
}

// rjLive is a side's rows, as the reference join sees them: key →
// encoding-free row → copies.
type rjLive map[int64]map[string]int

// rjStream is a random run of n records of both inputs (both retract
// streams) over keys: adds, retractions of rows added, and retractions
// of rows never added; and the rows of each side it leaves.
func rjStream(p *plan.Join, rng *rand.Rand, n, keys int) ([]event, [2]rjLive) {
	live := [2]rjLive{{}, {}}
	var events []event
	for i := range n {
		side := rng.IntN(2)
		k := int64(rng.IntN(keys))
		rows := live[side][k]
		if rows == nil {
			rows = map[string]int{}
			live[side][k] = rows
		}
		var v string
		kind := row.Insert
		switch x := rng.IntN(100); {
		case x < 35 && len(rows) > 0:
			v = slices.Sorted(maps.Keys(rows))[rng.IntN(len(rows))]
			kind = row.Delete
			if rng.IntN(2) == 0 {
				kind = row.UpdateBefore
			}
			if rows[v]--; rows[v] == 0 {
				delete(rows, v)
			}
		case x < 40:
			v, kind = "99", row.Delete // never added (right values are below 30)
		default:
			if side == leftSide {
				v = string(rune('a' + rng.IntN(4)))
			} else {
				v = fmt.Sprint(rng.IntN(30))
			}
			if rng.IntN(3) == 0 {
				kind = row.UpdateAfter
			}
			if kind.Adds() {
				rows[v]++
			}
		}
		ts := int64(i)
		if side == leftSide {
			events = append(events, rjLeft(p, kind, k, v, ts))
		} else {
			var rv int64
			fmt.Sscan(v, &rv)
			events = append(events, rjRight(p, kind, k, rv, ts))
		}
	}
	return events, live
}

// rjReference is the join of the rows left (rv > 10 when filter): the
// result multiset.
func rjReference(p *plan.Join, live [2]rjLive) map[string]int {
	outerL := p.Type == plan.LeftJoin || p.Type == plan.FullJoin
	outerR := p.Type == plan.RightJoin || p.Type == plan.FullJoin
	match := func(rv string) bool {
		var x int
		fmt.Sscan(rv, &x)
		return p.Filter == nil || x > 10
	}
	set := map[string]int{}
	add := func(line string, n int) {
		if n > 0 {
			set[line] += n
		}
	}
	keys := map[int64]bool{}
	for k := range live[0] {
		keys[k] = true
	}
	for k := range live[1] {
		keys[k] = true
	}
	for k := range keys {
		ls, rs := live[0][k], live[1][k]
		matchedR := map[string]int{}
		for lv, ln := range ls {
			matched := 0
			for rv, rn := range rs {
				if match(rv) {
					add(fmt.Sprintf("%d,%s,%d,%s", k, lv, k, rv), ln*rn)
					matched += rn
					matchedR[rv] = 1
				}
			}
			if outerL && matched == 0 {
				add(fmt.Sprintf("%d,%s,,", k, lv), ln)
			}
		}
		for rv, rn := range rs {
			if outerR && (matchedR[rv] == 0 || len(ls) == 0) {
				add(fmt.Sprintf(",,%d,%s", k, rv), rn)
			}
		}
	}
	return set
}

// TestRegularJoinRestore runs random retract streams through every type
// of join, with a checkpoint restored at parallelism 3 halfway and
// without: the changelog replays (each -D taking back a row the result
// holds) to the join of the rows left, either way. Dropping or
// duplicating one record of the changelog fails the comparison.
func TestRegularJoinRestore(t *testing.T) {
	for _, typ := range []plan.JoinType{plan.InnerJoin, plan.LeftJoin, plan.RightJoin, plan.FullJoin} {
		for _, filter := range []bool{false, true} {
			name := string(typ)
			if name == "" {
				name = "inner"
			}
			if filter {
				name += " with filter"
			}
			t.Run(name, func(t *testing.T) {
				p := rjPlan(typ, true, true, filter, 0)
				cfg := config(t, &plan.Operator{Join: p})
				rng := rand.New(rand.NewPCG(uint64(len(name)), 7))
				events, live := rjStream(p, rng, 600, 12)
				want := rjReference(p, live)
				if len(want) == 0 {
					t.Fatal("the reference result is empty: a poor test")
				}
				for _, restoreAfter := range []int{-1, len(events) / 2} {
					recs := run(t, newJoin, cfg, events, restoreAfter)
					got, err := rjReplay(recs)
					if err != nil {
						t.Fatalf("restored after event %d: replay: %v", restoreAfter, err)
					}
					if !maps.Equal(got, want) {
						t.Errorf("restored after event %d: result\n%v\nwant\n%v", restoreAfter, got, want)
					}
					if restoreAfter < 0 {
						continue
					}
					// The counter-check: one record less or more is seen.
					for _, i := range []int{0, len(recs) / 3, len(recs) / 2, len(recs) - 1} {
						dropped := slices.Delete(slices.Clone(recs), i, i+1)
						duplicated := slices.Insert(slices.Clone(recs), i, recs[i])
						for what, mutated := range map[string][]sdk.Record{"dropped": dropped, "duplicated": duplicated} {
							if got, err := rjReplay(mutated); err == nil && maps.Equal(got, want) {
								t.Errorf("record %d %s: the replay still matches", i, what)
							}
						}
					}
				}
			})
		}
	}
}

// TestRegularJoinTTL: a key no row touched for the TTL loses both sides'
// rows without a change emitted (a later row of the other side finds no
// match), a touched one keeps them; and so across a restore at another
// parallelism.
func TestRegularJoinTTL(t *testing.T) {
	p := rjPlan(plan.LeftJoin, false, false, false, 100)
	cfg := config(t, &plan.Operator{Join: p})
	events := []event{
		clock(1000),
		rjLeft(p, row.Insert, 1, "a", 1), // key 1: accessed at 1000, timer at 1100
		rjLeft(p, row.Insert, 2, "b", 2),
		clock(1050),
		rjRight(p, row.Insert, 2, 20, 3), // key 2: accessed at 1050
		clock(1100),                      // key 1 goes; key 2's timer moves to 1150
		rjRight(p, row.Insert, 1, 30, 4), // no left row of key 1 now
		rjLeft(p, row.Insert, 2, "c", 5), // key 2 still there; accessed at 1100
		clock(1199),                      // key 2's timer at 1150 moves to 1200; key 1's at 1200
		rjRight(p, row.Insert, 2, 21, 6),
		clock(1250), // key 1 goes at 1200; key 2's timer moves to 1299
		rjLeft(p, row.Insert, 1, "d", 7),
		clock(1400), // both go
		rjRight(p, row.Insert, 1, 40, 8),
		rjRight(p, row.Insert, 2, 41, 9),
		rjLeft(p, row.Insert, 2, "e", 10),
	}
	want := []string{
		"1: +I 1,a,,",
		"2: +I 2,b,,",
		"3: -D 2,b,,", "3: +I 2,b,2,20",
		"5: +I 2,c,2,20",
		"6: +I 2,b,2,21", "6: +I 2,c,2,21",
		"7: +I 1,d,,",
		"10: +I 2,e,2,41",
	}
	rjCheck(t, "no restore", rjChanges(t, run(t, newJoin, cfg, events, -1)), want)
	slices.Sort(want)
	for _, restoreAfter := range []int{3, 7} {
		got := rjChanges(t, run(t, newJoin, cfg, events, restoreAfter))
		slices.Sort(got)
		rjCheck(t, fmt.Sprintf("restored after event %d", restoreAfter), got, want)
	}

	// An inner join of append-only inputs with a TTL runs here too.
	p = rjPlan(plan.InnerJoin, false, false, false, 100)
	p.Enc.Changelog = false
	cfg = config(t, &plan.Operator{Join: p})
	got := rowLinesUnkeyed(t, rjOut, run(t, newJoin, cfg, []event{
		clock(1000),
		rjLeft(p, row.Insert, 1, "a", 1),
		rjRight(p, row.Insert, 1, 20, 2),
		clock(1100),
		rjRight(p, row.Insert, 1, 30, 3),
	}, -1))
	rjCheck(t, "inner", got, []string{"2: 1,a,1,20"})
}

// rowLinesUnkeyed are append-only records as "<ts>: <CSV>" lines.
func rowLinesUnkeyed(t testing.TB, s plan.Schema, recs []sdk.Record) []string {
	t.Helper()
	c := row.NewCodec(s)
	var out []string
	for _, r := range recs {
		d, err := c.Decode(r.Value, nil)
		if err != nil {
			t.Fatalf("decode %x: %v", r.Value, err)
		}
		out = append(out, fmt.Sprintf("%d: %s", r.Timestamp, row.AppendCSV(nil, s, d)))
	}
	return out
}

// TestRegularJoinRetractedKeyLeavesNoState: a key whose rows are all
// taken back keeps no TTL state and no timer.
func TestRegularJoinRetractedKeyLeavesNoState(t *testing.T) {
	p := rjPlan(plan.FullJoin, true, true, false, 100)
	s := newSubtask(t, &Join{}, config(t, &plan.Operator{Join: p}), 0, 1, nil)
	s.timers.nowMs = 1000
	for _, e := range []event{
		rjLeft(p, row.Insert, 1, "a", 1),
		rjRight(p, row.Insert, 1, 5, 2),
		rjLeft(p, row.Delete, 1, "a", 3),
		rjRight(p, row.Delete, 1, 5, 4),
	} {
		s.record(e.input, e.rec)
	}
	rj := s.op.(*Join).op.(*regularJoin)
	if _, ok := rj.meta.Value(); ok {
		t.Error("the TTL state of a key without rows is kept")
	}
	if !rj.sides[0].IsEmpty() || !rj.sides[1].IsEmpty() {
		t.Error("rows are kept")
	}
	if n := s.timers.svc.Len(); n != 0 {
		t.Errorf("%d timers pending", n)
	}
}

// TestRegularJoinHashJoinKept: an inner join of append-only inputs
// without a TTL still runs on operators.HashJoin, whose state savepoints
// hold; the others on regularJoin.
func TestRegularJoinHashJoinKept(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *plan.Join
		hash bool
	}{
		{"inner append-only", joinPlan(plan.RegularJoin), true},
		{"inner with TTL", func() *plan.Join { j := joinPlan(plan.RegularJoin); j.TTL = 10; return j }(), false},
		{"left", rjPlan(plan.LeftJoin, false, false, true, 0), false},
		{"right", rjPlan(plan.RightJoin, false, false, true, 0), false},
		{"full", rjPlan(plan.FullJoin, false, false, true, 0), false},
		{"inner of a changelog", rjPlan(plan.InnerJoin, false, true, true, 0), false},
	} {
		j := &Join{}
		if err := j.Open(newSubtaskContext(config(t, &plan.Operator{Join: tc.p}))); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, hash := j.op.(*operators.HashJoin)
		_, regular := j.op.(*regularJoin)
		if hash != tc.hash || regular == tc.hash {
			t.Errorf("%s: runs on %T", tc.name, j.op)
		}
	}
}

func TestRegularJoinErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		j    *plan.Join
		want string
	}{
		{"unknown type", rjPlan("cross", true, true, false, 0), `unknown join type "cross"`},
		{"negative TTL", rjPlan(plan.InnerJoin, true, true, false, -1), "TTL -1ms"},
		{"outer join, append-only output", func() *plan.Join {
			j := rjPlan(plan.LeftJoin, false, false, false, 0)
			j.Enc.Changelog = false
			return j
		}(), "emits a changelog"},
	} {
		err := (&Join{}).Open(newSubtaskContext(config(t, &plan.Operator{Join: tc.j})))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "sql-join: ") {
			t.Errorf("%s: Open = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}

	p := rjPlan(plan.LeftJoin, true, true, false, 10)
	cfg := config(t, &plan.Operator{Join: p})
	fails := func(name string, setup func(s *subtask), e event, want string) {
		t.Helper()
		s := newSubtask(t, &Join{}, cfg, 0, 1, nil)
		s.ctx.Heap.SetCurrentKey(e.rec.Key)
		setup(s)
		err := s.process(e.input, e.rec)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "sql-join: ") {
			t.Errorf("%s: %v, want an error containing %q", name, err, want)
		}
	}
	none := func(*subtask) {}
	l := rjLeft(p, row.Insert, 1, "a", 1)
	badKind := l
	badKind.rec.Value = append([]byte{9}, l.rec.Value[1:]...)
	fails("bad kind", none, badKind, "valid row kind")
	badRow := l
	badRow.rec.Value = []byte{byte(row.Insert), 0xff}
	fails("bad row", none, badRow, "left row")
	fails("bad input", none, event{input: 2, rec: l.rec}, "input 2")
	rightRow := rjRight(p, row.Insert, 1, 20, 1).rec.Value[1:]
	for _, bad := range [][]byte{nil, {0}, {1, 2, 3}, {0x80}} {
		fails(fmt.Sprintf("corrupt right entry %x", bad), func(s *subtask) {
			s.ctx.MapState("regular-right").Put(rightRow, bad)
		}, l, "corrupt state")
	}
	fails("corrupt right row", func(s *subtask) {
		s.ctx.MapState("regular-right").Put([]byte{0xff}, []byte{1})
	}, l, "corrupt state")
	fails("corrupt left entry", func(s *subtask) {
		s.ctx.MapState("regular-left").Put(l.rec.Value[1:], []byte{1}) // no associations
	}, l, "corrupt state")
	fails("corrupt TTL state", func(s *subtask) {
		s.ctx.ValueState("regular-ttl").Update([]byte{7})
	}, l, "corrupt state")

	// A failing condition fails the join.
	p = rjPlan(plan.FullJoin, false, false, false, 0)
	div := plan.Call("/", tBigint, col(3, tBigint), lit(tBigint, "0"))
	p.Filter = cmp(">", div, lit(tBigint, "1"))
	s := newSubtask(t, &Join{}, config(t, &plan.Operator{Join: p}), 0, 1, nil)
	s.record(0, rjLeft(p, row.Insert, 1, "a", 1).rec)
	if err := s.process(1, rjRight(p, row.Insert, 1, 2, 1).rec); err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Errorf("a condition dividing by zero: %v", err)
	}
}

// BenchmarkRegularJoinOuter is a left outer join of two retract streams
// over 1000 keys: each key's rows come and go, four a side at most, so
// that its padded rows appear and disappear. One record per op.
func BenchmarkRegularJoinOuter(b *testing.B) {
	p := rjPlan(plan.LeftJoin, true, true, true, 0)
	s := newSubtask(b, &Join{}, config(b, &plan.Operator{Join: p}), 0, 1, nil)
	const keys = 1000
	// Per key, 8 rounds: the adds of 4 left and 4 right rows, alternating,
	// then their retractions.
	var events []event
	for round := range 16 {
		for k := range int64(keys) {
			i := int64(round % 8)
			kind := row.Insert
			if round >= 8 {
				kind = row.Delete
			}
			if round%2 == 0 {
				events = append(events, rjLeft(p, kind, k, fmt.Sprint("v", i), 0))
			} else {
				events = append(events, rjRight(p, kind, k, 5+i*3, 0))
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		e := events[i%len(events)]
		if err := s.process(e.input, e.rec); err != nil {
			b.Fatal(err)
		}
		if len(s.out) >= 1024 {
			s.out = s.out[:0]
		}
	}
}

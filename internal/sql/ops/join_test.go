package ops

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

func newJoin() sdk.Operator { return &Join{} }

var (
	joinLeft  = schema("k", tBigint, "lv", tVarchar)
	joinRight = schema("k", tBigint, "rv", tBigint)
)

// joinPlan joins joinLeft and joinRight on k where rv > 10, emitting k,
// lv, rv keyed by k.
func joinPlan(kind plan.JoinKind) *plan.Join {
	return &plan.Join{Kind: kind, Left: joinLeft, Right: joinRight,
		Filter:  cmp(">", col(3, tBigint), lit(tBigint, "10")),
		Project: []plan.Expr{col(0, tBigint), col(1, tVarchar), col(3, tBigint)},
		Out:     schema("k", tBigint, "lv", tVarchar, "rv", tBigint),
		Enc:     plan.Encoding{Format: plan.FormatRow, Key: []int{0}},
	}
}

func left(k int64, v string, ts int64) event {
	return recFrom(0, rowRecord(joinLeft, row.Row{row.Int(k), row.Str(v)}, []int{0}, ts))
}

func right(k, v, ts int64) event {
	return recFrom(1, rowRecord(joinRight, row.Row{row.Int(k), row.Int(v)}, []int{0}, ts))
}

// TestJoin runs each kind of join with a condition beyond the keys'
// equality, and again with a checkpoint restored at another parallelism
// halfway: the same pairs.
func TestJoin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		j      *plan.Join
		events []event
		want   []string
	}{
		{"interval", func() *plan.Join { j := joinPlan(plan.IntervalJoin); j.Lower, j.Upper = -5, 5; return j }(),
			[]event{left(1, "a", 10), right(1, 20, 12), right(1, 5, 13), right(1, 50, 6), wm(8), right(1, 30, 16), left(2, "b", 20), right(2, 40, 20)},
			[]string{"12: 1,a,20", "20: 2,b,40", "10: 1,a,50"}},
		{"window", func() *plan.Join { j := joinPlan(plan.WindowJoin); j.Size = 10; return j }(),
			[]event{left(1, "a", 3), right(1, 20, 7), right(1, 5, 8), wm(2), right(1, 30, 12), left(1, "c", 15), left(2, "d", 15)},
			[]string{"9: 1,a,20", "19: 1,c,30"}},
		{"regular", joinPlan(plan.RegularJoin),
			[]event{left(1, "a", 3), right(1, 20, 100), right(1, 5, 1), wm(200), left(1, "b", 50), right(2, 99, 0), left(1, "a", 3)},
			[]string{"100: 1,a,20", "100: 1,b,20", "100: 1,a,20"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(t, &plan.Operator{Join: tc.j})
			slices.Sort(tc.want)
			for _, restoreAfter := range []int{-1, 2, 4} {
				got := rowLines(t, tc.j.Out, run(t, newJoin, cfg, tc.events, restoreAfter))
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("restored after event %d: rows %q, want %q", restoreAfter, got, tc.want)
				}
			}
		})
	}
}

func TestJoinErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		j    *plan.Join
		want string
	}{
		{"interval upside down", func() *plan.Join { j := joinPlan(plan.IntervalJoin); j.Lower, j.Upper = 5, -5; return j }(), "lower bound 5ms above its upper bound -5ms"},
		{"window of no size", joinPlan(plan.WindowJoin), "window join of size 0ms"},
		{"unknown kind", joinPlan("outer"), `unknown join kind "outer"`},
		{"filter not boolean", func() *plan.Join { j := joinPlan(plan.RegularJoin); c := col(0, tBigint); j.Filter = &c; return j }(), "must be BOOLEAN"},
		{"projection of another width", func() *plan.Join { j := joinPlan(plan.RegularJoin); j.Project = j.Project[:2]; return j }(), "2 projected columns for an output of 3"},
	} {
		if err := (&Join{}).Open(newSubtaskContext(config(t, &plan.Operator{Join: tc.j}))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Open = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// A failing condition fails the join.
	j := joinPlan(plan.RegularJoin)
	div := plan.Call("/", tBigint, col(3, tBigint), lit(tBigint, "0"))
	j.Filter = cmp(">", div, lit(tBigint, "1"))
	s := newSubtask(t, &Join{}, config(t, &plan.Operator{Join: j}), 0, 1, nil)
	s.record(0, left(1, "a", 1).rec)
	if err := s.process(1, right(1, 2, 1).rec); err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Errorf("a condition dividing by zero: %v", err)
	}
}

func TestBlackhole(t *testing.T) {
	s := newSubtask(t, Blackhole{}, nil, 0, 1, nil)
	s.record(-1, sdk.Record{Key: []byte("k"), Value: []byte("v")})
	if len(s.out) != 0 {
		t.Fatalf("blackhole emitted %v", s.out)
	}
}

package expr

import (
	"slices"
	"testing"

	"github.com/weirproject/weir/internal/sql/plan"
)

func TestResolve(t *testing.T) {
	for _, c := range []struct {
		fn   string
		args []plan.Type
		want []plan.Type
		res  plan.Type
		err  string
	}{
		{fn: "+", args: []plan.Type{varchar, bigint}, err: "operator does not exist: VARCHAR + BIGINT"},
		{fn: "lower", args: []plan.Type{bigint}, err: "function lower(BIGINT) does not exist"},
		{fn: "substr", args: []plan.Type{varchar}, err: "function substr(VARCHAR) does not exist"},
		{fn: "substr", args: []plan.Type{varchar, numeric(0)}, err: "function substr(VARCHAR, NUMERIC(18,0)) does not exist"},
		{fn: "nope", args: nil, err: "function nope() does not exist"},
		{fn: "neg", args: []plan.Type{varchar}, err: "operator does not exist: - VARCHAR"},
		{fn: "+", args: []plan.Type{null, null}, err: "operator is not unique: NULL + NULL"},
		{fn: "%", args: []plan.Type{double, double}, err: "operator does not exist: DOUBLE PRECISION % DOUBLE PRECISION"},
		{fn: "mod", args: []plan.Type{double, integer}, err: "function mod(DOUBLE PRECISION, INTEGER) does not exist"},
		{fn: "=", args: []plan.Type{varchar, bigint}, err: "operator does not exist: VARCHAR = BIGINT"},
		{fn: "like", args: []plan.Type{bigint, varchar}, err: "operator does not exist: BIGINT LIKE VARCHAR"},
		{fn: "and", args: []plan.Type{integer, boolean}, err: "argument of AND must be type BOOLEAN, not type INTEGER"},
		{fn: "not", args: []plan.Type{varchar}, err: "argument of NOT must be type BOOLEAN, not type VARCHAR"},
		{fn: "is_true", args: []plan.Type{integer}, err: "argument of IS TRUE must be type BOOLEAN, not type INTEGER"},
		{fn: "case", args: []plan.Type{boolean, integer, varchar}, err: "CASE types INTEGER and VARCHAR cannot be matched"},
		{fn: "case", args: []plan.Type{integer, integer, integer}, err: "argument of CASE/WHEN must be type BOOLEAN, not type INTEGER"},
		{fn: "case", args: []plan.Type{boolean, integer}, err: "case takes pairs of a condition and a value, then the ELSE value: 2 arguments"},
		{fn: "coalesce", args: []plan.Type{timestamp, interval}, err: "COALESCE types TIMESTAMP and INTERVAL cannot be matched"},
		{fn: "in", args: []plan.Type{integer, varchar}, err: "operator does not exist: INTEGER = VARCHAR"},
		{fn: "cast", args: []plan.Type{boolean, tDate}, err: "cannot cast type BOOLEAN to DATE"},
		{fn: "cast", args: []plan.Type{interval, bigint}, err: "cannot cast type INTERVAL to BIGINT"},
		{fn: "-", args: []plan.Type{interval, timestamp}, err: "operator does not exist: INTERVAL - TIMESTAMP"},
		{fn: "round", args: []plan.Type{double, integer}, err: "function round(DOUBLE PRECISION, INTEGER) does not exist"},
		{fn: "extract", args: []plan.Type{varchar, varchar}, err: "function extract(VARCHAR, VARCHAR) does not exist"},

		{fn: "+", args: []plan.Type{integer, numeric(3)}, want: []plan.Type{integer, numeric(3)}, res: numeric(3)},
		{fn: "*", args: []plan.Type{numeric(3), bigint}, want: []plan.Type{numeric(3), bigint}, res: numeric(3)},
		{fn: "*", args: []plan.Type{numeric(12), numeric(12)}, want: []plan.Type{numeric(12), numeric(12)}, res: numeric(18)},
		{fn: "/", args: []plan.Type{numeric(2), numeric(3)}, want: []plan.Type{numeric(2), numeric(3)}, res: numeric(6)},
		{fn: "/", args: []plan.Type{integer, integer}, want: []plan.Type{integer, integer}, res: integer},
		{fn: "+", args: []plan.Type{tInt16, bigint}, want: []plan.Type{tInt16, bigint}, res: bigint},
		{fn: "+", args: []plan.Type{integer, double}, want: []plan.Type{double, double}, res: double},
		{fn: "+", args: []plan.Type{numeric(2), tReal}, want: []plan.Type{tReal, tReal}, res: tReal},
		{fn: "+", args: []plan.Type{tReal, double}, want: []plan.Type{tReal, double}, res: double},
		{fn: "+", args: []plan.Type{null, bigint}, want: []plan.Type{bigint, bigint}, res: bigint},
		{fn: "+", args: []plan.Type{timestamp, null}, want: []plan.Type{timestamp, interval}, res: timestamp},
		{fn: "*", args: []plan.Type{null, interval}, want: []plan.Type{double, interval}, res: interval},
		{fn: "+", args: []plan.Type{tDate, interval}, want: []plan.Type{timestamp, interval}, res: timestamp},
		{fn: "+", args: []plan.Type{tDate, integer}, want: []plan.Type{tDate, integer}, res: tDate},
		{fn: "-", args: []plan.Type{tDate, tDate}, want: []plan.Type{tDate, tDate}, res: integer},
		{fn: "-", args: []plan.Type{timestamp, timestamptz}, want: []plan.Type{timestamp, timestamptz}, res: interval},
		{fn: "-", args: []plan.Type{tDate, timestamptz}, want: []plan.Type{timestamp, timestamptz}, res: interval},
		{fn: "*", args: []plan.Type{interval, numeric(1)}, want: []plan.Type{interval, double}, res: interval},
		{fn: "/", args: []plan.Type{interval, integer}, want: []plan.Type{interval, integer}, res: interval},
		{fn: "=", args: []plan.Type{tDate, timestamp}, want: []plan.Type{timestamp, timestamp}, res: boolean},
		{fn: "=", args: []plan.Type{null, bigint}, want: []plan.Type{bigint, bigint}, res: boolean},
		{fn: "=", args: []plan.Type{null, null}, want: []plan.Type{varchar, varchar}, res: boolean},
		{fn: "<", args: []plan.Type{bigint, numeric(2)}, want: []plan.Type{bigint, numeric(2)}, res: boolean},
		{fn: "<", args: []plan.Type{bigint, tReal}, want: []plan.Type{tReal, tReal}, res: boolean},
		{fn: "in", args: []plan.Type{integer, bigint, numeric(1)}, want: []plan.Type{integer, bigint, numeric(1)}, res: boolean},
		{fn: "in", args: []plan.Type{integer, null, double}, want: []plan.Type{double, double, double}, res: boolean},
		{fn: "coalesce", args: []plan.Type{null, integer, numeric(2)}, want: []plan.Type{numeric(2), numeric(2), numeric(2)}, res: numeric(2)},
		{fn: "coalesce", args: []plan.Type{null}, want: []plan.Type{varchar}, res: varchar},
		{fn: "case", args: []plan.Type{boolean, varchar, null}, want: []plan.Type{boolean, varchar, varchar}, res: varchar},
		{fn: "case", args: []plan.Type{null, tDate, timestamptz}, want: []plan.Type{boolean, timestamptz, timestamptz}, res: timestamptz},
		{fn: "||", args: []plan.Type{varchar, bigint}, want: []plan.Type{varchar, bigint}, res: varchar},
		{fn: "concat", args: []plan.Type{null, boolean}, want: []plan.Type{null, boolean}, res: varchar},
		{fn: "like", args: []plan.Type{varchar, null}, want: []plan.Type{varchar, varchar}, res: boolean},
		{fn: "substr", args: []plan.Type{varchar, tInt16, null}, want: []plan.Type{varchar, tInt16, integer}, res: varchar},
		{fn: "is_null", args: []plan.Type{interval}, want: []plan.Type{interval}, res: boolean},
		{fn: "round", args: []plan.Type{numeric(3)}, want: []plan.Type{numeric(3)}, res: numeric(0)},
		{fn: "round", args: []plan.Type{numeric(3), integer}, want: []plan.Type{numeric(3), integer}, res: numeric(3)},
		{fn: "round", args: []plan.Type{bigint, integer}, want: []plan.Type{bigint, integer}, res: numeric(0)},
		{fn: "floor", args: []plan.Type{double}, want: []plan.Type{double}, res: double},
		{fn: "extract", args: []plan.Type{varchar, tDate}, want: []plan.Type{varchar, timestamp}, res: numeric(6)},
		{fn: "date_trunc", args: []plan.Type{varchar, timestamptz}, want: []plan.Type{varchar, timestamptz}, res: timestamptz},
		{fn: "to_char", args: []plan.Type{tDate, varchar}, want: []plan.Type{timestamp, varchar}, res: varchar},
		{fn: "now", args: nil, want: []plan.Type{}, res: timestamptz},
		{fn: "cast", args: []plan.Type{varchar, interval}, want: []plan.Type{varchar}, res: interval},
		{fn: "char_length", args: []plan.Type{varchar}, want: []plan.Type{varchar}, res: integer},
	} {
		want, res, err := Resolve(c.fn, c.args)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("Resolve(%s): %v, want error %q", sig(c.fn, c.args), err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(want, c.want) || res != c.res {
			t.Errorf("Resolve(%s) = %v, %v, %v; want %v, %v", sig(c.fn, c.args), want, res, err, c.want, c.res)
		}
	}
}

func TestResolveCall(t *testing.T) {
	for _, c := range []struct {
		fn   string
		args []plan.Expr
		res  plan.Type
	}{
		{"extract", []plan.Expr{str("hour"), ts("2024-01-01")}, numeric(0)},
		{"extract", []plan.Expr{str("Second"), ts("2024-01-01")}, numeric(6)},
		{"extract", []plan.Expr{str("epoch"), ivl("1 day")}, numeric(6)},
		{"extract", []plan.Expr{str("ms"), ts("2024-01-01")}, numeric(6)},
		{"extract", []plan.Expr{str("milliseconds"), ts("2024-01-01")}, numeric(3)},
		{"extract", []plan.Expr{col("channel"), ts("2024-01-01")}, numeric(6)},
		{"round", []plan.Expr{num("1.2345"), i32(2)}, numeric(2)},
		{"round", []plan.Expr{num("1.2345"), i32(-2)}, numeric(0)},
		{"round", []plan.Expr{num("1.2345"), col("i16")}, numeric(4)},
		{"round", []plan.Expr{num("1.2345")}, numeric(0)},
		{"round", []plan.Expr{dbl("1.5")}, double},
		{"lower", []plan.Expr{str("X")}, varchar},
	} {
		if _, res, err := ResolveCall(c.fn, c.args); err != nil || res != c.res {
			t.Errorf("ResolveCall(%s, %s) = %s, %v; want %s", c.fn, show(c.args[0]), res, err, c.res)
		}
	}
	if _, _, err := ResolveCall("lower", []plan.Expr{i32(1)}); err == nil {
		t.Error("ResolveCall(lower(INTEGER)): no error")
	}
}

// TestResolveFixedPoint: the types Resolve wants, it takes as they are —
// the planner casts once, and Compile accepts the result — and every
// call it types compiles.
func TestResolveFixedPoint(t *testing.T) {
	types := []plan.Type{null, boolean, tInt16, integer, bigint, tReal, double, numeric(0), numeric(3),
		varchar, tDate, timestamp, timestamptz, interval}
	var combos [][]plan.Type
	for _, a := range types {
		combos = append(combos, []plan.Type{a})
		for _, b := range types {
			combos = append(combos, []plan.Type{a, b})
			for _, c := range []plan.Type{null, boolean, integer, numeric(2), varchar, timestamp} {
				combos = append(combos, []plan.Type{a, b, c})
			}
		}
	}
	resolved := 0
	for fn := range functions {
		for _, args := range combos {
			want, res, err := Resolve(fn, args)
			if err != nil {
				continue
			}
			resolved++
			want2, res2, err := Resolve(fn, want)
			if err != nil || !slices.Equal(want, want2) || res != res2 {
				t.Errorf("Resolve(%s) wants %v (%s), but Resolve(%s) = %v, %s, %v", sig(fn, args), want, res, sig(fn, want), want2, res2, err)
				continue
			}
			// Each argument a constant (NULL) or column of its wanted
			// type; the field of extract and the pattern of LIKE must be
			// valid constants.
			e := plan.Call(fn, res)
			for i, w := range want {
				a := plan.Expr{Op: plan.OpConst, Type: w, IsNull: true}
				if i%2 == 1 {
					a = plan.ColRef(i, w)
				}
				if i == 0 && (fn == "extract" || fn == "date_trunc") {
					a = str("day")
				}
				e.Args = append(e.Args, a)
			}
			if _, err := Compile(e); err != nil {
				t.Errorf("%s resolves but does not compile: %v", sig(fn, args), err)
			}
		}
	}
	if resolved < 1000 {
		t.Errorf("only %d calls resolved", resolved)
	}
}

package expr

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

// The tests build expressions as the planner does: Resolve types a call
// and the arguments get casts where it wants them.

var (
	tInt16 = plan.Type{Kind: plan.Int16}
	tReal  = plan.Type{Kind: plan.Float32}
	tDate  = plan.Type{Kind: plan.Date}
)

// testSchema is the row the tests evaluate over: a Nexmark bid and a
// few columns of the other types.
var testSchema = plan.Schema{
	{Name: "auction", Type: bigint}, {Name: "bidder", Type: bigint}, {Name: "price", Type: bigint},
	{Name: "channel", Type: varchar}, {Name: "url", Type: varchar}, {Name: "date_time", Type: timestamp},
	{Name: "extra", Type: varchar}, {Name: "n", Type: numeric(2)}, {Name: "d", Type: double},
	{Name: "b", Type: boolean}, {Name: "dt", Type: tDate}, {Name: "iv", Type: interval},
	{Name: "i16", Type: tInt16}, {Name: "tz", Type: timestamptz},
}

var testRow = func() row.Row {
	texts := []string{"1007", "2001", "1101322", "Google",
		"https://www.nexmark.com/ojtd/qrxq/hcpm/item.htm?query=1&channel_id=1536688128",
		"2024-03-15 13:45:12.5", "", "12.34", "2.5", "", "2024-03-15", "1 day 02:00:00", "-7", "2024-03-15 13:45:12.5+00"}
	r := make(row.Row, len(texts))
	for i, s := range texts {
		if s == "" {
			continue
		}
		v, err := row.ParseText(testSchema[i].Type, s)
		if err != nil {
			panic(err)
		}
		r[i] = v
	}
	return r
}()

// col is a column of testSchema, by name.
func col(name string) plan.Expr {
	for i, c := range testSchema {
		if c.Name == name {
			return plan.ColRef(i, c.Type)
		}
	}
	panic("no column " + name)
}

// lit is a constant of type t from its PostgreSQL text.
func lit(t plan.Type, text string) plan.Expr {
	v, err := row.ParseText(t, text)
	if err != nil {
		panic(err)
	}
	e := plan.Expr{Op: plan.OpConst, Type: t}
	switch t.Kind {
	case plan.Bool:
		e.Lit = strconv.FormatBool(v.Bool())
	case plan.Float32, plan.Float64:
		e.Lit = strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case plan.Varchar:
		e.Lit = v.Str()
	default:
		e.Lit = strconv.FormatInt(v.Int(), 10)
	}
	return e
}

func i32(n int) plan.Expr    { return lit(integer, strconv.Itoa(n)) }
func i64(n int64) plan.Expr  { return lit(bigint, strconv.FormatInt(n, 10)) }
func str(s string) plan.Expr { return plan.Expr{Op: plan.OpConst, Type: varchar, Lit: s} }
func dbl(s string) plan.Expr { return lit(double, s) }
func ts(s string) plan.Expr  { return lit(timestamp, s) }
func ivl(s string) plan.Expr { return lit(interval, s) }
func tru() plan.Expr         { return lit(boolean, "true") }
func fls() plan.Expr         { return lit(boolean, "false") }

// num is a NUMERIC literal typed by its digits, as the planner types
// 0.908.
func num(s string) plan.Expr {
	scale := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		scale = len(s) - i - 1
	}
	return lit(numeric(scale), s)
}

var nul = plan.Expr{Op: plan.OpConst, Type: null, IsNull: true}

// bind binds fn(args…) as the planner does, with Resolve, or with
// ResolveCall when exact is set.
func bind(exact bool, fn string, args ...plan.Expr) plan.Expr {
	types := make([]plan.Type, len(args))
	for i, a := range args {
		types[i] = a.Type
	}
	want, res, err := Resolve(fn, types)
	if exact {
		want, res, err = ResolveCall(fn, args)
	}
	if err != nil {
		panic(fmt.Sprintf("%s: %v", fn, err))
	}
	for i := range args {
		if want[i] != args[i].Type {
			args[i] = cast(args[i], want[i])
		}
	}
	return plan.Call(fn, res, args...)
}

func fc(fn string, args ...plan.Expr) plan.Expr { return bind(false, fn, args...) }

func cast(e plan.Expr, t plan.Type) plan.Expr {
	if e.Op == plan.OpConst && e.IsNull {
		e.Type = t
		return e
	}
	if _, _, err := Resolve("cast", []plan.Type{e.Type, t}); err != nil {
		panic(err)
	}
	return plan.Call("cast", t, e)
}

// text is a value as the tests compare it: its PostgreSQL text, NULL,
// or the error.
func text(t plan.Type, v row.Value, err error) string {
	switch {
	case err != nil:
		return "error: " + err.Error()
	case v.IsNull():
		return "NULL"
	}
	return string(row.AppendText(nil, t, v))
}

func eval(t *testing.T, e plan.Expr) string {
	t.Helper()
	ev, err := Compile(e)
	if err != nil {
		return "compile error: " + err.Error()
	}
	v, err := ev(testRow)
	return text(e.Type, v, err)
}

type evalCase struct {
	e    plan.Expr
	want string
}

func runCases(t *testing.T, cases []evalCase) {
	t.Helper()
	for _, c := range cases {
		if got := eval(t, c.e); got != c.want {
			t.Errorf("%s = %q, want %q", show(c.e), got, c.want)
		}
	}
}

// show prints an expression for a failure's message.
func show(e plan.Expr) string {
	switch e.Op {
	case plan.OpCol:
		return testSchema[e.Col].Name
	case plan.OpConst:
		if e.IsNull {
			return "NULL"
		}
		v, _ := Literal(e.Type, e.Lit, false)
		return fmt.Sprintf("%s'%s'", e.Type, row.AppendText(nil, e.Type, v))
	}
	args := make([]string, len(e.Args))
	for i, a := range e.Args {
		args[i] = show(a)
	}
	if e.Fn == "cast" {
		return fmt.Sprintf("(%s)::%s", args[0], e.Type)
	}
	return fmt.Sprintf("%s(%s)", e.Fn, strings.Join(args, ", "))
}

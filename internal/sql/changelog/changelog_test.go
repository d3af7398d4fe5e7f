package changelog

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

// add and del are a Debezium sink's lines for r, as the engine's encoder
// writes them (internal/sql/ops, encoder.debezium).
func add(s plan.Schema, r row.Row) string {
	return `{"before":null,"after":` + string(row.AppendJSON(nil, s, r)) + `,"op":"c"}`
}

func del(s plan.Schema, r row.Row) string {
	return `{"before":` + string(row.AppendJSON(nil, s, r)) + `,"after":null,"op":"d"}`
}

// csvOf is what the engine's CSV sink writes for rows, sorted.
func csvOf(s plan.Schema, rows ...row.Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, string(row.AppendCSV(nil, s, r)))
	}
	slices.Sort(out)
	return out
}

func replay(t *testing.T, lines []string, key ...string) *State {
	t.Helper()
	s, err := Replay(lines, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func equal(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("rows:\n got %q\nwant %q", got, want)
	}
}

var (
	i64     = plan.Type{Kind: plan.Int64}
	varchar = plan.Type{Kind: plan.Varchar}
	// counts is a GROUP BY's result: its key, a count, an average.
	counts = plan.Schema{{Name: "day", Type: varchar}, {Name: "n", Type: i64}, {Name: "avg", Type: plan.Type{Kind: plan.Decimal, Scale: 6}}}
)

func count(day string, n, avg int64) row.Row { return row.Row{row.Str(day), row.Int(n), row.Int(avg)} }

// A changelog of inserts, updates and deletes replays into its final rows.
func TestReplay(t *testing.T) {
	lines := []string{
		add(counts, count("a", 1, 5_000000)),
		add(counts, count("b", 1, 7_000000)),
		del(counts, count("a", 1, 5_000000)), // update a
		add(counts, count("a", 2, 5_500000)),
		add(counts, count("c, d", 1, 1)),
		del(counts, count("b", 1, 7_000000)), // delete b
		del(counts, count("a", 2, 5_500000)), // update a
		add(counts, count("a", 3, 4_333333)),
		add(counts, count("b", 1, -1)), // b again
		"",
	}
	s := replay(t, lines, "day")
	want := csvOf(counts, count("a", 3, 4_333333), count("b", 1, -1), count("c, d", 1, 1))
	equal(t, s.Rows(nil), want)
	equal(t, s.Rows([]string{"day", "n", "avg"}), want)
	equal(t, want, []string{`"c, d",1,0.000001`, "a,3,4.333333", "b,1,-0.000001"})
	equal(t, s.Rows([]string{"avg", "day"}), []string{"-0.000001,b", "0.000001,\"c, d\"", "4.333333,a"})
	if s.Len() != 3 || !slices.Equal(s.Columns(), []string{"day", "n", "avg"}) {
		t.Errorf("%d rows of %v", s.Len(), s.Columns())
	}
	// An update as one envelope (op u) and a snapshot read (op r).
	r := NewReplayer([]string{"day"})
	for _, l := range []string{
		`{"op":"r","after":{"day":"a","n":1,"avg":1.000000},"before":null}`,
		`{"before":{"day":"a","n":1,"avg":1.000000},"after":{"day":"a","n":2,"avg":2.000000},"op":"u","ts_ms":5}`,
	} {
		if err := r.Apply(l); err != nil {
			t.Fatal(err)
		}
	}
	equal(t, r.State().Rows(nil), []string{"a,2,2.000000"})

	// The state of a changelog of nothing: no rows, any columns.
	equal(t, replay(t, nil, "day").Rows([]string{"x"}), []string{})
}

// Every type's value reads back as the engine's CSV sink prints it.
func TestRowsAsCSV(t *testing.T) {
	s := plan.Schema{
		{Name: "b", Type: plan.Type{Kind: plan.Bool}},
		{Name: "i16", Type: plan.Type{Kind: plan.Int16}},
		{Name: "i32", Type: plan.Type{Kind: plan.Int32}},
		{Name: "i64", Type: i64},
		{Name: "f32", Type: plan.Type{Kind: plan.Float32}},
		{Name: "f64", Type: plan.Type{Kind: plan.Float64}},
		{Name: "dec", Type: plan.Type{Kind: plan.Decimal, Scale: 3}},
		{Name: "dec0", Type: plan.Type{Kind: plan.Decimal}},
		{Name: "s", Type: varchar},
		{Name: "d", Type: plan.Type{Kind: plan.Date}},
		{Name: "ts", Type: plan.Type{Kind: plan.Timestamp}},
		{Name: "tz", Type: plan.Type{Kind: plan.TimestampTZ}},
		{Name: "iv", Type: plan.Type{Kind: plan.Interval}},
		{Name: "id", Type: i64},
	}
	const us = 1_000_000
	rows := []row.Row{
		{row.Bool(true), row.Int(-32768), row.Int(1 << 30), row.Int(math.MinInt64), row.Float(float64(float32(1.5e16))), row.Float(0.1),
			row.Int(-5), row.Int(12345), row.Str("plain"), row.Int(19723), row.Int(1704067200*us + 120000), row.Int(1704067200 * us),
			row.Int(-(86400 + 7200) * us), row.Int(1)},
		{row.Bool(false), row.Int(0), row.Int(-1), row.Int(math.MaxInt64), row.Float(math.Inf(-1)), row.Float(math.NaN()),
			row.Int(908000), row.Int(0), row.Str(""), row.Int(-800000), row.Int(-1), row.Int(0), row.Int(10 * us), row.Int(2)},
		{row.Null(), row.Null(), row.Null(), row.Null(), row.Float(math.Inf(1)), row.Float(1e-7),
			row.Null(), row.Null(), row.Str("a,\"b\"\r\n\tc\\ \u2028 é \x01"), row.Null(), row.Null(), row.Null(), row.Null(), row.Int(3)},
		{row.Null(), row.Null(), row.Null(), row.Null(), row.Float(math.Copysign(0, -1)), row.Float(1.5e300),
			row.Null(), row.Null(), row.Null(), row.Null(), row.Null(), row.Null(), row.Null(), row.Int(4)},
	}
	var lines []string
	for _, r := range rows {
		// Each row is added, taken back and added again: the retraction
		// must match the row present, exactly.
		lines = append(lines, add(s, r), del(s, r), add(s, r))
	}
	got := replay(t, lines, "id").Rows(nil)
	equal(t, got, csvOf(s, rows...))
	// The engine's own text, as a check on the test: NULL is empty,
	// booleans t and f, an empty string quoted.
	for _, want := range []string{
		`t,-32768,1073741824,-9223372036854775808,1.5e+16,0.1,-0.005,12345,plain,2024-01-01,2024-01-01 00:00:00.12,2024-01-01 00:00:00+00,-1 days -02:00:00,1`,
		`,,,,-0,1.5e+300,,,,,,,,4`,
	} {
		if !slices.Contains(got, want) {
			t.Errorf("no line %q in\n%q", want, got)
		}
	}
	// With no key, a multiset: the same row twice is two rows.
	all := replay(t, append(lines, add(s, rows[0]))).Rows(nil)
	equal(t, all, csvOf(s, append(slices.Clone(rows), rows[0])...))
}

// updates is a changelog with each kind of transition.
func updates() []string {
	return []string{
		add(counts, count("a", 1, 1)),
		add(counts, count("b", 1, 1)),
		del(counts, count("a", 1, 1)),
		add(counts, count("a", 2, 1)),
		del(counts, count("b", 1, 1)),
		add(counts, count("b", 2, 2)),
		del(counts, count("b", 2, 2)),
		add(counts, count("c", 1, 1)),
		del(counts, count("a", 2, 1)),
		add(counts, count("a", 3, 1)),
	}
}

// A changelog with one line twice fails, whichever the line; with one line
// dropped it fails or replays into other rows.
func TestCounterProofs(t *testing.T) {
	lines := updates()
	want := replay(t, lines, "day").Rows(nil)
	equal(t, want, []string{"a,3,0.000001", "c,1,0.000001"})
	for i := range lines {
		twice := slices.Insert(slices.Clone(lines), i, lines[i])
		if _, err := Replay(twice, []string{"day"}); err == nil {
			t.Errorf("line %d twice: no error", i+1)
		} else if !strings.Contains(err.Error(), "changelog line ") {
			t.Errorf("line %d twice: %v names no line", i+1, err)
		}
		dropped := slices.Delete(slices.Clone(lines), i, i+1)
		if s, err := Replay(dropped, []string{"day"}); err == nil && slices.Equal(s.Rows(nil), want) {
			t.Errorf("line %d dropped: no error, the same rows", i+1)
		}
	}
	// The errors say what and where.
	for _, c := range []struct {
		lines []string
		err   string
	}{
		{[]string{lines[0], lines[0]}, `changelog line 2: add of key (day="a"), which holds ("a", 1, 0.000001) already (a duplicated transition)`},
		{[]string{lines[0], lines[2], lines[2]}, `changelog line 3: retraction of key (day="a"), which holds no row`},
		{[]string{lines[0], lines[4]}, `changelog line 2: retraction of key (day="b"), which holds no row`},
		{[]string{lines[0], lines[1], del(counts, count("a", 9, 1))}, `changelog line 3: retraction of key (day="a"), whose row is ("a", 1, 0.000001), not ("a", 9, 0.000001) (a lost transition)`},
	} {
		_, err := Replay(c.lines, []string{"day"})
		if err == nil || !strings.HasPrefix(err.Error(), c.err) {
			t.Errorf("error %v, want %s", err, c.err)
		}
	}
	// With no key a duplicated add is a second copy, but a duplicated
	// retraction or a retraction of a row not there fails.
	if _, err := Replay([]string{lines[0], lines[0]}, nil); err != nil {
		t.Error(err)
	}
	if _, err := Replay([]string{lines[0], lines[2], lines[2]}, nil); err == nil || !strings.Contains(err.Error(), `changelog line 3: retraction of row ("a", 1, 0.000001), which is not there`) {
		t.Errorf("error %v", err)
	}
}

func TestMalformed(t *testing.T) {
	ok := add(counts, count("a", 1, 1))
	for _, c := range []struct{ line, err string }{
		{`{"before":null,"after":{"day":"a"}`, "malformed JSON"},
		{`not json`, "malformed JSON"},
		{`[1]`, "malformed JSON"},
		{ok + ` {}`, "text after the envelope"},
		{`{"before":null,"after":{"day":"a"}}`, "no op"},
		{`{"before":null,"after":{"day":"a"},"op":"x"}`, `op "x"`},
		{`{"before":null,"after":{"day":"a"},"op":1}`, "op 1 is not a string"},
		{`{"before":null,"after":null,"op":"c"}`, `op "c": want a null before and an after row`},
		{`{"before":{"day":"a"},"after":{"day":"a"},"op":"c"}`, `op "c"`},
		{`{"before":null,"after":{"day":"a"},"op":"d"}`, `op "d": want a before row and a null after`},
		{`{"before":{"day":"a"},"op":"u"}`, `op "u"`},
		{`{"after":{"day":"a"},"after":{"day":"b"},"op":"c"}`, `member "after" twice`},
		{`{"after":{"day":"a","day":"b"},"op":"c"}`, `after: column "day" twice`},
		{`{"after":{"day":{"x":1}},"op":"c"}`, `column "day": a nested {`},
		{`{"after":{"day":[1]},"op":"c"}`, `column "day": a nested [`},
		{`{"after":[1],"op":"c"}`, "want a row object or null"},
		{`{"after":{"n":1},"op":"c"}`, `key column "day" not in the row's columns [n]`},
	} {
		r := NewReplayer([]string{"day"})
		if err := r.Apply(""); err != nil {
			t.Fatal(err)
		}
		err := r.Apply(c.line)
		if err == nil || !strings.HasPrefix(err.Error(), "changelog line 2: ") || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want line 2 and %q", c.line, err, c.err)
		}
	}
	// Rows of other columns than the first's.
	_, err := Replay([]string{ok, `{"before":null,"after":{"day":"b","n":1},"op":"c"}`}, []string{"day"})
	if err == nil || !strings.Contains(err.Error(), "a row of columns [day n] after rows of [day n avg]") {
		t.Errorf("error %v", err)
	}
	// A failed update leaves the state as it was.
	r := NewReplayer([]string{"day"})
	for _, l := range []string{ok, add(counts, count("b", 1, 1))} {
		if err := r.Apply(l); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Apply(`{"before":{"day":"a","n":1,"avg":0.000001},"after":{"day":"b","n":1,"avg":0.000001},"op":"u"}`); err == nil {
		t.Error("an update onto a key present: no error")
	}
	equal(t, r.State().Rows(nil), []string{"a,1,0.000001", "b,1,0.000001"})
}

func TestReadLines(t *testing.T) {
	lines := updates()
	r := NewReplayer([]string{"day"})
	if err := r.ReadLines("part-0", strings.NewReader(strings.Join(lines[:4], "\n")+"\n")); err != nil {
		t.Fatal(err)
	}
	if err := r.ReadLines("part-1", strings.NewReader(strings.Join(lines[4:], "\r\n"))); err != nil {
		t.Fatal(err)
	}
	equal(t, r.State().Rows(nil), []string{"a,3,0.000001", "c,1,0.000001"})
	err := r.ReadLines("part-2", strings.NewReader("\n"+lines[0]+"\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "part-2:2: add of key (day=\"a\")") {
		t.Errorf("error %v", err)
	}
}

func TestRowsPanicsOnUnknownColumn(t *testing.T) {
	s := replay(t, updates(), "day")
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	s.Rows([]string{"day", "x"})
}

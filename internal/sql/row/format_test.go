package row

import (
	"math"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/sql/plan"
)

func TestCSV(t *testing.T) {
	s := plan.Schema{{Name: "a", Type: tInt64}, {Name: "b", Type: tText}, {Name: "c", Type: dec(2)}, {Name: "d", Type: tTS}, {Name: "e", Type: tBool}}
	for _, c := range []struct {
		r    Row
		line string
	}{
		{Row{Int(1), Str("x"), Int(150), Int(1704067200000000), Bool(true)}, "1,x,1.50,2024-01-01 00:00:00,t"},
		{Row{Null(), Str(""), Null(), Null(), Null()}, `,"",,,`},
		{Row{Int(-2), Str("a,\"b\"\r\nc"), Int(-5), Int(0), Bool(false)}, "-2,\"a,\"\"b\"\"\r\nc\",-0.05,1970-01-01 00:00:00,f"},
		{Row{Int(3), Null(), Int(0), Null(), Null()}, "3,,0.00,,"},
		{Row{Int(3), Str(`"`), Int(0), Null(), Null()}, `3,"""",0.00,,`},
	} {
		got := string(AppendCSV([]byte("x"), s, c.r))[1:]
		if got != c.line {
			t.Errorf("AppendCSV(%+v) = %q, want %q", c.r, got, c.line)
		}
		back, err := ParseCSV(s, []byte(c.line+"\r\n"), nil)
		if err != nil {
			t.Errorf("ParseCSV(%q): %v", c.line, err)
			continue
		}
		for i := range c.r {
			if back[i] != c.r[i] {
				t.Errorf("ParseCSV(%q) column %d = %+v, want %+v", c.line, i, back[i], c.r[i])
			}
		}
	}
	for _, c := range []struct{ line, err string }{
		{"1,x,1.5,,", ""},
		{"1,x,1.5,", "csv: 4 fields, want 5 (a BIGINT, b VARCHAR, c NUMERIC(18,2), d TIMESTAMP, e BOOLEAN)"},
		{"1,x,1.5,,,", "csv: 6 fields, want 5 (a BIGINT, b VARCHAR, c NUMERIC(18,2), d TIMESTAMP, e BOOLEAN)"},
		{`1,"x,1.5,,`, "csv: field 2: no closing quote"},
		{`1,"x"y,1.5,,`, `csv: field 2: text after the closing quote: "y,1.5,,"`},
		{`1,x"y,1.5,,`, `csv: field 2: bare quote in an unquoted field: "x\"y"`},
		{"z,x,1.5,,", `csv: column "a": invalid input syntax for type bigint: "z"`},
	} {
		_, err := ParseCSV(s, []byte(c.line), nil)
		if (err == nil) != (c.err == "") || err != nil && err.Error() != c.err {
			t.Errorf("ParseCSV(%q): %v, want %q", c.line, err, c.err)
		}
	}
}

func TestAppendJSON(t *testing.T) {
	s := plan.Schema{
		{Name: "a", Type: tInt64}, {Name: "b\"", Type: tText}, {Name: "c", Type: dec(2)}, {Name: "d", Type: tTS},
		{Name: "e", Type: tBool}, {Name: "f", Type: tDouble}, {Name: "g", Type: tDouble}, {Name: "h", Type: tIvl},
	}
	r := Row{Int(1), Str("x\n\"\x01\u2028\xff"), Int(-150), Int(1704067200000000), Bool(true), Float(1e16), Float(math.NaN()), Null()}
	want := `{"a":1,"b\"":"x\n\"\u0001\u2028\ufffd","c":-1.50,"d":"2024-01-01 00:00:00","e":true,"f":1e+16,"g":"NaN","h":null}`
	if got := string(AppendJSON(nil, s, r)); got != want {
		t.Errorf("AppendJSON = %s\nwant          %s", got, want)
	}
}

func TestParseJSON(t *testing.T) {
	s := plan.Schema{
		{Name: "a", Type: tInt64}, {Name: "b", Type: tText}, {Name: "c", Type: dec(3)}, {Name: "d", Type: tTS},
		{Name: "e", Type: tBool}, {Name: "f", Type: tDouble}, {Name: "g", Type: tInt16}, {Name: "h", Type: tIvl},
	}
	for _, c := range []struct {
		in   string
		want Row
	}{
		{`{"a":1,"b":"x","c":0.1235,"d":"2024-01-01T00:00:00Z","e":true,"f":1.5,"g":-3,"h":"10 seconds"}`,
			Row{Int(1), Str("x"), Int(124), Int(1704067200000000), Bool(true), Float(1.5), Int(-3), Int(10_000_000)}},
		{` { } `, Row{Null(), Null(), Null(), Null(), Null(), Null(), Null(), Null()}},
		{`{"a":null,"z":{"x":[1,2,{"y":null}],"w":"\""},"b":"\u00e9\ud83d\ude00\n\/","d":1704067200123.5}`,
			Row{Null(), Str("é😀\n/"), Null(), Int(1704067200123500), Null(), Null(), Null(), Null()}},
		{`{"a":"12","c":"-7","e":"f","f":"NaN","b":12.50}`,
			Row{Int(12), Str("12.50"), Int(-7000), Null(), Bool(false), Float(math.NaN()), Null(), Null()}},
		{`{"a":1e3,"g":2.0,"b":[1, "x"],"a":9223372036854775807}`,
			Row{Int(math.MaxInt64), Str(`[1, "x"]`), Null(), Null(), Null(), Null(), Int(2), Null()}},
		{`{"c":123456789012345.6785,"b":true}`,
			Row{Null(), Str("true"), Int(123456789012345679), Null(), Null(), Null(), Null(), Null()}},
		{`{"b\u0022":1,"\u0062":"escaped name"}`,
			Row{Null(), Str("escaped name"), Null(), Null(), Null(), Null(), Null(), Null()}},
	} {
		got, err := ParseJSON(s, []byte(c.in), Row{Str("stale")})
		if err != nil {
			t.Errorf("ParseJSON(%s): %v", c.in, err)
			continue
		}
		for i := range c.want {
			if got[i] != c.want[i] && !(math.IsNaN(got[i].Float()) && math.IsNaN(c.want[i].Float()) && s[i].Type == tDouble) {
				t.Errorf("ParseJSON(%s) column %s = %+v, want %+v", c.in, s[i].Name, got[i], c.want[i])
			}
		}
	}
	for _, c := range []struct{ in, err string }{
		{`[1]`, "json: at byte 0: want an object"},
		{`{"a":1.5}`, `json: column "a": 1.5 is not an integer`},
		{`{"g":40000}`, `json: column "g": value 40000 is out of range for type smallint`},
		{`{"a":99999999999999999999}`, `json: column "a": value 99999999999999999999 is out of range for type bigint`},
		{`{"a":"x"}`, `json: column "a": invalid input syntax for type bigint: "x"`},
		{`{"e":1}`, `json: column "e": a JSON number is not a BOOLEAN`},
		{`{"a":true}`, `json: column "a": a JSON boolean is not a BIGINT`},
		{`{"a":{}}`, `json: column "a": a JSON object or array is not a BIGINT`},
		{`{"a":1,}`, "json: at byte 7: want a member name"},
		{`{"a":1} x`, "json: at byte 8: text after the object"},
		{`{"a":01}`, "json: at byte 6: want ',' or '}'"},
		{`{"a":-}`, `json: column "a": at byte 5: bad number`},
		{`{"b":"x`, `json: column "b": at byte 7: unterminated string`},
		{`{"b":"\x"}`, `json: column "b": at byte 7: bad escape`},
		{`{"z":[1 2]}`, "json: at byte 8: want ',' or ']'"},
		{`{"z":nul}`, "json: at byte 5: want null"},
		{`{"z":` + strings.Repeat("[", 2000), "json: at byte 1006: nested more than 1000 deep"},
		{"{\"b\":\"\t\"}", `json: column "b": at byte 6: control character in a string`},
	} {
		_, err := ParseJSON(s, []byte(c.in), nil)
		if err == nil || err.Error() != c.err {
			t.Errorf("ParseJSON(%s): %v, want %q", c.in, err, c.err)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	r := make(Row, len(allValues))
	copy(r, allValues)
	r[5] = Float(-2.5e-7)
	got, err := ParseJSON(allTypes, AppendJSON(nil, allTypes, r), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range r {
		if got[i] != r[i] {
			t.Errorf("column %s: %+v, want %+v", allTypes[i].Name, got[i], r[i])
		}
	}
}

func FuzzParseJSON(f *testing.F) {
	f.Add([]byte(`{"s":"x","i64":1,"n":1.5,"z":[{"a":null}]}`))
	f.Add(AppendJSON(nil, allTypes, allValues))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseJSON(allTypes, b, nil)
		if err != nil {
			return
		}
		if _, err := ParseJSON(allTypes, AppendJSON(nil, allTypes, r), nil); err != nil {
			t.Fatalf("re-encoded %s: %v", AppendJSON(nil, allTypes, r), err)
		}
	})
}

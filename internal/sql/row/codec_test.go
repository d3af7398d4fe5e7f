package row

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/sql/plan"
)

var allTypes = plan.Schema{
	{Name: "b", Type: tBool}, {Name: "i16", Type: tInt16}, {Name: "i32", Type: tInt32},
	{Name: "i64", Type: tInt64}, {Name: "r", Type: tReal}, {Name: "d", Type: tDouble},
	{Name: "n", Type: dec(3)}, {Name: "s", Type: tText}, {Name: "dt", Type: tDate},
	{Name: "ts", Type: tTS}, {Name: "tz", Type: tTSTZ}, {Name: "iv", Type: tIvl},
	{Name: "s2", Type: tText},
}

var allValues = Row{
	Bool(true), Int(-32768), Int(math.MaxInt32), Int(math.MinInt64), Float(float64(float32(1.5))),
	Float(math.Inf(-1)), Int(908000), Str("héllo, \"world\"\n"), Int(-719528), Int(1704067200123456),
	Int(-1), Int(-1_500_000), Str(""),
}

func TestCodecRoundTrip(t *testing.T) {
	c := NewCodec(allTypes)
	// Every subset of NULLs among the first columns, the rest set.
	for mask := range 1 << 9 {
		r := make(Row, len(allValues))
		copy(r, allValues)
		for i := range 9 {
			if mask&(1<<i) != 0 {
				r[i] = Null()
			}
		}
		b := c.Append([]byte("prefix"), r)
		got, err := c.Decode(b[len("prefix"):], Row{Int(7)})
		if err != nil {
			t.Fatalf("mask %b: %v", mask, err)
		}
		for i := range r {
			if got[i] != r[i] {
				t.Fatalf("mask %b column %d: %+v, want %+v", mask, i, got[i], r[i])
			}
		}
	}
}

func TestCodecDecodeReuses(t *testing.T) {
	c := NewCodec(allTypes)
	b := c.Append(nil, allValues)
	r := make(Row, 0, 20)
	got, err := c.Decode(b, r)
	if err != nil || &got[0] != &r[:1][0] || len(got) != len(allTypes) {
		t.Fatalf("Decode did not reuse the row: %v", err)
	}
	// The strings do not alias the record.
	clear(b)
	if got[7].Str() != allValues[7].Str() {
		t.Errorf("string changed with the record's bytes: %q", got[7].Str())
	}
}

func TestCodecCorrupt(t *testing.T) {
	c := NewCodec(allTypes)
	b := c.Append(nil, allValues)
	for n := range len(b) {
		if _, err := c.Decode(b[:n], nil); err == nil {
			t.Errorf("truncated to %d bytes: no error", n)
		}
	}
	if _, err := c.Decode(append(b, 0), nil); err == nil || !strings.Contains(err.Error(), "after the last column") {
		t.Errorf("trailing byte: %v", err)
	}
	bad := bytes.Clone(b)
	bad[1] |= 0x80 // a bit beyond the 13th column
	if _, err := c.Decode(bad, nil); err == nil {
		t.Error("bitmap bit beyond the columns: no error")
	}
	bad = bytes.Clone(b)
	bad[2] = 2 // the boolean
	if _, err := c.Decode(bad, nil); err == nil || !strings.Contains(err.Error(), "column 0 (BOOLEAN)") {
		t.Errorf("boolean 2: %v", err)
	}
	small := NewCodec(plan.Schema{{Name: "x", Type: tInt16}})
	if _, err := small.Decode(NewCodec(plan.Schema{{Name: "x", Type: tInt64}}).Append(nil, Row{Int(1 << 20)}), nil); err == nil {
		t.Error("SMALLINT out of range: no error")
	}
}

func FuzzCodecDecode(f *testing.F) {
	c := NewCodec(allTypes)
	f.Add(c.Append(nil, allValues))
	f.Add(c.Append(nil, make(Row, len(allTypes))))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := c.Decode(b, nil)
		if err != nil {
			return
		}
		again, err := c.Decode(c.Append(nil, r), nil)
		if err != nil {
			t.Fatalf("re-encoded row does not decode: %v", err)
		}
		for i := range r {
			if again[i] != r[i] && !(math.IsNaN(r[i].Float()) && allTypes[i].Type.Kind == plan.Float32) {
				t.Fatalf("column %d: %+v, then %+v", i, r[i], again[i])
			}
		}
	})
}

func TestAppendKey(t *testing.T) {
	c := NewCodec(allTypes)
	cols := []int{7, 3, 5}
	k1 := c.AppendKey(nil, allValues, cols)
	key := NewCodec(plan.Schema{allTypes[7], allTypes[3], allTypes[5]})
	got, err := key.Decode(k1, nil)
	if err != nil || got[0] != allValues[7] || got[1] != allValues[3] || got[2] != allValues[5] {
		t.Fatalf("key decodes as %+v, %v", got, err)
	}
	zero, negZero := Row{Float(0)}, Row{Float(math.Copysign(0, -1))}
	nan1, nan2 := Row{Float(math.NaN())}, Row{Float(math.Float64frombits(0x7ff8000000000001))}
	d := NewCodec(plan.Schema{{Name: "f", Type: tDouble}})
	if !bytes.Equal(d.AppendKey(nil, zero, []int{0}), d.AppendKey(nil, negZero, []int{0})) {
		t.Error("0 and -0 have different keys")
	}
	if !bytes.Equal(d.AppendKey(nil, nan1, []int{0}), d.AppendKey(nil, nan2, []int{0})) {
		t.Error("NaNs have different keys")
	}
	if len(c.AppendKey(nil, allValues, nil)) != 0 {
		t.Error("no key columns: a non-empty key")
	}
}

// bidSchema is a Nexmark bid.
var bidSchema = plan.Schema{
	{Name: "auction", Type: tInt64}, {Name: "bidder", Type: tInt64}, {Name: "price", Type: tInt64},
	{Name: "channel", Type: tText}, {Name: "url", Type: tText}, {Name: "date_time", Type: tTS},
	{Name: "extra", Type: tText},
}

var bid = Row{
	Int(1007), Int(2001), Int(1_234_567), Str("Google"),
	Str("https://www.nexmark.com/ojtd/qrxq/hcpm/item.htm?query=1&channel_id=1536688128"),
	Int(1704067200123000), Str(strings.Repeat("x", 40)),
}

func BenchmarkCodecAppend(b *testing.B) {
	c := NewCodec(bidSchema)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = c.Append(buf[:0], bid)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkCodecDecode(b *testing.B) {
	c := NewCodec(bidSchema)
	enc := c.Append(nil, bid)
	r := make(Row, len(bidSchema))
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		var err error
		if r, err = c.Decode(enc, r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendCSV(b *testing.B) {
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendCSV(buf[:0], bidSchema, bid)
	}
}

func BenchmarkParseJSON(b *testing.B) {
	enc := AppendJSON(nil, bidSchema, bid)
	r := make(Row, len(bidSchema))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if r, err = ParseJSON(bidSchema, enc, r); err != nil {
			b.Fatal(err)
		}
	}
}

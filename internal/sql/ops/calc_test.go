package ops

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/nexmark"
	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

func openCalc(t testing.TB, c *plan.Calc) *subtask {
	t.Helper()
	return newSubtask(t, &Calc{}, config(t, &plan.Operator{Calc: c}), 0, 1, nil)
}

// decodeRows decodes the values of FormatRow records.
func decodeRows(t testing.TB, s plan.Schema, recs []sdk.Record) []row.Row {
	t.Helper()
	c := row.NewCodec(s)
	var out []row.Row
	for _, r := range recs {
		d, err := c.Decode(r.Value, nil)
		if err != nil {
			t.Fatalf("decode %q: %v", r.Value, err)
		}
		out = append(out, d)
	}
	return out
}

var bidTable = schema("auction", tBigint, "bidder", tBigint, "price", tBigint, "channel", tVarchar, "url", tVarchar,
	"date_time", tTime, "extra", tVarchar)

func bidEvent(auction, bidder, price int64, channel string, ms int64) nexmark.Event {
	return nexmark.Event{Kind: nexmark.KindBid, Bid: &nexmark.Bid{Auction: auction, Bidder: bidder, Price: price,
		Channel: channel, URL: "https://x/" + channel, DateTime: ms, Extra: "e,\"x\""}}
}

func eventRecord(e nexmark.Event) sdk.Record {
	return sdk.Record{Key: []byte(e.Kind.String()), Value: nexmark.Encode(e), Timestamp: e.DateTime()}
}

// TestCalcNexmarkBid reads bids into a table of some of their columns,
// named in another order, and a processing-time column; filters,
// projects, and writes CSV keyed by the row encoding of a column.
func TestCalcNexmarkBid(t *testing.T) {
	in := schema("price", tBigint, "p_time", tTimeTZ, "channel", tVarchar, "auction", tBigint, "date_time", tTime, "url", tVarchar)
	out := schema("auction", tBigint, "price", tBigint, "channel", tVarchar, "date_time", tTime, "p_time", tTimeTZ)
	s := openCalc(t, &plan.Calc{
		In:      plan.Decoding{Format: plan.FormatNexmarkBid, Schema: in, Timestamp: -1},
		Filter:  cmp(">", col(0, tBigint), lit(tBigint, "100")),
		Project: []plan.Expr{col(3, tBigint), col(0, tBigint), col(2, tVarchar), col(4, tTime), col(1, tTimeTZ)},
		Out:     out,
		Enc:     plan.Encoding{Format: plan.FormatCSV, Key: []int{0}},
	})
	s.timers.nowMs = 1_700_000_000_123
	s.record(-1, eventRecord(bidEvent(7, 1, 150, "Goo,gle", 1_704_067_201_500)))
	s.record(-1, eventRecord(bidEvent(8, 1, 50, "Baidu", 1_704_067_202_000))) // filtered out
	s.record(-1, eventRecord(nexmark.Event{Kind: nexmark.KindPerson, Person: &nexmark.Person{ID: 1, Name: "x"}}))
	s.record(-1, eventRecord(bidEvent(-9, 2, 101, "", -1)))
	got := s.take()
	want := []row.Row{
		{row.Int(7), row.Int(150), row.Str("Goo,gle"), row.Int(1_704_067_201_500_000), row.Int(1_700_000_000_123_000)},
		{row.Int(-9), row.Int(101), row.Str(""), row.Int(-1000), row.Int(1_700_000_000_123_000)},
	}
	if len(got) != len(want) {
		t.Fatalf("emitted %d records, want %d: %q", len(got), len(want), csvLines(got))
	}
	keys := row.NewCodec(out)
	for i, w := range want {
		if v := row.AppendCSV(nil, out, w); !bytes.Equal(got[i].Value, v) {
			t.Errorf("record %d: value %q, want %q", i, got[i].Value, v)
		}
		if k := keys.AppendKey(nil, w, []int{0}); !bytes.Equal(got[i].Key, k) {
			t.Errorf("record %d: key %x, want %x", i, got[i].Key, k)
		}
		if ts := w[3].Int() / 1000; got[i].Timestamp != ts {
			t.Errorf("record %d: timestamp %d, want the event's %d", i, got[i].Timestamp, ts)
		}
	}
	// Records are never overwritten: the first is as it was.
	if !strings.HasPrefix(string(got[0].Value), "7,150,") {
		t.Errorf("the first record changed: %q", got[0].Value)
	}
}

// TestCalcNexmarkAuctionPerson reads every column of the auction and
// person tables.
func TestCalcNexmarkAuctionPerson(t *testing.T) {
	auctions := schema("id", tBigint, "item_name", tVarchar, "description", tVarchar, "initial_bid", tBigint,
		"reserve", tBigint, "date_time", tTime, "expires", tTime, "seller", tBigint, "category", tBigint, "extra", tVarchar)
	people := schema("id", tBigint, "name", tVarchar, "email_address", tVarchar, "credit_card", tVarchar,
		"city", tVarchar, "state", tVarchar, "date_time", tTime, "extra", tVarchar)
	a := &nexmark.Auction{ID: 1000, ItemName: "item", Description: "desc", InitialBid: 10, Reserve: 20,
		DateTime: 1_000, Expires: 9_000, Seller: 3, Category: 11, Extra: "xx"}
	p := &nexmark.Person{ID: 3, Name: "Ann", EmailAddress: "a@b", CreditCard: "1234", City: "Bend", State: "or",
		DateTime: 2_000, Extra: ""}
	for _, tc := range []struct {
		format plan.Format
		schema plan.Schema
		event  nexmark.Event
		want   row.Row
	}{
		{plan.FormatNexmarkAuction, auctions, nexmark.Event{Kind: nexmark.KindAuction, Auction: a}, row.Row{
			row.Int(1000), row.Str("item"), row.Str("desc"), row.Int(10), row.Int(20), row.Int(1_000_000),
			row.Int(9_000_000), row.Int(3), row.Int(11), row.Str("xx")}},
		{plan.FormatNexmarkPerson, people, nexmark.Event{Kind: nexmark.KindPerson, Person: p}, row.Row{
			row.Int(3), row.Str("Ann"), row.Str("a@b"), row.Str("1234"), row.Str("Bend"), row.Str("or"),
			row.Int(2_000_000), row.Str("")}},
	} {
		s := openCalc(t, &plan.Calc{
			In:  plan.Decoding{Format: tc.format, Schema: tc.schema, Timestamp: -1},
			Out: tc.schema, Enc: plan.Encoding{Format: plan.FormatRow},
		})
		s.record(-1, eventRecord(bidEvent(1, 1, 1, "x", 1))) // another kind
		s.record(-1, eventRecord(tc.event))
		got := decodeRows(t, tc.schema, s.take())
		if len(got) != 1 || !reflect.DeepEqual(got[0], tc.want) {
			t.Errorf("%s: rows %v, want %v", tc.format, got, tc.want)
		}
	}
}

// TestCalcSequence reads the sequence source's records: k, v and ts, and
// the clock into a processing-time column.
func TestCalcSequence(t *testing.T) {
	in := schema("ts", tTime, "v", tBigint, "k", tBigint, "pt", tTimeTZ)
	s := openCalc(t, &plan.Calc{
		In:  plan.Decoding{Format: plan.FormatSequence, Schema: in, Timestamp: -1},
		Out: in, Enc: plan.Encoding{Format: plan.FormatRow, Key: []int{2}},
	})
	s.timers.nowMs = 77
	s.record(-1, sdk.Record{Key: []byte("3"), Value: []byte("-42"), Timestamp: 5})
	got := s.take()
	rows := decodeRows(t, in, got)
	want := row.Row{row.Int(5000), row.Int(-42), row.Int(3), row.Int(77_000)}
	if len(rows) != 1 || !reflect.DeepEqual(rows[0], want) || got[0].Timestamp != 5 {
		t.Fatalf("rows %v at %d, want %v at 5", rows, got[0].Timestamp, want)
	}
	if err := s.process(-1, sdk.Record{Key: []byte("12345678901234567890"), Value: []byte("1")}); err == nil || !strings.Contains(err.Error(), "column k") {
		t.Fatalf("a key past int64: %v, want an error", err)
	}
}

// TestCalcText reads CSV and JSON whose event-time column is the
// records' timestamp (a Kafka source's: the messages' timestamps, which
// its watermarks follow), and writes JSON and CSV with text keys.
func TestCalcText(t *testing.T) {
	in := schema("name", tVarchar, "n", tInt, "ts", tTime)
	for _, tc := range []struct {
		in, out, key plan.Format
		value        string
		ts           int64
		wantKey      string
		wantValue    string
	}{
		{plan.FormatCSV, plan.FormatJSON, plan.FormatCSV, `"a,b",3`, 2,
			`"a,b"`, `{"name":"a,b","n":4,"ts":"1970-01-01 00:00:00.002"}`},
		{plan.FormatJSON, plan.FormatCSV, plan.FormatJSON, `{"ts":"2020-01-01 00:00:00","n":-1,"name":"x","other":[1]}`, -2,
			`{"name":"x"}`, `x,0,1969-12-31 23:59:59.998`},
	} {
		s := openCalc(t, &plan.Calc{
			In:      plan.Decoding{Format: tc.in, Schema: in, Timestamp: 2},
			Project: []plan.Expr{col(0, tVarchar), plan.Call("+", tInt, col(1, tInt), lit(tInt, "1")), col(2, tTime)},
			Out:     in,
			Enc:     plan.Encoding{Format: tc.out, Key: []int{0}, KeyFormat: tc.key},
		})
		s.record(-1, sdk.Record{Value: []byte(tc.value), Timestamp: tc.ts})
		got := s.take()
		if len(got) != 1 || string(got[0].Key) != tc.wantKey || string(got[0].Value) != tc.wantValue || got[0].Timestamp != tc.ts {
			t.Errorf("%s → %s: %q", tc.in, tc.out, csvLines(got))
		}
	}
}

// TestCalcRows filters rows of another SQL operator and passes them on
// as they are, keyed anew (a union's calc).
func TestCalcRows(t *testing.T) {
	in := schema("a", tBigint, "b", tVarchar, "c", tDouble)
	s := openCalc(t, &plan.Calc{
		In:     plan.Decoding{Format: plan.FormatRow, Schema: in, Timestamp: -1},
		Filter: cmp("<>", col(1, tVarchar), lit(tVarchar, "no")),
		Out:    in,
		Enc:    plan.Encoding{Format: plan.FormatRow, Key: []int{1, 0}},
	})
	rows := []row.Row{
		{row.Int(1), row.Str("yes"), row.Float(0.5)},
		{row.Int(2), row.Str("no"), row.Float(1)},
		{row.Null(), row.Null(), row.Null()}, // NULL <> 'no' is NULL: filtered out
		{row.Int(3), row.Str(""), row.Null()},
	}
	for i, r := range rows {
		s.record(-1, rowRecord(in, r, nil, int64(i)))
	}
	got := s.take()
	want := []row.Row{rows[0], rows[3]}
	if g := decodeRows(t, in, got); !reflect.DeepEqual(g, want) {
		t.Fatalf("rows %v, want %v", g, want)
	}
	for i, r := range got {
		if k := row.NewCodec(in).AppendKey(nil, want[i], []int{1, 0}); !bytes.Equal(r.Key, k) {
			t.Errorf("row %d: key %x, want %x", i, r.Key, k)
		}
	}
	if got[1].Timestamp != 3 {
		t.Errorf("timestamp %d, want the record's 3", got[1].Timestamp)
	}
}

func TestCalcErrors(t *testing.T) {
	bids := plan.Decoding{Format: plan.FormatNexmarkBid, Schema: bidTable, Timestamp: -1}
	for _, tc := range []struct {
		name string
		cfg  sdk.Config
		want string
	}{
		{"no plan", sdk.Config{}, `config "plan" is required`},
		{"bad plan", sdk.Config{"plan": "{"}, "sql plan"},
		{"another operator's plan", config(t, &plan.Operator{Blackhole: &plan.Blackhole{}}), "not a calc's"},
		{"unknown nexmark column", config(t, &plan.Operator{Calc: &plan.Calc{
			In: plan.Decoding{Format: plan.FormatNexmarkBid, Schema: schema("prize", tBigint), Timestamp: -1}, Out: schema("prize", tBigint),
			Enc: plan.Encoding{Format: plan.FormatRow}}}), "column prize BIGINT: a nexmark bid has no such field"},
		{"misspelt nexmark timestamp", config(t, &plan.Operator{Calc: &plan.Calc{
			In: plan.Decoding{Format: plan.FormatNexmarkBid, Schema: schema("date_tim", tTime), Timestamp: -1}, Out: schema("date_tim", tTime),
			Enc: plan.Encoding{Format: plan.FormatRow}}}), "column date_tim TIMESTAMP: a nexmark bid has no such field"},
		{"unknown sequence column", config(t, &plan.Operator{Calc: &plan.Calc{
			In: plan.Decoding{Format: plan.FormatSequence, Schema: schema("k", tBigint, "w", tBigint), Timestamp: -1}, Out: schema("k", tBigint, "w", tBigint),
			Enc: plan.Encoding{Format: plan.FormatRow}}}), "column w BIGINT: the sequence source has no such field (it has k, v, ts)"},
		{"nexmark column of another type", config(t, &plan.Operator{Calc: &plan.Calc{
			In: plan.Decoding{Format: plan.FormatNexmarkBid, Schema: schema("url", tBigint), Timestamp: -1}, Out: schema("url", tBigint),
			Enc: plan.Encoding{Format: plan.FormatRow}}}), "field url cannot be read as BIGINT"},
		{"unknown format", config(t, &plan.Operator{Calc: &plan.Calc{
			In: plan.Decoding{Format: "xml", Schema: bidTable, Timestamp: -1}, Out: bidTable, Enc: plan.Encoding{Format: plan.FormatRow}}}), `input format "xml"`},
		{"unknown output format", config(t, &plan.Operator{Calc: &plan.Calc{
			In: bids, Out: bidTable, Enc: plan.Encoding{Format: "xml"}}}), `output format "xml"`},
		{"key out of range", config(t, &plan.Operator{Calc: &plan.Calc{
			In: bids, Out: bidTable, Enc: plan.Encoding{Format: plan.FormatRow, Key: []int{7}}}}), "key column 7"},
		{"event time not a timestamp", config(t, &plan.Operator{Calc: &plan.Calc{
			In: plan.Decoding{Format: plan.FormatNexmarkBid, Schema: bidTable, Timestamp: 0}, Out: bidTable,
			Enc: plan.Encoding{Format: plan.FormatRow}}}), "event-time column auction is BIGINT"},
	} {
		ctx := newSubtaskContext(tc.cfg)
		if err := (&Calc{}).Open(ctx); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Open = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// A corrupt event fails the subtask.
	s := openCalc(t, &plan.Calc{In: bids, Out: bidTable, Enc: plan.Encoding{Format: plan.FormatRow}})
	b := nexmark.Encode(bidEvent(1, 2, 3, "c", 4))
	for _, v := range [][]byte{{}, {9}, b[:len(b)-1], append(b, 0)} {
		if err := s.process(-1, sdk.Record{Value: v}); err == nil || !strings.Contains(err.Error(), "corrupt Nexmark event") {
			t.Errorf("event %x: %v, want it corrupt", v, err)
		}
	}
}

// TestCalcNexmarkGenerated decodes the generator's events of every kind
// as package nexmark's own decoder does: the Calc's scanner of the
// binary encoding is the codec's.
func TestCalcNexmarkGenerated(t *testing.T) {
	tables := map[nexmark.Kind]plan.Format{nexmark.KindBid: plan.FormatNexmarkBid, nexmark.KindAuction: plan.FormatNexmarkAuction, nexmark.KindPerson: plan.FormatNexmarkPerson}
	subs := map[nexmark.Kind]*subtask{}
	for k, f := range tables {
		var s plan.Schema
		for _, fld := range nexmarkTables[f].fields {
			s = append(s, plan.Column{Name: fld.name, Type: map[fieldKind]plan.Type{fieldInt: tBigint, fieldStr: tVarchar, fieldTime: tTime, fieldExpires: tTime}[fld.kind]})
		}
		subs[k] = openCalc(t, &plan.Calc{In: plan.Decoding{Format: f, Schema: s, Timestamp: -1}, Out: s, Enc: plan.Encoding{Format: plan.FormatCSV}})
	}
	for n := range int64(500) {
		e := nexmark.Generate(nexmark.Config{}, n)
		rec := eventRecord(e)
		d, err := nexmark.Decode(rec.Value)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range subs {
			s.record(-1, rec)
		}
		got := subs[e.Kind].take()
		if len(got) != 1 {
			t.Fatalf("event %d (%s): %d rows", n, e.Kind, len(got))
		}
		schema := subs[e.Kind].op.(*Calc).enc.schema
		r, err := row.ParseCSV(schema, got[0].Value, nil)
		if err != nil {
			t.Fatalf("event %d: %v", n, err)
		}
		// The generator's strings have no commas: the codec's CSV splits.
		fields := strings.Split(string(nexmark.AppendCSV(nil, d)), ",")
		for i, v := range r {
			want := fields[i]
			var gotText string
			switch schema[i].Type.Kind {
			case plan.Timestamp:
				gotText = strconv.FormatInt(v.Int()/1000, 10)
			case plan.Varchar:
				gotText = v.Str()
			default:
				gotText = strconv.FormatInt(v.Int(), 10)
			}
			if gotText != want {
				t.Fatalf("event %d (%s) column %d: %q, want %q", n, e.Kind, i, gotText, want)
			}
		}
		for k, s := range subs {
			if k != e.Kind && len(s.take()) > 0 {
				t.Fatalf("event %d (%s) made a %s row", n, e.Kind, k)
			}
		}
	}
}

// TestCalcShared evaluates a shared expression once per row, as column
// len(input) for the filter and the projection.
func TestCalcShared(t *testing.T) {
	in := schema("s", tVarchar, "n", tBigint)
	upper := plan.Call("upper", tVarchar, col(0, tVarchar))
	s := openCalc(t, &plan.Calc{
		In:      plan.Decoding{Format: plan.FormatRow, Schema: in, Timestamp: -1},
		Shared:  []plan.Expr{upper},
		Filter:  cmp("<>", col(2, tVarchar), lit(tVarchar, "NO")),
		Project: []plan.Expr{col(2, tVarchar), col(1, tBigint)},
		Out:     schema("u", tVarchar, "n", tBigint),
		Enc:     plan.Encoding{Format: plan.FormatCSV},
	})
	for i, v := range []string{"yes", "no", "maybe"} {
		s.record(-1, rowRecord(in, row.Row{row.Str(v), row.Int(int64(i))}, nil, 1))
	}
	if got := csvLines(s.take()); !reflect.DeepEqual(got, []string{"1: YES,0", "1: MAYBE,2"}) {
		t.Fatalf("rows %q", got)
	}
}

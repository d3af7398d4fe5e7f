package exchange_test

import (
	"bytes"
	"testing"

	"github.com/weirproject/weir/internal/exchange"
	"github.com/weirproject/weir/internal/state"
	"github.com/weirproject/weir/sdk"
)

// TestPackedRecordsRoundTrip: the packed layout keeps every key, value and
// timestamp, including empty keys and negative timestamps, and a decoded
// record cannot be grown into its neighbour.
func TestPackedRecordsRoundTrip(t *testing.T) {
	in := []sdk.Record{
		{Key: []byte("k1"), Value: []byte("v1"), Timestamp: 1700000000000},
		{Key: nil, Value: []byte("no key"), Timestamp: -5},
		{Key: bytes.Repeat([]byte("x"), 300), Value: nil},
	}
	data := exchange.AppendRecords(nil, in, false)
	out, err := exchange.DecodeRecords(data, len(in), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("decoded %d records, want %d", len(out), len(in))
	}
	for i := range in {
		if !bytes.Equal(out[i].Key, in[i].Key) || !bytes.Equal(out[i].Value, in[i].Value) || out[i].Timestamp != in[i].Timestamp {
			t.Errorf("record %d: got %+v, want %+v", i, out[i], in[i])
		}
	}
	_ = append(out[0].Key, 'Z')
	if !bytes.Equal(out[0].Value, []byte("v1")) {
		t.Errorf("appending to a key overwrote its value: %q", out[0].Value)
	}
}

func TestPackedRecordsCorrupt(t *testing.T) {
	data := exchange.AppendRecords(nil, []sdk.Record{{Key: []byte("key"), Value: []byte("value")}}, false)
	for _, c := range []struct {
		name  string
		data  []byte
		count int
	}{
		{"truncated", data[:len(data)-2], 1},
		{"count too high", data, 2},
		{"trailing bytes", append(data[:len(data):len(data)], 0), 1},
		{"negative count", data, -1},
		// Three bytes at least per record: refused before allocating
		// a million records for nine bytes.
		{"count the bytes cannot hold", make([]byte, 9), 1 << 20},
		{"one more than the bytes can hold", make([]byte, 9), 4},
	} {
		if _, err := exchange.DecodeRecords(c.data, c.count, false); err == nil {
			t.Errorf("%s: decoded without an error", c.name)
		}
	}
	withHeaders := exchange.AppendRecords(nil, []sdk.Record{{Key: []byte("k"), Headers: []sdk.Header{{Key: "h", Value: []byte("v")}}}}, true)
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"header truncated", withHeaders[:len(withHeaders)-1]},
		{"header count too high", append(withHeaders[:len(withHeaders)-5:len(withHeaders)-5], 100)},
		{"headers missing", data},
	} {
		if _, err := exchange.DecodeRecords(c.data, 1, true); err == nil {
			t.Errorf("%s: decoded without an error", c.name)
		}
	}
}

// TestPackedRecordsHeaders: a batch with headers keeps every header, in
// order, repeated keys and empty values included, across the wire and in
// channel state; a batch without any carries no header bytes.
func TestPackedRecordsHeaders(t *testing.T) {
	in := []sdk.Record{
		{Key: []byte("k1"), Value: []byte("v1"), Timestamp: 7, Headers: []sdk.Header{{Key: "trace", Value: []byte("abc")}, {Key: "trace", Value: nil}, {Key: "", Value: []byte("x")}}},
		{Key: []byte("k2"), Value: []byte("v2")},
	}
	for _, via := range []string{"wire", "channel state"} {
		var out []sdk.Record
		switch via {
		case "wire":
			b, err := exchange.FromProto(exchange.Buffer{Kind: exchange.KindRecords, Records: in}.ToProto())
			if err != nil {
				t.Fatal(err)
			}
			out = b.Records
		case "channel state":
			out = state.Records(state.InFlightBatch(in))
		}
		if len(out) != len(in) {
			t.Fatalf("%s: %d records, want %d", via, len(out), len(in))
		}
		for i := range in {
			if len(out[i].Headers) != len(in[i].Headers) {
				t.Fatalf("%s: record %d: headers %+v, want %+v", via, i, out[i].Headers, in[i].Headers)
			}
			for j, h := range in[i].Headers {
				if got := out[i].Headers[j]; got.Key != h.Key || !bytes.Equal(got.Value, h.Value) {
					t.Errorf("%s: record %d header %d: %+v, want %+v", via, i, j, got, h)
				}
			}
		}
	}
	plain := []sdk.Record{{Key: []byte("k"), Value: []byte("v")}}
	if m := (exchange.Buffer{Kind: exchange.KindRecords, Records: plain}).ToProto(); m.GetPacked().GetHeaders() ||
		len(m.GetPacked().GetData()) != len(exchange.AppendRecords(nil, plain, false)) {
		t.Errorf("a batch without headers was sent with them: %v", m.GetPacked())
	}
}

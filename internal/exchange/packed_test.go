package exchange_test

import (
	"bytes"
	"testing"

	"github.com/weirproject/weir/internal/exchange"
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
	data := exchange.AppendRecords(nil, in)
	out, err := exchange.DecodeRecords(data, len(in))
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
	data := exchange.AppendRecords(nil, []sdk.Record{{Key: []byte("key"), Value: []byte("value")}})
	for _, c := range []struct {
		name  string
		data  []byte
		count int
	}{
		{"truncated", data[:len(data)-2], 1},
		{"count too high", data, 2},
		{"trailing bytes", append(data[:len(data):len(data)], 0), 1},
		{"negative count", data, -1},
	} {
		if _, err := exchange.DecodeRecords(c.data, c.count); err == nil {
			t.Errorf("%s: decoded without an error", c.name)
		}
	}
}

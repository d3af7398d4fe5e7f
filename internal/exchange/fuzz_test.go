package exchange_test

import (
	"bytes"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/exchange"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// fuzzRecords are records as operators emit them: keyed and unkeyed,
// empty values, headers, timestamps of either sign.
var fuzzRecords = []sdk.Record{
	{Key: []byte("user-1"), Value: []byte("42"), Timestamp: 1_700_000_000_000},
	{Key: nil, Value: []byte("no key"), Timestamp: -5},
	{Key: []byte("k"), Value: nil},
	{Key: []byte("h"), Value: []byte("v"), Headers: []sdk.Header{{Key: "trace", Value: []byte("0af7651916cd43dd")}, {Key: "empty"}}},
	{Key: bytes.Repeat([]byte{0xff}, 200), Value: bytes.Repeat([]byte("x"), 300), Timestamp: 1},
}

// FuzzDecodeRecords decodes arbitrary packed record batches, the payload
// of every data message a TaskManager receives from a peer: a corrupt or
// hostile batch must be an error, never a panic or a huge allocation, and
// a batch that decodes must re-encode to one that decodes the same.
func FuzzDecodeRecords(f *testing.F) {
	for _, headers := range []bool{false, true} {
		for _, recs := range [][]sdk.Record{fuzzRecords, fuzzRecords[:1], fuzzRecords[3:4], nil} {
			data := exchange.AppendRecords(nil, recs, headers)
			f.Add(data, len(recs), headers)
			if len(data) > 0 {
				f.Add(data[:len(data)-1], len(recs), headers)
			}
			f.Add(data, len(recs)+1, headers)
		}
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 1, false)
	f.Add([]byte{0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x0f}, 1, true)
	f.Add([]byte{0x00, 0x00, 0x00}, -1, false)
	f.Fuzz(func(t *testing.T, data []byte, count int, headers bool) {
		recs, err := exchange.DecodeRecords(data, count, headers)
		if err != nil {
			if recs != nil {
				t.Fatalf("records %v returned with error %v", recs, err)
			}
			return
		}
		if len(recs) != count {
			t.Fatalf("decoded %d records, want %d", len(recs), count)
		}
		checkReencodes(t, recs, headers)
	})
}

// checkReencodes checks recs survive the wire: encoded and decoded again
// they are the same records. (The bytes may differ from what was decoded:
// a varint may be written longer than needed.)
func checkReencodes(t *testing.T, recs []sdk.Record, headers bool) {
	t.Helper()
	again, err := exchange.DecodeRecords(exchange.AppendRecords(nil, recs, headers), len(recs), headers)
	if err != nil {
		t.Fatalf("re-decoding decoded records: %v", err)
	}
	if !slices.EqualFunc(recs, again, sameRecord) {
		t.Fatalf("records changed on the way back\n got: %v\nwant: %v", again, recs)
	}
}

func sameRecord(a, b sdk.Record) bool {
	return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) && a.Timestamp == b.Timestamp &&
		slices.EqualFunc(a.Headers, b.Headers, func(x, y sdk.Header) bool { return x.Key == y.Key && bytes.Equal(x.Value, y.Value) })
}

// FuzzFromProto decodes arbitrary data-exchange messages as the receiving
// side of a remote channel does, protobuf first: every kind, packed and
// unpacked record batches, events with missing fields.
func FuzzFromProto(f *testing.F) {
	for _, b := range []exchange.Buffer{
		{Kind: exchange.KindRecords, Records: fuzzRecords},
		{Kind: exchange.KindRecords, Records: fuzzRecords[:3]},
		{Kind: exchange.KindBarrier, Barrier: &weirv1.CheckpointBarrier{CheckpointId: 7, TimestampMs: 1_700_000_000_000}, Priority: true},
		{Kind: exchange.KindCancelMarker, CheckpointID: 7},
		{Kind: exchange.KindEndOfData},
		{Kind: exchange.KindEndOfPartition},
		{Kind: exchange.KindWatermark, Watermark: 1_700_000_000_000},
		{Kind: exchange.KindWatermarkStatus, Idle: true},
	} {
		data, err := proto.Marshal(b.ToProto())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// The unpacked batch form, which older senders used.
	batch := &weirv1.ExchangeMessage{Kind: &weirv1.ExchangeMessage_Batch{Batch: &weirv1.RecordBatch{
		Records: []*weirv1.Record{{Key: []byte("k"), Value: []byte("v"), Timestamp: 3, Headers: []*weirv1.RecordHeader{{Key: "h", Value: []byte("x")}}}},
	}}}
	data, err := proto.Marshal(batch)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := &weirv1.ExchangeMessage{}
		if err := proto.Unmarshal(data, m); err != nil {
			return
		}
		b, err := exchange.FromProto(m)
		if err != nil {
			return
		}
		if b.Priority != m.GetPriority() {
			t.Fatalf("priority %v, message says %v", b.Priority, m.GetPriority())
		}
		// What was received goes out again the same when forwarded.
		again, err := exchange.FromProto(b.ToProto())
		if err != nil {
			t.Fatalf("re-decoding a decoded %v buffer: %v", b.Kind, err)
		}
		if again.Kind != b.Kind || again.CheckpointID != b.CheckpointID || again.Watermark != b.Watermark ||
			again.Idle != b.Idle || again.Priority != b.Priority || !proto.Equal(again.Barrier, b.Barrier) ||
			!slices.EqualFunc(again.Records, b.Records, sameRecord) {
			t.Fatalf("buffer changed on the way back\n got: %+v\nwant: %+v", again, b)
		}
	})
}

package exchange

import (
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// benchBatch is a full batch of the running-sum job's records: short
// decimal keys and values.
func benchBatch() Buffer {
	recs := make([]sdk.Record, 256)
	for i := range recs {
		recs[i] = sdk.Record{Key: strconv.AppendInt(nil, int64(i%16), 10), Value: strconv.AppendInt(nil, int64(1000000+i), 10)}
	}
	return Buffer{Kind: KindRecords, Records: recs}
}

// BenchmarkWire is one records batch through what a remote channel does
// to it: convert, marshal, unmarshal, convert back. "packed" is the wire
// format; "per-record" the RecordBatch of one message per record that
// receivers still accept.
func BenchmarkWire(b *testing.B) {
	batch := benchBatch()
	perRecord := func(bf Buffer) *weirv1.ExchangeMessage {
		recs := make([]*weirv1.Record, len(bf.Records))
		for i, r := range bf.Records {
			recs[i] = &weirv1.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
		}
		return &weirv1.ExchangeMessage{Kind: &weirv1.ExchangeMessage_Batch{Batch: &weirv1.RecordBatch{Records: recs}}}
	}
	for _, c := range []struct {
		name string
		conv func(Buffer) *weirv1.ExchangeMessage
	}{{"packed", Buffer.ToProto}, {"per-record", perRecord}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				data, err := proto.Marshal(c.conv(batch))
				if err != nil {
					b.Fatal(err)
				}
				size = len(data)
				m := &weirv1.ExchangeMessage{}
				if err := proto.Unmarshal(data, m); err != nil {
					b.Fatal(err)
				}
				got, err := FromProto(m)
				if err != nil || len(got.Records) != len(batch.Records) {
					b.Fatalf("decoded %d records, err %v", len(got.Records), err)
				}
			}
			b.ReportMetric(float64(b.N*len(batch.Records))/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(size)/float64(len(batch.Records)), "bytes/record")
		})
	}
}

package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/internal/kafka/kafkatest"
	"github.com/weirproject/weir/sdk"
)

// TestSinkTombstonesEmptyKey: an upsert sink's key is never absent, but
// an empty one (a CSV key of a NULL column) crosses the network as nil,
// as the exchange decodes a zero length. Written as is, nil is Kafka's
// null key: the record goes to a sticky partition instead of its key's
// (the key's other records are elsewhere, so a consumer loses their
// order), and a null-keyed record, a tombstone above all, is refused by
// a compacted topic, failing the transaction. With tombstones, records
// with an empty key and with a nil one are written alike: an empty key,
// hashed to one partition.
func TestSinkTombstonesEmptyKey(t *testing.T) {
	_, addr := sinkBroker(t) // 3 partitions
	cfg := eoConfig(addr)
	cfg["tombstones"] = true
	s, _ := openSink(t, cfg, 0, 1, nil)
	recs := []sdk.Record{
		{Key: []byte{}, Value: []byte("x")}, // chained: the encoder's empty key
		{Key: nil, Value: []byte("y")},      // the same key, through the network
		{Key: nil, Value: nil},              // its tombstone, through the network
		{Key: []byte{}, Value: []byte{}},    // its tombstone, chained
	}
	for i, r := range recs {
		if err := s.ProcessRecord(r, nil); err != nil {
			t.Fatal(err)
		}
		// One batch per record: a sticky partitioner may move on.
		if err := s.SnapshotState(int64(i + 1)); err != nil {
			t.Fatal(err)
		}
		if err := s.NotifyCheckpointComplete(int64(i + 1)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := kafkatest.ReadCommitted(ctx, "out", kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	var data []*kgo.Record
	for _, r := range got {
		if !r.Attrs.IsControl() {
			data = append(data, r)
		}
	}
	if len(data) != len(recs) {
		t.Fatalf("read %d records, want %d", len(data), len(recs))
	}
	for _, r := range data {
		if r.Key == nil {
			t.Errorf("record %q written with a null key (partition %d), want the empty key", r.Value, r.Partition)
		}
		if r.Partition != data[0].Partition {
			t.Errorf("record %q in partition %d, the key's others in %d", r.Value, r.Partition, data[0].Partition)
		}
	}
	tombs := 0
	for _, r := range data {
		if r.Value == nil {
			tombs++
		}
	}
	if tombs != 2 {
		t.Errorf("%d tombstones, want 2", tombs)
	}
}

package exchange_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weirproject/weir/internal/exchange"
	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// drain takes everything queued in sub.
func drain(sub *exchange.Subpartition) []exchange.Buffer {
	var out []exchange.Buffer
	for {
		b, _, ok := sub.Poll()
		if !ok {
			return out
		}
		out = append(out, b)
	}
}

// flat lists a subpartition's content as record keys and event names.
func flat(bufs []exchange.Buffer) []string {
	var out []string
	for _, b := range bufs {
		if b.Kind != exchange.KindRecords {
			out = append(out, describe(b))
			continue
		}
		if len(b.Records) == 0 {
			out = append(out, "empty-batch")
		}
		for _, r := range b.Records {
			out = append(out, string(r.Key))
		}
	}
	return out
}

func key(i int) sdk.Record {
	return sdk.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: []byte("v")}
}

// Hash partitioning sends every key to the subpartition that owns its key
// group, so keyed state and records meet on the same subtask.
func TestRecordWriterHash(t *testing.T) {
	for _, tc := range []struct{ maxP, n, batch int }{{128, 4, 1000}, {128, 3, 1}, {7, 5, 3}, {1, 1, 2}} {
		t.Run(fmt.Sprintf("maxP=%d/n=%d/batch=%d", tc.maxP, tc.n, tc.batch), func(t *testing.T) {
			part := exchange.NewResultPartition(partitionID("hash"), tc.n, 1000, 0)
			w := exchange.NewRecordWriter(t.Context(), part, weirv1.Partitioner_PARTITIONER_HASH, tc.maxP, 0, tc.batch)
			const total = 500
			want := make([][]string, tc.n)
			for i := range total {
				r := key(i)
				if err := w.Emit(r); err != nil {
					t.Fatal(err)
				}
				owner := keygroup.OperatorIndex(keygroup.Of(r.Key, tc.maxP), tc.maxP, tc.n)
				want[owner] = append(want[owner], string(r.Key))
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			got := 0
			for i, sub := range part.Subs {
				bufs := drain(sub)
				for _, b := range bufs {
					if len(b.Records) > tc.batch {
						t.Fatalf("subpartition %d: batch of %d records, limit %d", i, len(b.Records), tc.batch)
					}
				}
				keys := flat(bufs)
				for j, k := range keys {
					if j >= len(want[i]) || k != want[i][j] {
						t.Fatalf("subpartition %d: record %d is %s, want %v", i, j, k, want[i][j:min(j+1, len(want[i]))])
					}
				}
				if len(keys) != len(want[i]) {
					t.Fatalf("subpartition %d got %d records, want %d", i, len(keys), len(want[i]))
				}
				got += len(keys)
			}
			if got != total {
				t.Fatalf("%d records delivered, want %d", got, total)
			}
			if tc.n > 1 && tc.maxP >= tc.n {
				for i := range want {
					if len(want[i]) == 0 {
						t.Fatalf("no key went to subpartition %d; the test keys do not exercise routing", i)
					}
				}
			}
		})
	}
}

// Rebalance deals records round-robin, starting at the producer's own
// subtask index so producers do not all start on the same consumer.
func TestRecordWriterRebalance(t *testing.T) {
	const n = 3
	for _, subtask := range []int{0, 1, 5} {
		t.Run(fmt.Sprintf("subtask=%d", subtask), func(t *testing.T) {
			part := exchange.NewResultPartition(partitionID("rebalance"), n, 100, 0)
			w := exchange.NewRecordWriter(t.Context(), part, weirv1.Partitioner_PARTITIONER_REBALANCE, 128, subtask, 2)
			want := make([][]string, n)
			for i := range 10 {
				if err := w.Emit(key(i)); err != nil {
					t.Fatal(err)
				}
				sub := (subtask + i) % n
				want[sub] = append(want[sub], string(key(i).Key))
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			for i, sub := range part.Subs {
				if got := flat(drain(sub)); !slices.Equal(got, want[i]) {
					t.Fatalf("subpartition %d got %v, want %v", i, got, want[i])
				}
			}
		})
	}
}

// Broadcast partitioning sends every record to every subpartition.
func TestRecordWriterBroadcastPartitioner(t *testing.T) {
	const n = 3
	part := exchange.NewResultPartition(partitionID("broadcast"), n, 100, 0)
	w := exchange.NewRecordWriter(t.Context(), part, weirv1.Partitioner_PARTITIONER_BROADCAST, 128, 1, 2)
	var want []string
	for i := range 5 {
		if err := w.Emit(key(i)); err != nil {
			t.Fatal(err)
		}
		want = append(want, string(key(i).Key))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, sub := range part.Subs {
		if got := flat(drain(sub)); !slices.Equal(got, want) {
			t.Fatalf("subpartition %d got %v, want %v", i, got, want)
		}
	}
}

// Forward partitioning writes to the single subpartition.
func TestRecordWriterForward(t *testing.T) {
	part := exchange.NewResultPartition(partitionID("forward"), 1, 100, 0)
	w := exchange.NewRecordWriter(t.Context(), part, weirv1.Partitioner_PARTITIONER_FORWARD, 128, 4, 10)
	for i := range 3 {
		if err := w.Emit(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := flat(drain(part.Subs[0])), []string{"key-0", "key-1", "key-2"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// Broadcasting an event first flushes the records batched before it, on
// every subpartition, so the event stays behind them; subpartitions with
// nothing pending get only the event, and no empty batches.
func TestRecordWriterBroadcastEventFlushesFirst(t *testing.T) {
	const n = 3
	part := exchange.NewResultPartition(partitionID("events"), n, 100, 0)
	w := exchange.NewRecordWriter(t.Context(), part, weirv1.Partitioner_PARTITIONER_REBALANCE, 128, 0, 100)
	emit := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := w.Emit(key(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	emit(0, 2) // key-0 → 0, key-1 → 1; subpartition 2 has nothing pending
	if err := w.Broadcast(exchange.Buffer{Kind: exchange.KindBarrier, Barrier: &weirv1.CheckpointBarrier{CheckpointId: 1}}); err != nil {
		t.Fatal(err)
	}
	emit(2, 6) // key-2 → 2, key-3 → 0, key-4 → 1, key-5 → 2
	if err := w.Broadcast(exchange.Buffer{Kind: exchange.KindCancelMarker, CheckpointID: 2}); err != nil {
		t.Fatal(err)
	}
	if err := w.Broadcast(exchange.Buffer{Kind: exchange.KindEndOfData}); err != nil {
		t.Fatal(err)
	}
	emit(6, 7) // key-6 → 0
	if err := w.Broadcast(exchange.Buffer{Kind: exchange.KindEndOfPartition}); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"key-0", "barrier(1)", "key-3", "cancel(2)", "end-of-data", "key-6", "end-of-partition"},
		{"key-1", "barrier(1)", "key-4", "cancel(2)", "end-of-data", "end-of-partition"},
		{"barrier(1)", "key-2", "key-5", "cancel(2)", "end-of-data", "end-of-partition"},
	}
	for i, sub := range part.Subs {
		if got := flat(drain(sub)); !slices.Equal(got, want[i]) {
			t.Fatalf("subpartition %d got %v, want %v", i, got, want[i])
		}
	}
}

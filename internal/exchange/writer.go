package exchange

import (
	"context"
	"fmt"
	"time"

	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// RecordWriter batches a subtask's output records per subpartition and
// routes them by the edge's partitioner.
type RecordWriter struct {
	ctx            context.Context
	subs           []*Subpartition
	partitioner    weirv1.Partitioner
	maxParallelism int
	batchSize      int
	pending        [][]sdk.Record
	next           int // round-robin position for rebalance

	// Backpressured accumulates the time Emit and Flush were blocked.
	Backpressured time.Duration
}

// NewRecordWriter writes into part. subtask seeds rebalance so producers do
// not all start on the same consumer.
func NewRecordWriter(ctx context.Context, part *ResultPartition, p weirv1.Partitioner, maxParallelism, subtask, batchSize int) *RecordWriter {
	return &RecordWriter{
		ctx: ctx, subs: part.Subs, partitioner: p, maxParallelism: maxParallelism,
		batchSize: batchSize, pending: make([][]sdk.Record, len(part.Subs)), next: subtask % len(part.Subs),
	}
}

// Emit routes one record; it blocks only when a full batch meets a full queue.
func (w *RecordWriter) Emit(r sdk.Record) error {
	switch w.partitioner {
	case weirv1.Partitioner_PARTITIONER_BROADCAST:
		for i := range w.pending {
			if err := w.append(i, r); err != nil {
				return err
			}
		}
		return nil
	case weirv1.Partitioner_PARTITIONER_HASH:
		kg := keygroup.Of(r.Key, w.maxParallelism)
		return w.append(keygroup.OperatorIndex(kg, w.maxParallelism, len(w.subs)), r)
	case weirv1.Partitioner_PARTITIONER_REBALANCE:
		i := w.next
		w.next = (w.next + 1) % len(w.subs)
		return w.append(i, r)
	default: // forward: exactly one subpartition
		return w.append(0, r)
	}
}

func (w *RecordWriter) append(i int, r sdk.Record) error {
	w.pending[i] = append(w.pending[i], r)
	if len(w.pending[i]) >= w.batchSize {
		return w.flush(i)
	}
	return nil
}

func (w *RecordWriter) flush(i int) error {
	if len(w.pending[i]) == 0 {
		return nil
	}
	b := Buffer{Kind: KindRecords, Records: w.pending[i]}
	w.pending[i] = make([]sdk.Record, 0, w.batchSize)
	return w.add(i, b)
}

func (w *RecordWriter) add(i int, b Buffer) error {
	blocked, err := w.subs[i].Add(w.ctx, b)
	w.Backpressured += blocked
	if err != nil {
		return fmt.Errorf("exchange: write %s: %w", b.Kind, err)
	}
	return nil
}

// Flush sends every partly filled batch.
func (w *RecordWriter) Flush() error {
	for i := range w.pending {
		if err := w.flush(i); err != nil {
			return err
		}
	}
	return nil
}

// Broadcast sends an event to every consumer, behind the records emitted
// before it.
func (w *RecordWriter) Broadcast(b Buffer) error {
	for i := range w.subs {
		if err := w.flush(i); err != nil {
			return err
		}
		if err := w.add(i, b); err != nil {
			return err
		}
	}
	return nil
}

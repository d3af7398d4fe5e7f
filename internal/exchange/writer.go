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

// Emit routes one record; it blocks only when a full batch meets a queue
// at its limit (capacity plus overdraft).
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

// take removes subpartition i's pending batch, nil when there is none.
func (w *RecordWriter) take(i int) (Buffer, bool) {
	if len(w.pending[i]) == 0 {
		return Buffer{}, false
	}
	b := Buffer{Kind: KindRecords, Records: w.pending[i]}
	w.pending[i] = GetRecords(w.batchSize)
	return b, true
}

func (w *RecordWriter) flush(i int) error {
	b, ok := w.take(i)
	if !ok {
		return nil
	}
	blocked, err := w.subs[i].Add(w.ctx, b)
	w.Backpressured += blocked
	if err != nil {
		return fmt.Errorf("exchange: write %s: %w", b.Kind, err)
	}
	return nil
}

// Flush sends every partly filled batch, blocking like Emit.
func (w *RecordWriter) Flush() error {
	for i := range w.pending {
		if err := w.flush(i); err != nil {
			return err
		}
	}
	return nil
}

// FlushAvailable sends the partly filled batches of the subpartitions that
// are below capacity and keeps the others' for later; it never blocks.
func (w *RecordWriter) FlushAvailable() error {
	for i, s := range w.subs {
		if len(w.pending[i]) == 0 || !s.Available() {
			continue
		}
		if err := w.put(i); err != nil {
			return err
		}
	}
	return nil
}

// put queues subpartition i's pending batch without blocking.
func (w *RecordWriter) put(i int) error {
	b, ok := w.take(i)
	if !ok {
		return nil
	}
	if err := w.subs[i].Put(b); err != nil {
		return fmt.Errorf("exchange: write %s: %w", b.Kind, err)
	}
	return nil
}

// Available reports whether every subpartition is below capacity: any
// record may go to any of them, so new work waits for all.
func (w *RecordWriter) Available() bool {
	for _, s := range w.subs {
		if !s.Available() {
			return false
		}
	}
	return true
}

// SetAvailabilityListener installs f as every subpartition's wake-up for
// when it falls below capacity.
func (w *RecordWriter) SetAvailabilityListener(f func()) {
	for _, s := range w.subs {
		s.SetAvailabilityListener(f)
	}
}

// Broadcast sends an event to every consumer, behind the records emitted
// before it. It never blocks: the batch the event flushes ahead of itself
// and the event go in past a full queue (both are bounded: one partial
// batch per event).
func (w *RecordWriter) Broadcast(b Buffer) error {
	for i := range w.subs {
		if err := w.put(i); err != nil {
			return err
		}
		if err := w.subs[i].Put(b); err != nil {
			return fmt.Errorf("exchange: write %s: %w", b.Kind, err)
		}
	}
	return nil
}

// BroadcastPriority sends event b to every consumer ahead of everything
// queued for it, without blocking. It returns, per subpartition, the
// records b overtook in order: the queued buffers, then the batch not yet
// queued. They are still delivered, after b; the caller records them as
// the output state of b's checkpoint.
func (w *RecordWriter) BroadcastPriority(b Buffer) ([][]Buffer, error) {
	b.Priority = true
	out := make([][]Buffer, len(w.subs))
	for i, s := range w.subs {
		overtaken, err := s.AddPriority(b)
		if err != nil {
			return nil, fmt.Errorf("exchange: write %s: %w", b.Kind, err)
		}
		if len(w.pending[i]) > 0 {
			// The records stay pending; the caller gets a copy, as the
			// batch is released once its consumer processed it.
			overtaken = append(overtaken, Buffer{Kind: KindRecords, Records: append([]sdk.Record(nil), w.pending[i]...)})
		}
		out[i] = overtaken
	}
	return out, nil
}

// ConvertBarrier turns the barrier of checkpoint id into a priority event
// in every subpartition that still holds it (see
// Subpartition.ConvertBarrier). It returns, per subpartition, the records
// it overtook, and whether any subpartition still held it. The batches not
// yet queued came after the barrier and are not overtaken.
func (w *RecordWriter) ConvertBarrier(id int64, convert func(*weirv1.CheckpointBarrier) *weirv1.CheckpointBarrier) ([][]Buffer, bool) {
	out := make([][]Buffer, len(w.subs))
	held := false
	for i, s := range w.subs {
		var ok bool
		out[i], ok = s.ConvertBarrier(id, convert)
		held = held || ok
	}
	return out, held
}

// HoldsBarrier reports whether any subpartition still queues the barrier
// of checkpoint id.
func (w *RecordWriter) HoldsBarrier(id int64) bool {
	for _, s := range w.subs {
		if s.HoldsBarrier(id) {
			return true
		}
	}
	return false
}

// Restore queues recovered output state ahead of anything the subpartition
// is sent later: batches[i] goes to subpartition i. It never blocks.
func (w *RecordWriter) Restore(batches [][]Buffer) error {
	if len(batches) != len(w.subs) {
		return fmt.Errorf("exchange: restore output state of %d subpartitions into %d", len(batches), len(w.subs))
	}
	for i, bs := range batches {
		for _, b := range bs {
			if err := w.subs[i].Put(b); err != nil {
				return fmt.Errorf("exchange: restore output state: %w", err)
			}
		}
	}
	return nil
}

// NumSubpartitions is the number of consumers the writer feeds.
func (w *RecordWriter) NumSubpartitions() int { return len(w.subs) }

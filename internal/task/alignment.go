package task

import (
	"time"

	"github.com/weirproject/weir/internal/barrier"
	"github.com/weirproject/weir/internal/exchange"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// apply carries out a barrier handler decision made at now. overtaken, if
// set, is called once the snapshot is taken, with the channel state being
// recorded, so the event's caller can add what the barrier overtook.
func (t *Task) apply(d barrier.Decision, now time.Time, overtaken func(*channelRecorder)) error {
	for _, id := range d.AbortedIDs() {
		if id == 0 {
			continue
		}
		if t.rec != nil && t.rec.id == id {
			t.rec.abort()
			t.rec = nil
		}
		t.decline(id, d.AbortReason, "alignment ended without all barriers")
		if err := t.broadcast(exchange.Buffer{Kind: exchange.KindCancelMarker, CheckpointID: id}); err != nil {
			return err
		}
	}
	if d.Started != 0 {
		t.align.start, t.align.processed = now, 0
	}
	if d.Snapshot != nil {
		if d.TimedOut {
			t.log.Info("alignment timed out; checkpoint continues unaligned", "checkpoint_id", d.Snapshot.GetCheckpointId(),
				"alignment", now.Sub(t.align.start))
		}
		if err := t.checkpoint(d.Snapshot, t.align.start, now, d.Unaligned); err != nil {
			return err
		}
	}
	if overtaken != nil && t.rec != nil {
		overtaken(t.rec)
	}
	if t.barriers != nil && t.barriers.Aligning() != 0 {
		id := t.barriers.Aligning()
		received, channels := t.barriers.Arrived()
		t.progress.advance(id, weirv1.CheckpointPhase_CHECKPOINT_PHASE_ALIGNING, received, channels)
	}
	if d.Completed != 0 {
		alignment := now.Sub(t.align.start)
		if len(t.inputs) <= 1 {
			alignment = 0
		}
		t.metrics.alignment.Observe(alignment.Seconds())
		if t.rec != nil && t.rec.id == d.Completed {
			t.rec.finish(alignment, t.align.processed)
			t.rec = nil
		}
	}
	return nil
}

// outputTimeout is an aligned-timeout checkpoint whose barrier went out
// aligned and may still wait in an output queue.
type outputTimeout struct {
	id       int64
	deadline time.Time
	rec      *channelRecorder
	// alignment and processed are the snapshot's measurements.
	alignment time.Duration
	processed int64
}

// modeOf is barrier b's mode; b's options, or the subtask's.
func (t *Task) modeOf(b *weirv1.CheckpointBarrier) (barrier.Mode, time.Duration) {
	if b.GetOptions() == nil {
		return barrier.ModeOf(t.desc.GetCheckpointOptions())
	}
	return barrier.ModeOf(b.GetOptions())
}

func (t *Task) holdsBarrier(id int64) bool {
	for _, w := range t.writers {
		if w.HoldsBarrier(id) {
			return true
		}
	}
	return false
}

// settleOutput completes the output state of the aligned-timeout
// checkpoint whose barrier may wait in the output queues: with convert,
// every queue still holding the barrier puts it ahead as an unaligned one
// and the records it overtook become the checkpoint's output state.
func (t *Task) settleOutput(convert bool) {
	o := t.outTO
	if o == nil {
		return
	}
	t.outTO = nil
	if convert {
		for i, w := range t.writers {
			overtaken, held := w.ConvertBarrier(o.id, barrier.ToUnaligned)
			o.rec.unaligned = o.rec.unaligned || held
			for sub, bufs := range overtaken {
				for _, b := range bufs {
					o.rec.addOutput(i, sub, b)
				}
			}
		}
		if o.rec.unaligned {
			t.metrics.unaligned.Inc()
			t.log.Info("barrier waited in the output longer than the aligned checkpoint timeout; sent ahead unaligned",
				"checkpoint_id", o.id, "persisted_bytes", o.rec.bytes)
		}
	}
	o.rec.finish(o.alignment, o.processed)
}

// abortChannelState gives up the channel state being recorded, if any.
func (t *Task) abortChannelState() {
	if t.rec != nil {
		t.rec.abort()
		t.rec = nil
	}
	if t.outTO != nil {
		t.outTO.rec.abort()
		t.outTO = nil
	}
}

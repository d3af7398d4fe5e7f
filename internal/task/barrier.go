package task

import (
	"fmt"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// BarrierHandler decides, from the barriers and markers arriving on a
// subtask's input channels, when to snapshot and which channels to hold
// back. It is a pure state machine: the subtask feeds it events and acts on
// the returned Decision; it never reads a clock or touches a channel.
//
// Aligned (exactly-once): a channel that delivered barrier n is blocked
// until n arrived on every channel still open, then the subtask snapshots
// and every channel is released. At-least-once: nothing is blocked; the
// subtask snapshots when n arrived on every channel. A newer barrier or a
// cancel marker ends the alignment of an older checkpoint.
type BarrierHandler struct {
	exactlyOnce bool
	open        []bool // channel has not delivered end-of-partition
	// current is the checkpoint being aligned, 0 when idle.
	current int64
	barrier *weirv1.CheckpointBarrier
	arrived []bool
	// latest is the newest checkpoint seen, so late barriers are ignored.
	latest int64
}

// Decision is what the subtask must do after an event.
type Decision struct {
	// Aborted is a checkpoint whose alignment ended without a snapshot; the
	// subtask declines it and forwards a cancel marker.
	Aborted int64
	// AbortReason says why Aborted was given up.
	AbortReason weirv1.CheckpointFailureReason
	// Cancelled is a newer checkpoint a cancel marker ended while an older
	// one (Aborted) was aligning; the subtask declines it and forwards its
	// cancel marker too, so consumers already aligning it are released.
	Cancelled int64
	// Started is set when the first barrier of a checkpoint arrived.
	Started int64
	// Snapshot is the barrier to snapshot and forward now.
	Snapshot *weirv1.CheckpointBarrier
}

// NewBarrierHandler handles n input channels.
func NewBarrierHandler(n int, exactlyOnce bool) *BarrierHandler {
	h := &BarrierHandler{exactlyOnce: exactlyOnce, open: make([]bool, n), arrived: make([]bool, n)}
	for i := range h.open {
		h.open[i] = true
	}
	return h
}

// Blocked reports whether channel ch must not be read now.
func (h *BarrierHandler) Blocked(ch int) bool {
	return h.exactlyOnce && h.current != 0 && h.arrived[ch]
}

// Aligning returns the checkpoint being aligned, 0 if none.
func (h *BarrierHandler) Aligning() int64 { return h.current }

// OnBarrier handles barrier b arriving on channel ch.
func (h *BarrierHandler) OnBarrier(ch int, b *weirv1.CheckpointBarrier) (Decision, error) {
	if err := h.check(ch); err != nil {
		return Decision{}, err
	}
	id := b.GetCheckpointId()
	var d Decision
	switch {
	case id < h.current || (h.current == 0 && id <= h.latest):
		// Late barrier of a checkpoint already completed or aborted here.
		return d, nil
	case id > h.current && h.current != 0:
		d.Aborted, d.AbortReason = h.current, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED_SUBSUMED
		h.reset()
	}
	if h.current == 0 {
		h.current, h.latest, h.barrier = id, id, b
		d.Started = id
	}
	if h.arrived[ch] {
		return d, fmt.Errorf("task: barrier %d arrived twice on channel %d", id, ch)
	}
	h.arrived[ch] = true
	if h.complete() {
		d.Snapshot = b
		h.reset()
	}
	return d, nil
}

// OnCancelMarker handles a cancel marker for checkpoint id on channel ch.
func (h *BarrierHandler) OnCancelMarker(ch int, id int64) (Decision, error) {
	if err := h.check(ch); err != nil {
		return Decision{}, err
	}
	var d Decision
	switch {
	case id == h.current:
		d.Aborted = id
		h.reset()
	case id > h.current:
		if h.current != 0 {
			// A marker for a newer checkpoint also ends the older alignment.
			d.Aborted = h.current
			h.reset()
		}
		if id > h.latest {
			h.latest = id
			if d.Aborted == 0 {
				d.Aborted = id
			} else {
				// The newer checkpoint is cancelled here as well: its marker
				// must travel on, or a consumer that got its barrier from
				// another input would align it until the next checkpoint.
				d.Cancelled = id
			}
		}
	}
	if d.Aborted != 0 {
		d.AbortReason = weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER
	}
	return d, nil
}

// OnEndOfPartition handles the end of channel ch: it counts as having
// delivered every later barrier.
func (h *BarrierHandler) OnEndOfPartition(ch int) (Decision, error) {
	if err := h.check(ch); err != nil {
		return Decision{}, err
	}
	h.open[ch] = false
	var d Decision
	if h.current != 0 && h.complete() {
		d.Snapshot = h.barrier
		h.reset()
	}
	return d, nil
}

func (h *BarrierHandler) check(ch int) error {
	if ch < 0 || ch >= len(h.open) {
		return fmt.Errorf("task: no input channel %d", ch)
	}
	if !h.open[ch] {
		return fmt.Errorf("task: event on channel %d after its end of partition", ch)
	}
	return nil
}

func (h *BarrierHandler) complete() bool {
	for i, open := range h.open {
		if open && !h.arrived[i] {
			return false
		}
	}
	return true
}

func (h *BarrierHandler) reset() {
	h.current, h.barrier = 0, nil
	for i := range h.arrived {
		h.arrived[i] = false
	}
}

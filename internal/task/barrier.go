package task

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Mode is how a subtask lines up the barriers of one checkpoint.
type Mode uint8

const (
	// ModeAligned (exactly-once) blocks a channel that delivered barrier n
	// until n arrived on every open channel, then snapshots.
	ModeAligned Mode = iota
	// ModeAtLeastOnce never blocks; it snapshots when n arrived everywhere.
	ModeAtLeastOnce
	// ModeUnaligned snapshots on the first barrier n, which overtakes the
	// subtask's queued output, and records as channel state the records
	// that arrive on each channel before its own barrier n.
	ModeUnaligned
	// ModeAlignedTimeout aligns like ModeAligned and switches to
	// ModeUnaligned when the alignment lasts longer than the aligned
	// checkpoint timeout. (Any exactly-once alignment switches when an
	// unaligned barrier of its checkpoint arrives: an upstream subtask
	// switched already.)
	ModeAlignedTimeout
)

func (m Mode) String() string {
	switch m {
	case ModeAligned:
		return "aligned"
	case ModeAtLeastOnce:
		return "at-least-once"
	case ModeUnaligned:
		return "unaligned"
	case ModeAlignedTimeout:
		return "aligned-timeout"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ModeOf is the mode checkpoint options ask for, with Flink's rules:
// at-least-once ignores the unaligned settings; with unaligned, a zero
// aligned checkpoint timeout means unaligned from the first barrier and a
// positive one means aligned until the timeout; savepoints are always
// aligned, so they never hold channel state.
func ModeOf(o *weirv1.CheckpointOptions) (Mode, time.Duration) {
	switch {
	case !o.GetExactlyOnce():
		return ModeAtLeastOnce, 0
	case !o.GetUnaligned() || isSavepoint(o.GetType()):
		return ModeAligned, 0
	case o.GetAlignedCheckpointTimeoutMs() > 0:
		return ModeAlignedTimeout, time.Duration(o.GetAlignedCheckpointTimeoutMs()) * time.Millisecond
	}
	return ModeUnaligned, 0
}

func isSavepoint(t weirv1.CheckpointType) bool {
	switch t {
	case weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT, weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_SUSPEND, weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_TERMINATE:
		return true
	}
	return false
}

// toUnaligned is barrier b as an unaligned barrier: what a subtask forwards
// once its checkpoint went unaligned, so consumers go unaligned at once.
func toUnaligned(b *weirv1.CheckpointBarrier) *weirv1.CheckpointBarrier {
	if m, _ := ModeOf(b.GetOptions()); m == ModeUnaligned {
		return b
	}
	u := proto.CloneOf(b)
	if u.Options == nil {
		u.Options = &weirv1.CheckpointOptions{ExactlyOnce: true}
	}
	u.Options.Unaligned, u.Options.AlignedCheckpointTimeoutMs = true, 0
	return u
}

// BarrierHandler decides, from the barriers and markers arriving on a
// subtask's input channels and from the passing of time, when to snapshot,
// which channels to hold back and which channels' records to record as
// channel state. It is a pure state machine: the subtask feeds it events,
// with the current time from its clock, and acts on the returned Decision;
// it never reads a clock or touches a channel.
//
// One checkpoint is in progress at a time. Its mode (see Mode) comes from
// the options of its first barrier, or the handler's default for barriers
// without options. States and transitions, for checkpoint n:
//
//	idle ──barrier n──▶ aligning (aligned, aligned-timeout, at-least-once)
//	idle ──barrier n──▶ recording (unaligned: Snapshot at once)
//	aligning ──last barrier n──▶ idle (Snapshot, Completed)
//	aligning ──timeout, or unaligned barrier n──▶ recording (Snapshot, TimedOut)
//	recording ──last barrier n──▶ idle (Completed: channel state done)
//	aligning, recording ──newer barrier m──▶ n Aborted (subsumed), m starts
//	aligning, recording ──cancel marker n or newer──▶ idle (Aborted)
//
// End of partition on a channel counts as that channel having delivered n
// and every later barrier. Barriers of checkpoints older than the newest
// seen are late and ignored.
type BarrierHandler struct {
	mode    Mode // of barriers without options
	timeout time.Duration
	open    []bool // channel has not delivered end-of-partition
	arrived []bool

	// current is the checkpoint in progress, 0 when idle.
	current int64
	barrier *weirv1.CheckpointBarrier
	curMode Mode
	// unaligned: current's snapshot was taken; its remaining barriers are
	// awaited while the channels still missing one are recorded.
	unaligned bool
	// deadline is when an aligned-timeout alignment turns unaligned.
	deadline time.Time
	// latest is the newest checkpoint seen, so late barriers are ignored.
	latest int64
}

// Decision is what the subtask must do after an event.
type Decision struct {
	// Aborted is a checkpoint given up without completing here; the subtask
	// declines it, drops any channel state it was recording for it and
	// forwards a cancel marker.
	Aborted int64
	// AbortReason says why Aborted was given up.
	AbortReason weirv1.CheckpointFailureReason
	// Cancelled is a newer checkpoint a cancel marker ended while an older
	// one (Aborted) was in progress; the subtask declines it and forwards its
	// cancel marker too, so consumers already aligning it are released.
	Cancelled int64
	// Started is set when the first barrier of a checkpoint arrived.
	Started int64
	// Snapshot is the barrier to snapshot and forward now.
	Snapshot *weirv1.CheckpointBarrier
	// Unaligned says Snapshot is unaligned: the subtask forwards it ahead
	// of its queued output, recording what it overtook, and records the
	// input of every Recording channel until Completed names the checkpoint.
	Unaligned bool
	// TimedOut says an aligned checkpoint went unaligned because its
	// alignment outlasted the aligned checkpoint timeout.
	TimedOut bool
	// Completed is the checkpoint whose barriers have now all arrived (or
	// whose missing channels ended): the end of its alignment, and for an
	// unaligned one the end of its channel state.
	Completed int64
}

// NewBarrierHandler handles n input channels; mode and timeout apply to
// barriers that carry no options.
func NewBarrierHandler(n int, mode Mode, timeout time.Duration) *BarrierHandler {
	h := &BarrierHandler{mode: mode, timeout: timeout, open: make([]bool, n), arrived: make([]bool, n)}
	for i := range h.open {
		h.open[i] = true
	}
	return h
}

// Blocked reports whether channel ch must not be read now (priority events
// excepted).
func (h *BarrierHandler) Blocked(ch int) bool {
	return h.current != 0 && !h.unaligned && h.arrived[ch] &&
		(h.curMode == ModeAligned || h.curMode == ModeAlignedTimeout)
}

// Recording reports whether the records read from channel ch now belong to
// the channel state of the unaligned checkpoint in progress.
func (h *BarrierHandler) Recording(ch int) bool {
	return h.current != 0 && h.unaligned && h.open[ch] && !h.arrived[ch]
}

// Aligning returns the checkpoint in progress, 0 if none.
func (h *BarrierHandler) Aligning() int64 { return h.current }

// Arrived reports how many of the input channels delivered the barrier of
// the checkpoint in progress; a closed channel counts as delivered.
func (h *BarrierHandler) Arrived() (received, channels int) {
	for i := range h.arrived {
		if h.arrived[i] || !h.open[i] {
			received++
		}
	}
	return received, len(h.arrived)
}

// Unaligned reports whether the checkpoint in progress went unaligned.
func (h *BarrierHandler) Unaligned() bool { return h.current != 0 && h.unaligned }

// Deadline returns when OnTimer must be called for an aligned-timeout
// alignment to switch to unaligned; ok is false when no timer is due.
func (h *BarrierHandler) Deadline() (deadline time.Time, ok bool) {
	if h.current == 0 || h.unaligned || h.curMode != ModeAlignedTimeout {
		return time.Time{}, false
	}
	return h.deadline, true
}

func (h *BarrierHandler) modeOf(b *weirv1.CheckpointBarrier) (Mode, time.Duration) {
	if b.GetOptions() == nil {
		return h.mode, h.timeout
	}
	return ModeOf(b.GetOptions())
}

// OnBarrier handles barrier b arriving on channel ch at time now.
func (h *BarrierHandler) OnBarrier(ch int, b *weirv1.CheckpointBarrier, now time.Time) (Decision, error) {
	if err := h.check(ch); err != nil {
		return Decision{}, err
	}
	id := b.GetCheckpointId()
	var d Decision
	switch {
	case id < h.current || (h.current == 0 && id <= h.latest):
		// Late barrier of a checkpoint already completed or aborted here.
		return d, nil
	case id == h.current && h.arrived[ch]:
		return d, fmt.Errorf("task: barrier %d arrived twice on channel %d", id, ch)
	case id > h.current && h.current != 0:
		d.Aborted, d.AbortReason = h.current, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED_SUBSUMED
		h.reset()
	}
	mode, timeout := h.modeOf(b)
	if h.current == 0 {
		h.current, h.latest, h.barrier, h.curMode = id, id, b, mode
		h.deadline = now.Add(timeout)
		d.Started = id
	}
	h.arrived[ch] = true
	switch {
	case h.unaligned:
	case h.curMode == ModeUnaligned:
		h.goUnaligned(&d)
	case h.curMode != ModeAtLeastOnce && mode == ModeUnaligned:
		// An upstream subtask went unaligned already: the records behind
		// this barrier preceded it, so alignment cannot be exact any more.
		h.goUnaligned(&d)
	}
	h.maybeComplete(&d)
	return d, nil
}

// OnTimer lets time pass: an aligned-timeout alignment that reached its
// deadline switches to unaligned.
func (h *BarrierHandler) OnTimer(now time.Time) Decision {
	var d Decision
	if dl, ok := h.Deadline(); ok && !now.Before(dl) {
		h.goUnaligned(&d)
		d.TimedOut = true
	}
	return d
}

func (h *BarrierHandler) goUnaligned(d *Decision) {
	h.unaligned = true
	d.Snapshot, d.Unaligned = toUnaligned(h.barrier), true
}

// maybeComplete ends the checkpoint in progress once every open channel
// delivered its barrier.
func (h *BarrierHandler) maybeComplete(d *Decision) {
	if h.current == 0 {
		return
	}
	for i, open := range h.open {
		if open && !h.arrived[i] {
			return
		}
	}
	if !h.unaligned {
		d.Snapshot = h.barrier
	}
	d.Completed = h.current
	h.reset()
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
			// A marker for a newer checkpoint also ends the older one.
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
	h.maybeComplete(&d)
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

func (h *BarrierHandler) reset() {
	h.current, h.barrier, h.unaligned, h.deadline = 0, nil, false, time.Time{}
	for i := range h.arrived {
		h.arrived[i] = false
	}
}

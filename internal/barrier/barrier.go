package barrier

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

// ParseMode reads a mode by its name (String's, or exactly-once for
// aligned) with its timeout, which only aligned-timeout takes and needs.
func ParseMode(name string, timeout time.Duration) (Mode, time.Duration, error) {
	switch name {
	case "aligned", "exactly-once":
		return ModeAligned, 0, nil
	case "at-least-once":
		return ModeAtLeastOnce, 0, nil
	case "unaligned":
		return ModeUnaligned, 0, nil
	case "aligned-timeout":
		if timeout <= 0 {
			return 0, 0, fmt.Errorf("barrier: mode aligned-timeout needs a positive timeout, got %s", timeout)
		}
		return ModeAlignedTimeout, timeout, nil
	}
	return 0, 0, fmt.Errorf("barrier: unknown mode %q", name)
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

// ToUnaligned is barrier b as an unaligned barrier: what a subtask forwards
// once its checkpoint went unaligned, so consumers go unaligned at once.
func ToUnaligned(b *weirv1.CheckpointBarrier) *weirv1.CheckpointBarrier {
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

// Handler decides, from the barriers and markers arriving on a
// subtask's input channels and from the passing of time, when to snapshot,
// which channels to hold back and which channels' records to record as
// channel state. It is a pure state machine: the subtask feeds it events,
// with the current time from its clock, and acts on the returned Decision;
// it never reads a clock or touches a channel.
//
// A checkpoint's mode (see Mode) comes from the options of its first
// barrier, or the handler's default for barriers without options.
//
// An exactly-once checkpoint (aligned, aligned-timeout, unaligned) is the
// only one in progress while it lasts: its alignment holds channels back, so
// it is over before the next one can start. States and transitions, for
// checkpoint n:
//
//	idle ──barrier n──▶ aligning (aligned, aligned-timeout)
//	idle ──barrier n──▶ recording (unaligned: Snapshot at once)
//	aligning ──last barrier n──▶ idle (Snapshot, Completed)
//	aligning ──timeout, or unaligned barrier n──▶ recording (Snapshot, TimedOut)
//	recording ──last barrier n──▶ idle (Completed: channel state done)
//	aligning, recording ──newer barrier m──▶ n Aborted (subsumed), m starts
//	aligning, recording ──cancel marker n or newer──▶ idle (Aborted)
//
// At-least-once checkpoints hold nothing back, so with several checkpoints
// in flight and skewed inputs the barriers of n+1 can arrive on one channel
// before those of n on another. Giving n up then would lose every
// checkpoint under steady skew; instead several are tracked at once, oldest
// first, each with the channels that delivered its barrier (as Flink's
// CheckpointBarrierTracker does):
//
//	barrier n, new ──▶ n tracked (Started); beyond maxPending the oldest is Aborted
//	last barrier n ──▶ Snapshot, Completed; older ones tracked are Aborted
//	cancel marker n ──▶ n and older ones tracked are Aborted
//	newer exactly-once barrier ──▶ every one tracked is Aborted (subsumed)
//
// An older checkpoint still tracked when a newer one completes cannot
// complete any more: a channel delivered the newer barrier without the
// older one, and channels keep their order.
//
// End of partition on a channel counts as that channel having delivered n
// and every later barrier. Barriers of checkpoints not in progress and not
// newer than the newest seen are late and ignored.
type Handler struct {
	mode    Mode // of barriers without options
	timeout time.Duration
	open    []bool // channel has not delivered end-of-partition
	arrived []bool

	// current is the exactly-once checkpoint in progress, 0 if none.
	current int64
	barrier *weirv1.CheckpointBarrier
	curMode Mode
	// unaligned: current's snapshot was taken; its remaining barriers are
	// awaited while the channels still missing one are recorded.
	unaligned bool
	// deadline is when an aligned-timeout alignment turns unaligned.
	deadline time.Time

	// pending are the at-least-once checkpoints in progress, oldest first;
	// never at the same time as current.
	pending []*pendingCheckpoint
	// maxPending caps len(pending): a channel that never delivers barriers
	// must not make the handler track checkpoints without bound.
	maxPending int

	// latest is the newest checkpoint seen, so late barriers are ignored.
	latest int64
}

// defaultMaxPending is Flink's cap on the checkpoints a tracker follows;
// with max-concurrent checkpoints far below it, only checkpoints that lost
// a barrier upstream are ever given up for it.
const defaultMaxPending = 50

// pendingCheckpoint is an at-least-once checkpoint whose barrier some
// channels delivered.
type pendingCheckpoint struct {
	barrier *weirv1.CheckpointBarrier
	arrived []bool
}

func (p *pendingCheckpoint) id() int64 { return p.barrier.GetCheckpointId() }

// Decision is what the subtask must do after an event.
type Decision struct {
	// Aborted is a checkpoint given up without completing here; the subtask
	// declines it, drops any channel state it was recording for it and
	// forwards a cancel marker. When an event gives up several, Aborted is
	// the oldest; AbortedIDs lists them all.
	Aborted int64
	// AbortReason says why Aborted was given up.
	AbortReason weirv1.CheckpointFailureReason
	// Cancelled is a newer checkpoint a cancel marker ended while an older
	// one (Aborted) was in progress; the subtask declines it and forwards its
	// cancel marker too, so consumers already aligning it are released.
	Cancelled int64
	// moreAborted are the checkpoints given up between Aborted and
	// Cancelled, when at-least-once tracking gave up more than one (nil
	// otherwise). A pointer, so that Decision stays comparable.
	moreAborted *[]int64
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

// AbortedIDs lists every checkpoint the decision gives up, oldest first:
// Aborted, the ones given up with it, and Cancelled. The subtask declines
// each with AbortReason and forwards its cancel marker.
func (d Decision) AbortedIDs() []int64 {
	var ids []int64
	if d.Aborted != 0 {
		ids = append(ids, d.Aborted)
	}
	if d.moreAborted != nil {
		ids = append(ids, *d.moreAborted...)
	}
	if d.Cancelled != 0 {
		ids = append(ids, d.Cancelled)
	}
	return ids
}

// abort records that the event gave up checkpoint id for reason; ids come
// oldest first.
func (d *Decision) abort(id int64, reason weirv1.CheckpointFailureReason) {
	d.AbortReason = reason
	switch {
	case d.Aborted == 0:
		d.Aborted = id
	case d.moreAborted == nil:
		d.moreAborted = &[]int64{id}
	default:
		*d.moreAborted = append(*d.moreAborted, id)
	}
}

// New handles n input channels; mode and timeout apply to
// barriers that carry no options.
func New(n int, mode Mode, timeout time.Duration) *Handler {
	h := &Handler{mode: mode, timeout: timeout, open: make([]bool, n), arrived: make([]bool, n), maxPending: defaultMaxPending}
	for i := range h.open {
		h.open[i] = true
	}
	return h
}

// Blocked reports whether channel ch must not be read now (priority events
// excepted).
func (h *Handler) Blocked(ch int) bool {
	return h.current != 0 && !h.unaligned && h.arrived[ch] &&
		(h.curMode == ModeAligned || h.curMode == ModeAlignedTimeout)
}

// Recording reports whether the records read from channel ch now belong to
// the channel state of the unaligned checkpoint in progress.
func (h *Handler) Recording(ch int) bool {
	return h.current != 0 && h.unaligned && h.open[ch] && !h.arrived[ch]
}

// Aligning returns the checkpoint in progress (the oldest, when several
// at-least-once checkpoints are), 0 if none.
func (h *Handler) Aligning() int64 {
	if len(h.pending) > 0 {
		return h.pending[0].id()
	}
	return h.current
}

// InProgress lists the checkpoints in progress, oldest first.
func (h *Handler) InProgress() []int64 {
	if h.current != 0 {
		return []int64{h.current}
	}
	ids := make([]int64, 0, len(h.pending))
	for _, p := range h.pending {
		ids = append(ids, p.id())
	}
	return ids
}

// Arrived reports how many of the input channels delivered the barrier of
// the checkpoint Aligning returns; a closed channel counts as delivered.
func (h *Handler) Arrived() (received, channels int) {
	arrived := h.arrived
	if len(h.pending) > 0 {
		arrived = h.pending[0].arrived
	}
	for i := range arrived {
		if arrived[i] || !h.open[i] {
			received++
		}
	}
	return received, len(arrived)
}

// Unaligned reports whether the checkpoint in progress went unaligned.
func (h *Handler) Unaligned() bool { return h.current != 0 && h.unaligned }

// Deadline returns when OnTimer must be called for an aligned-timeout
// alignment to switch to unaligned; ok is false when no timer is due.
func (h *Handler) Deadline() (deadline time.Time, ok bool) {
	if h.current == 0 || h.unaligned || h.curMode != ModeAlignedTimeout {
		return time.Time{}, false
	}
	return h.deadline, true
}

func (h *Handler) modeOf(b *weirv1.CheckpointBarrier) (Mode, time.Duration) {
	if b.GetOptions() == nil {
		return h.mode, h.timeout
	}
	return ModeOf(b.GetOptions())
}

const (
	reasonSubsumed  = weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED_SUBSUMED
	reasonCancelled = weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER
)

// OnBarrier handles barrier b arriving on channel ch at time now.
func (h *Handler) OnBarrier(ch int, b *weirv1.CheckpointBarrier, now time.Time) (Decision, error) {
	if err := h.check(ch); err != nil {
		return Decision{}, err
	}
	id := b.GetCheckpointId()
	var d Decision
	if i := h.findPending(id); i >= 0 {
		p := h.pending[i]
		if p.arrived[ch] {
			return d, fmt.Errorf("task: barrier %d arrived twice on channel %d", id, ch)
		}
		p.arrived[ch] = true
		if h.complete(p.arrived) {
			h.completePending(i, &d)
		}
		return d, nil
	}
	switch {
	case id < h.current || (id != h.current && id <= h.latest):
		// Late barrier of a checkpoint already completed or aborted here.
		return d, nil
	case id == h.current && h.arrived[ch]:
		return d, fmt.Errorf("task: barrier %d arrived twice on channel %d", id, ch)
	case id > h.current && h.current != 0:
		d.abort(h.current, reasonSubsumed)
		h.reset()
	}
	mode, timeout := h.modeOf(b)
	if h.current == 0 && mode == ModeAtLeastOnce {
		h.track(ch, b, &d)
		return d, nil
	}
	if h.current == 0 {
		// An exactly-once checkpoint tracks nothing else: the at-least-once
		// ones in flight (older) are subsumed.
		for _, p := range h.pending {
			d.abort(p.id(), reasonSubsumed)
		}
		h.pending = nil
		h.current, h.latest, h.barrier, h.curMode = id, id, b, mode
		h.deadline = now.Add(timeout)
		d.Started = id
	}
	h.arrived[ch] = true
	switch {
	case h.unaligned:
	case h.curMode == ModeUnaligned:
		h.goUnaligned(&d)
	case mode == ModeUnaligned:
		// An upstream subtask went unaligned already: the records behind
		// this barrier preceded it, so alignment cannot be exact any more.
		h.goUnaligned(&d)
	}
	h.maybeComplete(&d)
	return d, nil
}

// track starts following the new at-least-once checkpoint of barrier b,
// first delivered on channel ch.
func (h *Handler) track(ch int, b *weirv1.CheckpointBarrier, d *Decision) {
	p := &pendingCheckpoint{barrier: b, arrived: make([]bool, len(h.open))}
	p.arrived[ch] = true
	h.latest = b.GetCheckpointId()
	d.Started = h.latest
	h.pending = append(h.pending, p)
	if len(h.pending) > h.maxPending {
		d.abort(h.pending[0].id(), reasonSubsumed)
		h.pending = h.pending[1:]
	}
	if h.complete(p.arrived) {
		h.completePending(len(h.pending)-1, d)
	}
}

func (h *Handler) findPending(id int64) int {
	for i, p := range h.pending {
		if p.id() == id {
			return i
		}
	}
	return -1
}

// complete reports whether every open channel delivered a barrier.
func (h *Handler) complete(arrived []bool) bool {
	for i, open := range h.open {
		if open && !arrived[i] {
			return false
		}
	}
	return true
}

// completePending completes pending[i] and gives up the older ones.
func (h *Handler) completePending(i int, d *Decision) {
	for _, p := range h.pending[:i] {
		d.abort(p.id(), reasonSubsumed)
	}
	d.Snapshot, d.Completed = h.pending[i].barrier, h.pending[i].id()
	h.pending = h.pending[i+1:]
	if len(h.pending) == 0 {
		h.pending = nil
	}
}

// OnTimer lets time pass: an aligned-timeout alignment that reached its
// deadline switches to unaligned.
func (h *Handler) OnTimer(now time.Time) Decision {
	var d Decision
	if dl, ok := h.Deadline(); ok && !now.Before(dl) {
		h.goUnaligned(&d)
		d.TimedOut = true
	}
	return d
}

func (h *Handler) goUnaligned(d *Decision) {
	h.unaligned = true
	d.Snapshot, d.Unaligned = ToUnaligned(h.barrier), true
}

// maybeComplete ends the exactly-once checkpoint in progress once every
// open channel delivered its barrier.
func (h *Handler) maybeComplete(d *Decision) {
	if h.current == 0 || !h.complete(h.arrived) {
		return
	}
	if !h.unaligned {
		d.Snapshot = h.barrier
	}
	d.Completed = h.current
	h.reset()
}

// OnCancelMarker handles a cancel marker for checkpoint id on channel ch:
// it aborts that checkpoint and every older one in progress.
func (h *Handler) OnCancelMarker(ch int, id int64) (Decision, error) {
	if err := h.check(ch); err != nil {
		return Decision{}, err
	}
	return h.cancel(id), nil
}

// OnAbort handles the JobManager's word that checkpoint id was aborted, as
// a cancel marker from every channel: an alignment waiting for barriers
// that will never come (a source the trigger did not reach, a region that
// failed over) ends, and the blocked channels flow again. Without it the
// subtask would wait until a newer barrier came, which, while another
// region restarts and no checkpoint is triggered, is never.
func (h *Handler) OnAbort(id int64) Decision { return h.cancel(id) }

func (h *Handler) cancel(id int64) Decision {
	var d Decision
	ended := false // id itself was in progress
	if h.current != 0 && h.current <= id {
		d.abort(h.current, reasonCancelled)
		ended = h.current == id
		h.reset()
	}
	for len(h.pending) > 0 && h.pending[0].id() <= id {
		d.abort(h.pending[0].id(), reasonCancelled)
		ended = h.pending[0].id() == id
		h.pending = h.pending[1:]
	}
	if len(h.pending) == 0 {
		h.pending = nil
	}
	if !ended && id > h.latest {
		// A checkpoint not started here: it counts as seen, so its barriers
		// arriving later are late, and it is aborted so its marker travels
		// on; a consumer that got its barrier from another input would
		// otherwise wait for it until the next checkpoint.
		h.latest = id
		d.abort(id, reasonCancelled)
	}
	h.splitCancelled(&d, id)
	return d
}

// splitCancelled reports checkpoint id, when the marker ended it along with
// older ones, as Cancelled rather than as one more aborted.
func (h *Handler) splitCancelled(d *Decision, id int64) {
	if d.moreAborted == nil {
		return // one aborted at most: it is Aborted, whichever it is
	}
	more := *d.moreAborted
	if more[len(more)-1] != id {
		return // id was not in progress here: only older ones ended
	}
	d.Cancelled = id
	if more = more[:len(more)-1]; len(more) == 0 {
		d.moreAborted = nil
	} else {
		*d.moreAborted = more
	}
}

// OnEndOfPartition handles the end of channel ch: it counts as having
// delivered every later barrier.
func (h *Handler) OnEndOfPartition(ch int) (Decision, error) {
	if err := h.check(ch); err != nil {
		return Decision{}, err
	}
	h.open[ch] = false
	var d Decision
	h.maybeComplete(&d)
	// Only one snapshot per event: the newest checkpoint the end completes
	// is taken and subsumes the older ones.
	for i := len(h.pending) - 1; i >= 0; i-- {
		if h.complete(h.pending[i].arrived) {
			h.completePending(i, &d)
			break
		}
	}
	return d, nil
}

func (h *Handler) check(ch int) error {
	if ch < 0 || ch >= len(h.open) {
		return fmt.Errorf("task: no input channel %d", ch)
	}
	if !h.open[ch] {
		return fmt.Errorf("task: event on channel %d after its end of partition", ch)
	}
	return nil
}

func (h *Handler) reset() {
	h.current, h.barrier, h.unaligned, h.deadline = 0, nil, false, time.Time{}
	for i := range h.arrived {
		h.arrived[i] = false
	}
}

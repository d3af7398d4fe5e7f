package task

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/weirproject/weir/internal/barrier"
	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/exchange"
	"github.com/weirproject/weir/internal/fault"
	"github.com/weirproject/weir/internal/state"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// TriggerCheckpoint asks a source subtask to start checkpoint id.
func (t *Task) TriggerCheckpoint(id, timestampMs int64, opts *weirv1.CheckpointOptions) {
	b := &weirv1.CheckpointBarrier{CheckpointId: id, TimestampMs: timestampMs, Options: opts}
	t.mailbox.put(func() error {
		if t.barriers != nil && len(t.inputs) > 0 {
			// Only sources are triggered; a subtask with inputs gets the
			// barrier from them. Decline rather than snapshot out of order.
			t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED_TASK_NOT_READY, "triggered a subtask that has inputs")
			return nil
		}
		switch {
		case id == t.triggered:
			// Delivered twice: a second snapshot would write over the
			// first's files, which a completed checkpoint may reference.
			t.log.Debug("repeated trigger ignored", "checkpoint_id", id)
			return nil
		case id < t.triggered:
			// Overtaken by a newer checkpoint, whose barrier went out
			// first: downstream takes this one's barrier as late, so it
			// cannot complete. Declined at once rather than expiring.
			t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED_SUBSUMED,
				fmt.Sprintf("triggered after checkpoint %d", t.triggered))
			return nil
		}
		t.triggered = id
		if opts.GetType() == weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_TERMINATE && !t.endOfInput {
			// Stop-with-savepoint --drain: the input ends before the
			// barrier, so every operator flushes into the savepoint.
			if err := t.reachEndOfInput(); err != nil {
				return err
			}
		}
		now := t.now()
		t.observeStartDelay(b, now)
		// A source has nothing to align; with unaligned checkpoints its
		// barrier still overtakes its queued output. (An aligned-timeout
		// barrier goes out aligned: its consumers time it out.)
		mode, _ := barrier.ModeOf(opts)
		return t.checkpoint(b, now, now, mode == barrier.ModeUnaligned)
	})
}

// NotifyCheckpointComplete tells the subtask checkpoint id is durable.
// After the job's final checkpoint (final), the subtask finishes: every
// subtask of the job had reached the end of its input when it snapshotted,
// or it was a stop-with-savepoint. Finishing earlier would stop checkpoints
// for the subtasks still draining (a finished source cannot be triggered).
func (t *Task) NotifyCheckpointComplete(id int64, final bool) {
	t.progress.doneUpTo(id)
	t.mailbox.put(func() error {
		// The JobManager repeats a final notification until the subtask
		// finishes, and one may overtake another: each is passed on once,
		// and never after a newer one (which subsumes it).
		if id > t.notified {
			t.notified = id
			t.backend.NotifyCheckpointComplete(id)
			if l, ok := t.operator().(sdk.CheckpointListener); ok {
				if err := l.NotifyCheckpointComplete(id); err != nil {
					return fmt.Errorf("task: notify checkpoint %d complete: %w", id, err)
				}
			}
		}
		if final {
			t.finished = true
		}
		return nil
	})
}

// NotifyCheckpointAborted tells the subtask checkpoint id will never complete.
func (t *Task) NotifyCheckpointAborted(id int64) {
	t.progress.done(id)
	t.mailbox.put(func() error {
		t.backend.NotifyCheckpointAborted(id)
		if l, ok := t.operator().(sdk.CheckpointListener); ok {
			if err := l.NotifyCheckpointAborted(id); err != nil {
				return fmt.Errorf("task: notify checkpoint %d aborted: %w", id, err)
			}
		}
		if t.outTO != nil && t.outTO.id == id {
			// Nothing to wait for: the acknowledgement would be dropped.
			t.outTO.rec.abort()
			t.outTO = nil
		}
		if id == t.syncSavepoint {
			// The stop-with-savepoint failed: a stopped source emits again.
			t.syncSavepoint, t.suspended = 0, false
			t.stopping.Store(false)
		}
		// An alignment that waits for a barrier of it ends (one input may
		// never send it: its source was not triggered, or its region
		// failed over), and the subtasks downstream are told with a cancel
		// marker, as if an input had sent one. The JobManager knows the
		// checkpoint failed: no decline.
		if t.barriers == nil {
			return nil // not opened yet
		}
		for _, aborted := range t.barriers.OnAbort(id).AbortedIDs() {
			if t.rec != nil && t.rec.id == aborted {
				t.rec.abort()
				t.rec = nil
			}
			if err := t.broadcast(exchange.Buffer{Kind: exchange.KindCancelMarker, CheckpointID: aborted}); err != nil {
				return err
			}
		}
		return nil
	})
}

// observeStartDelay records how long barrier b took from its trigger to
// this subtask.
func (t *Task) observeStartDelay(b *weirv1.CheckpointBarrier, arrived time.Time) {
	if b.GetTimestampMs() > 0 {
		t.metrics.startDelay.Observe(max(0, arrived.Sub(time.UnixMilli(b.GetTimestampMs())).Seconds()))
	}
}

// ckptStats are the measurements an acknowledgement reports.
type ckptStats struct {
	sync, alignment, startDelay time.Duration
	processed, persisted        int64
	unaligned                   bool
	// endOfInput: the subtask had all its input when it snapshotted.
	endOfInput bool
}

// checkpoint takes the snapshot for barrier b, whose first barrier arrived
// at firstBarrier: operators emit what must precede the barrier, the
// synchronous snapshot is taken here, the barrier goes downstream (ahead
// of the queued output when unaligned), and the snapshot is written to
// storage off the mailbox. An unaligned checkpoint's acknowledgement waits
// for its channel state: the output its barrier overtook, recorded now,
// and the input still arriving before the barriers missing on other
// channels.
//
// The synchronous part comes before the barrier is sent, as nothing is
// emitted in between: the snapshot covers exactly what precedes the
// barrier either way. Sent first, the barrier would wake the downstream
// subtask to compete for the CPU with this one's snapshot and with the
// goroutine writing it; sent after, it travels with nothing left to do
// here but start that goroutine. A failed synchronous part sends a cancel
// marker instead of the barrier.
func (t *Task) checkpoint(b *weirv1.CheckpointBarrier, firstBarrier, now time.Time, unaligned bool) error {
	id := b.GetCheckpointId()
	start := now
	t.progress.advance(id, weirv1.CheckpointPhase_CHECKPOINT_PHASE_SNAPSHOTTING, 0, 0)
	if h, ok := t.operator().(sdk.PreBarrierHook); ok {
		t.out.count = 0
		if err := h.PrepareSnapshotPreBarrier(id, t.out); err != nil {
			return fmt.Errorf("task: prepare snapshot %d: %w", id, err)
		}
		if t.out.err != nil {
			return t.out.err
		}
	}
	// An older aligned-timeout barrier still queued goes unaligned now:
	// one waits in the output at a time.
	t.settleOutput(true)
	snap, err := t.snapshotSync(b)
	if err != nil {
		t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED, err.Error())
		if se := (*state.StoreError)(nil); errors.As(err, &se) {
			// The store is lost: the job fails over to the last checkpoint.
			return fmt.Errorf("task: %s: state backend failed: %w", t.desc.GetOperator(), err)
		}
		// Downstream never gets this checkpoint's barrier from here: the
		// marker tells it the checkpoint cannot complete (and makes the
		// barriers other inputs still send it late).
		return t.broadcast(exchange.Buffer{Kind: exchange.KindCancelMarker, CheckpointID: id})
	}
	buf := exchange.Buffer{Kind: exchange.KindBarrier, Barrier: b}
	var rec *channelRecorder
	if unaligned {
		if t.rec != nil { // the handler ends an older one first; never here
			t.rec.abort()
			t.rec = nil
		}
		rec = newChannelRecorder(id, len(t.inputs), len(t.writers))
		rec.unaligned = true
		for i, w := range t.writers {
			overtaken, err := w.BroadcastPriority(buf)
			if err != nil {
				snap.Release()
				return err
			}
			for sub, bufs := range overtaken {
				for _, o := range bufs {
					rec.addOutput(i, sub, o)
				}
			}
		}
		if t.next != nil {
			// Nothing is queued between chained operators: the barrier
			// overtakes nothing.
			if err := t.next.receive(buf); err != nil {
				snap.Release()
				return err
			}
		}
		t.lastFlush = now
	} else if err := t.broadcast(buf); err != nil {
		snap.Release()
		return err
	}
	switch b.GetOptions().GetType() {
	case weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_SUSPEND, weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_TERMINATE:
		// Stop-with-savepoint: nothing more is emitted, and the subtask
		// finishes once the savepoint completed.
		t.syncSavepoint, t.suspended = id, true
		t.stopping.Store(true)
	}
	stats := ckptStats{sync: t.now().Sub(start), unaligned: unaligned, endOfInput: t.endOfInput}
	if b.GetTimestampMs() > 0 {
		stats.startDelay = max(0, firstBarrier.Sub(time.UnixMilli(b.GetTimestampMs())))
	}
	if !unaligned && len(t.inputs) > 1 {
		stats.alignment, stats.processed = start.Sub(firstBarrier), t.align.processed
	}
	t.metrics.syncDuration.Set(stats.sync.Seconds())
	if mode, timeout := t.modeOf(b); rec == nil && mode == barrier.ModeAlignedTimeout && len(t.writers) > 0 {
		// The aligned barrier may wait in the output queues no longer than
		// what is left of the timeout; the acknowledgement waits until it
		// left them, or went ahead unaligned with what it overtook.
		rec = newChannelRecorder(id, len(t.inputs), len(t.writers))
		t.outTO = &outputTimeout{id: id, deadline: firstBarrier.Add(timeout), rec: rec, alignment: stats.alignment, processed: stats.processed}
	} else if rec != nil {
		t.metrics.unaligned.Inc()
		if len(t.inputs) == 0 {
			rec.finish(0, 0) // a source has no input to wait for
		} else {
			t.rec = rec
		}
	}
	t.progress.advance(id, weirv1.CheckpointPhase_CHECKPOINT_PHASE_UPLOADING, 0, 0)
	t.async.Add(1)
	go func() {
		defer t.async.Done()
		// No operator code runs here, but a panic (of the backend writing
		// its snapshot) must not take the process down: it declines.
		defer func() {
			if r := recover(); r != nil {
				t.log.Error("asynchronous part of a checkpoint panicked", "checkpoint_id", id, "panic", r, "stack", string(debug.Stack()))
				t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_ASYNC_EXCEPTION, fmt.Sprintf("panic: %v", r))
			}
		}()
		t.completeAsync(b, snap, rec, stats)
	}()
	return nil
}

// snapshotSync is the synchronous part of checkpoint b: the operator's
// SnapshotState (or SnapshotStateAsync), then the state backend's
// snapshot.
func (t *Task) snapshotSync(b *weirv1.CheckpointBarrier) (state.StateSnapshot, error) {
	id := b.GetCheckpointId()
	var finish func() error
	switch s := t.operator().(type) {
	case sdk.AsyncSnapshotter:
		var err error
		if finish, err = s.SnapshotStateAsync(id); err != nil {
			return nil, err
		}
	case sdk.Snapshotter:
		if err := s.SnapshotState(id); err != nil {
			return nil, err
		}
	}
	snap, err := t.backend.TakeSnapshot(state.SnapshotOptions{
		CheckpointID: id,
		Canonical:    state.IsSavepoint(b.GetOptions().GetType()),
		Full:         b.GetOptions().GetType() == weirv1.CheckpointType_CHECKPOINT_TYPE_FULL_CHECKPOINT,
	})
	if finish == nil {
		return snap, err
	}
	if err != nil {
		// The operator's part still runs: it may order later ones.
		_ = finish()
		return nil, err
	}
	return &finishingSnapshot{StateSnapshot: snap, finish: finish}, nil
}

// finishingSnapshot is a state snapshot with the asynchronous part of the
// operator's snapshot (sdk.AsyncSnapshotter), run while the state is
// written: the subtask state is acknowledged only when both succeeded.
type finishingSnapshot struct {
	state.StateSnapshot
	finish func() error
}

func (s *finishingSnapshot) Write(dir, vertex string, subtask, parallelism int) (*weirv1.SubtaskState, error) {
	errc := make(chan error, 1)
	go func() { errc <- s.finish() }()
	st, err := s.StateSnapshot.Write(dir, vertex, subtask, parallelism)
	if ferr := <-errc; ferr != nil {
		return nil, errors.Join(err, fmt.Errorf("operator snapshot: %w", ferr))
	}
	return st, err
}

// Release runs the operator's part all the same: the operator may wait for
// it in its next snapshot, and it releases what it holds (open files).
func (s *finishingSnapshot) Release() {
	s.StateSnapshot.Release()
	_ = s.finish()
}

// completeAsync is the asynchronous part of checkpoint b: it writes the
// state files, waits for the channel state of an unaligned checkpoint and
// writes it too, and acknowledges (or declines on a storage error).
func (t *Task) completeAsync(b *weirv1.CheckpointBarrier, snap state.StateSnapshot, rec *channelRecorder, stats ckptStats) {
	id := b.GetCheckpointId()
	asyncStart := t.now()
	dir := storageDir(t.desc, b)
	if blob.IsLocal(dir) {
		if _, err := os.Stat(blob.LocalPath(dir)); err != nil {
			// The JobManager creates the directory before triggering and
			// removes it on abort: a missing one means the checkpoint is
			// gone. (An object store has no directories: what a late
			// writer puts there, the orphan clean-up deletes.)
			snap.Release()
			t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_ASYNC_EXCEPTION, err.Error())
			return
		}
	}
	vertex, subtask := t.attempt.GetVertex(), int(t.attempt.GetSubtaskIndex())
	st, err := snap.Write(dir, vertex, subtask, int(t.desc.GetParallelism()))
	if err != nil {
		// Writing to checkpoint storage failed (a full disk, an object
		// store that is down): Flink's IO_EXCEPTION.
		t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_IO_EXCEPTION, err.Error())
		return
	}
	if rec != nil {
		select {
		case <-rec.done:
		case <-t.asyncCtx.Done():
			return
		}
		if rec.aborted {
			return // declined by the mailbox, or the subtask stopped
		}
		stats.alignment, stats.processed, stats.persisted, stats.unaligned = rec.alignment, rec.processed, rec.bytes, rec.unaligned
		h, err := state.WriteChannelState(t.cfg.FS, dir, vertex, subtask, rec.snapshot(t.desc), t.cfg.InlineThreshold)
		if err != nil {
			t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_IO_EXCEPTION, err.Error())
			return
		}
		if h != nil {
			st.ChannelState = h
			st.StateSize += h.GetSize()
			st.CheckpointedSize += h.GetSize()
		}
	}
	if err := fault.Point(fault.TaskBeforeAck); err != nil {
		t.decline(id, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_ASYNC_EXCEPTION, err.Error())
		return
	}
	asyncDur := t.now().Sub(asyncStart)
	t.metrics.asyncDuration.Set(asyncDur.Seconds())
	t.metrics.processed.Set(float64(stats.processed))
	t.metrics.persisted.Set(float64(stats.persisted))
	t.progress.done(id)
	err = t.cfg.Responder.Acknowledge(t.asyncCtx, &weirv1.AcknowledgeCheckpointRequest{
		Attempt: t.attempt, CheckpointId: id, State: st, EndOfInput: stats.endOfInput,
		Metrics: &weirv1.CheckpointMetrics{
			SyncDurationMs:                stats.sync.Milliseconds(),
			AsyncDurationMs:               asyncDur.Milliseconds(),
			AlignmentDurationMs:           stats.alignment.Milliseconds(),
			StartDelayMs:                  stats.startDelay.Milliseconds(),
			BytesBufferedDuringAlignment:  stats.processed,
			BytesPersistedDuringAlignment: stats.persisted,
			Unaligned:                     stats.unaligned,
		},
	})
	if err != nil && t.asyncCtx.Err() == nil {
		t.log.Warn("acknowledge checkpoint failed", "checkpoint_id", id, "err", err)
	}
}

// storageDir is where the subtask writes its state for barrier b: the
// savepoint's own directory, or the checkpoint's chk-<n>.
func storageDir(d *weirv1.TaskDeploymentDescriptor, b *weirv1.CheckpointBarrier) string {
	if loc := b.GetOptions().GetTargetLocation(); loc != "" {
		return loc
	}
	return storage.Storage{Dir: d.GetCheckpointDir()}.CheckpointDir(d.GetAttempt().GetJobId(), b.GetCheckpointId())
}

func (t *Task) decline(id int64, reason weirv1.CheckpointFailureReason, msg string) {
	t.log.Info("declining checkpoint", "checkpoint_id", id, "reason", reason, "msg", msg)
	t.progress.done(id)
	t.async.Add(1)
	go func() {
		defer t.async.Done()
		err := t.cfg.Responder.Decline(t.asyncCtx, &weirv1.DeclineCheckpointRequest{
			Attempt: t.attempt, CheckpointId: id, Reason: reason, Message: msg,
		})
		if err != nil && t.asyncCtx.Err() == nil {
			t.log.Warn("decline checkpoint failed", "checkpoint_id", id, "err", err)
		}
	}()
}

// Stopping reports whether the subtask took a stop-with-savepoint's
// snapshot and waits for that savepoint's end: it emits nothing until the
// savepoint completes (it finishes) or is aborted. Safe from any
// goroutine.
func (t *Task) Stopping() bool { return t.stopping.Load() }

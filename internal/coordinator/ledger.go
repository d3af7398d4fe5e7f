package coordinator

import (
	"github.com/weirproject/weir/internal/checkpoint"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Ledger decides which checkpoint files may be deleted: it keeps the
// shared-state registry in step with the acks the state machine takes,
// the checkpoints it gives up and those the completed store subsumes.
// It does no I/O; its Deletions are carried out by the Driver's discarder,
// or by the simulator, which checks them against every retained
// checkpoint. Called from one goroutine at a time (the Driver's loop).
type Ledger struct {
	Shared *SharedRegistry
}

// Deletion is what may be deleted once a checkpoint is given up: its
// location, acknowledged states' own files, and the shared files that no
// checkpoint references any more.
type Deletion struct {
	// ID is the checkpoint, for the log; 0 if unknown.
	ID       int64
	Location string
	States   []*weirv1.SubtaskState
	Shared   []string
}

// Acknowledge hands ack to sm. Its shared files are registered first, in
// one step with the check for deleted ones: a Release meanwhile (a
// completion subsuming a checkpoint) then either finds them referenced or
// has already given them up. An ack that references a deleted file is
// refused (the checkpoint could never be restored): sm is told it
// declined, and refused says why; the Deletion then holds the ack's own
// files. An ack the state machine does not use no longer references its
// files (sm discards them). An ack that comes again for a checkpoint
// whose files are kept is a duplicate, whatever it references.
func (l *Ledger) Acknowledge(sm *Coordinator, ack *weirv1.AcknowledgeCheckpointRequest) (r AckResult, refused error, del *Deletion) {
	if sm.Kept(ack) {
		// Again, for a checkpoint whose files are kept: neither registered
		// nor refused, since those are the checkpoint's files.
		return AckDuplicate, nil, nil
	}
	if err := l.Shared.Register(ack.GetCheckpointId(), ack.GetState()); err != nil {
		sm.Decline(&weirv1.DeclineCheckpointRequest{
			Attempt: ack.GetAttempt(), CheckpointId: ack.GetCheckpointId(),
			Reason:  weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED,
			Message: err.Error(),
		})
		return AckDiscarded, err, &Deletion{
			ID: ack.GetCheckpointId(), States: []*weirv1.SubtaskState{ack.GetState()}, Shared: l.Shared.Unreferenced(ack.GetState()),
		}
	}
	r = sm.Acknowledge(ack)
	if r != AckSuccess {
		l.Shared.Unregister(ack.GetCheckpointId(), ack.GetState())
	}
	return r, nil, nil
}

// Discarded is what a DiscardState effect deletes: an aborted
// checkpoint's references are released, and so are the states'.
func (l *Ledger) Discarded(e DiscardState) Deletion {
	var free []string
	if e.ID != 0 {
		free = l.Shared.Release(e.ID)
	}
	free = append(free, l.Shared.Unreferenced(e.States...)...)
	return Deletion{ID: e.ID, Location: e.Location, States: e.States, Shared: free}
}

// Subsumed is what a completed checkpoint the store no longer names
// deletes; ok is false for a savepoint, whose files are the user's.
func (l *Ledger) Subsumed(c checkpoint.Completed) (del Deletion, ok bool) {
	if c.Savepoint {
		return Deletion{}, false
	}
	return Deletion{ID: c.ID, Location: c.Dir, Shared: l.Shared.Release(c.ID)}, true
}

package coordinator

import (
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Effect is an action the coordinator decided on and the driver carries out.
// The preparation chain is a sequence of effects, each answered by an event:
// AllocateID → IDAllocated, InitLocation → LocationReady,
// SnapshotOperatorCoordinators → CoordinatorsSnapshotted,
// SnapshotMasterHooks → MasterHooksDone, then SendTrigger.
type Effect interface{ isEffect() }

// AllocateID asks for the next checkpoint ID from the counter.
type AllocateID struct {
	Request int64
}

// InitLocation asks for checkpoint ID's storage location.
type InitLocation struct {
	ID        int64
	Savepoint bool
	Target    string
}

// SnapshotOperatorCoordinators asks every operator coordinator for its
// state; their events to tasks are held back from now until the trigger
// RPCs of this checkpoint went out, or it aborted.
type SnapshotOperatorCoordinators struct {
	ID int64
}

// SnapshotMasterHooks asks every master hook for its state.
type SnapshotMasterHooks struct {
	ID        int64
	Timestamp time.Time
}

// SendTrigger sends TriggerCheckpoint to every task to trigger; a failed
// send goes to Coordinator.TriggerFailed. When ReleaseCoordinatorEvents is
// set, operator coordinators' held-back events go out once the RPCs were
// sent.
type SendTrigger struct {
	ID                       int64
	Timestamp                time.Time
	Options                  *weirv1.CheckpointOptions
	Tasks                    []*weirv1.ExecutionAttemptID
	ReleaseCoordinatorEvents bool
}

// Finalize writes the metadata and adds the checkpoint to the completed
// store; the outcome goes to Coordinator.Finalized.
type Finalize struct {
	ID        int64
	Location  string
	Savepoint bool
	// Synchronous marks a stop-with-savepoint: sinks commit on it, so it
	// enters the completed store as the job's newest restore point (its
	// files are never discarded there).
	Synchronous bool
	Metadata    *weirv1.CheckpointMetadata
}

// NotifyComplete sends NotifyCheckpointComplete to every task (and operator
// coordinator).
type NotifyComplete struct {
	ID, LastSubsumed int64
	// Final marks the job's last checkpoint: every subtask had reached the
	// end of its input, or it was a synchronous savepoint. Subtasks finish
	// after it — not before, or checkpoints could no longer be triggered
	// for the subtasks still draining.
	Final bool
	// Repeat: a final notification sent again to the subtasks that have
	// not finished (see finalNotice).
	Repeat bool
	Tasks  []*weirv1.ExecutionAttemptID
}

// NotifyAborted sends NotifyCheckpointAborted to every task (and operator
// coordinator, releasing events it held back for this checkpoint).
type NotifyAborted struct {
	ID    int64
	Tasks []*weirv1.ExecutionAttemptID
}

// DiscardState deletes a checkpoint location and/or acknowledged state.
type DiscardState struct {
	// ID is the aborted checkpoint whose location this is; its references
	// to shared state are released. Zero when nothing was acknowledged.
	ID       int64
	Location string
	States   []*weirv1.SubtaskState
}

// RequestDone resolves a trigger request: ID and Path on success, Err
// (a *Failure) otherwise.
type RequestDone struct {
	Request int64
	ID      int64
	Path    string
	Err     error
}

// FailJob asks the JobManager to fail the job over: too many checkpoints
// failed in a row, or a synchronous savepoint failed.
type FailJob struct {
	Cause error
}

func (AllocateID) isEffect()                   {}
func (InitLocation) isEffect()                 {}
func (SnapshotOperatorCoordinators) isEffect() {}
func (SnapshotMasterHooks) isEffect()          {}
func (SendTrigger) isEffect()                  {}
func (Finalize) isEffect()                     {}
func (NotifyComplete) isEffect()               {}
func (NotifyAborted) isEffect()                {}
func (DiscardState) isEffect()                 {}
func (RequestDone) isEffect()                  {}
func (FailJob) isEffect()                      {}

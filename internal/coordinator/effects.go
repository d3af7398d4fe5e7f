package coordinator

import (
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Effect is an action the coordinator decided on and the driver carries out.
type Effect interface{ isEffect() }

// PrepareCheckpoint asks for the next checkpoint ID and its storage
// location; the answer goes to Coordinator.Prepared.
type PrepareCheckpoint struct {
	Request   int64
	Savepoint bool
	Target    string
}

// SendTrigger sends TriggerCheckpoint to every task to trigger; a failed
// send goes to Coordinator.TriggerFailed.
type SendTrigger struct {
	ID        int64
	Timestamp time.Time
	Options   *weirv1.CheckpointOptions
	Tasks     []*weirv1.ExecutionAttemptID
}

// Finalize writes the metadata and adds the checkpoint to the completed
// store; the outcome goes to Coordinator.Finalized.
type Finalize struct {
	ID        int64
	Location  string
	Savepoint bool
	Metadata  *weirv1.CheckpointMetadata
}

// NotifyComplete sends NotifyCheckpointComplete to every task.
type NotifyComplete struct {
	ID, LastSubsumed int64
	Tasks            []*weirv1.ExecutionAttemptID
}

// NotifyAborted sends NotifyCheckpointAborted to every task.
type NotifyAborted struct {
	ID    int64
	Tasks []*weirv1.ExecutionAttemptID
}

// DiscardState deletes a checkpoint location and/or acknowledged state.
type DiscardState struct {
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
// failed in a row.
type FailJob struct {
	Cause error
}

func (PrepareCheckpoint) isEffect() {}
func (SendTrigger) isEffect()       {}
func (Finalize) isEffect()          {}
func (NotifyComplete) isEffect()    {}
func (NotifyAborted) isEffect()     {}
func (DiscardState) isEffect()      {}
func (RequestDone) isEffect()       {}
func (FailJob) isEffect()           {}

package scheduler

import (
	"time"

	"github.com/weirproject/weir/internal/restart"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Effect is something the driver must do; Ready returns them in the order
// they were decided.
type Effect interface{ effect() }

// StateChanged: the job went from one state to another (log it, set the
// state metric).
type StateChanged struct{ From, To weirv1.JobState }

// Deploy the subtasks, each to its TaskManager, starting from the
// checkpoint the driver prepared for restart Restart (restart 0: where
// the job starts). A deployment that fails is reported back as the
// attempt FAILED.
type Deploy struct {
	Restart int64
	Execs   []Exec
}

// CancelTasks asks the TaskManagers to cancel these attempts. One that
// cannot be reached no longer runs them: report it CANCELED.
type CancelTasks struct{ Execs []Exec }

// StartCheckpoints starts the checkpoint coordinator on these subtasks.
// Soon: the first checkpoint is due at once (the subtasks were adopted
// from a previous leader, and went a while without one).
type StartCheckpoints struct {
	Tasks []Exec
	Soon  bool
}

// StopCheckpoints stops the coordinator, aborting what is in flight.
type StopCheckpoints struct {
	Reason weirv1.CheckpointFailureReason
}

// TaskFinished tells the coordinator a subtask finished.
type TaskFinished struct{ Attempt *weirv1.ExecutionAttemptID }

// RestartStarted: a failover began (metrics, logs).
type RestartStarted struct {
	Restart int64
	Regions []int
	Full    bool
	Cause   string
	Delay   time.Duration
	// Rescale: the restart changes the job's parallelism; it is no
	// failure and uses no restart budget.
	Rescale bool
}

// PersistStatus stores the restart count and the strategy's budget, so a
// new leader carries them on.
type PersistStatus struct {
	Restarts int32
	Budget   restart.Budget
}

// ArmTimer: call RestartDue(Restart) at At.
type ArmTimer struct {
	Restart int64
	At      time.Time
}

// PrepareRestore: wait for checkpoints still being finalized, find the
// newest readable completed checkpoint, reset the coordinator to it, and
// answer with RestoreReady. Full: no subtask of the job runs, so files no
// retained checkpoint references may be swept.
type PrepareRestore struct {
	Restart int64
	Full    bool
}

// AwaitSlots: the restart waits for slots; ask NextSlotRequest and offer
// them when the cluster has them.
type AwaitSlots struct{ Restart int64 }

// FinalCheckpoint: every subtask reached the end of its input; trigger
// checkpoints until one completes, while Generation is current.
type FinalCheckpoint struct{ Generation int64 }

// Terminated: the job reached State; close the coordinator and, when the
// state is globally terminal, apply checkpoint retention and remove the
// job's HA data.
type Terminated struct{ State weirv1.JobState }

// ArmAdoption: call AdoptionDue at At.
type ArmAdoption struct{ At time.Time }

// Adopted: the job took over these attempts, which a previous leader
// deployed; they run on, and the coordinator checkpoints them. The latest
// completed checkpoint may not have reached their sinks: notify it again
// (committing twice is a no-op).
type Adopted struct{ Execs []Exec }

func (ArmAdoption) effect()      {}
func (Adopted) effect()          {}
func (StateChanged) effect()     {}
func (Deploy) effect()           {}
func (CancelTasks) effect()      {}
func (StartCheckpoints) effect() {}
func (StopCheckpoints) effect()  {}
func (TaskFinished) effect()     {}
func (RestartStarted) effect()   {}
func (PersistStatus) effect()    {}
func (ArmTimer) effect()         {}
func (PrepareRestore) effect()   {}
func (AwaitSlots) effect()       {}
func (FinalCheckpoint) effect()  {}
func (Terminated) effect()       {}

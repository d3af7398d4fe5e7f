package scheduler

import (
	"fmt"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Exec is one attempt of one subtask.
type Exec struct {
	Attempt *weirv1.ExecutionAttemptID
	Vertex  *weirv1.JobVertex
	Source  bool
	Region  int
	Slot    SlotKey
	// TaskManager runs it; empty until it is placed.
	TaskManager string
	State       weirv1.ExecutionState
	Failure     string
	EndOfInput  bool
	// Start is when it was deployed, End when it reached a terminal state.
	Start, End time.Time
}

// Terminal reports whether the attempt stopped for good.
func (e *Exec) Terminal() bool { return e.State.Terminal() }

// Name is the subtask's name as users see it: "vertex (2/4)".
func (e *Exec) Name() string {
	return fmt.Sprintf("%s (%d/%d)", e.Vertex.GetName(), e.Attempt.GetSubtaskIndex()+1, e.Vertex.GetParallelism())
}

// Exception is a failure in the job's history, as Flink's exception
// history keeps it.
type Exception struct {
	Time        time.Time
	Task        string // empty for a failure of the job as a whole
	TaskManager string
	Cause       string
	// Regions the failure restarted; nil when it was not restarted.
	Regions []int
	Full    bool
}

// maxExceptions bounds the exception history.
const maxExceptions = 32

// SameAttempt reports whether a and b name one attempt of one subtask.
func SameAttempt(a, b *weirv1.ExecutionAttemptID) bool {
	return a.GetVertex() == b.GetVertex() && a.GetSubtaskIndex() == b.GetSubtaskIndex() &&
		a.GetAttempt() == b.GetAttempt() && a.GetSession() == b.GetSession() && a.GetJobId() == b.GetJobId()
}

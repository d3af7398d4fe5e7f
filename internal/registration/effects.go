package registration

import "time"

// Effect is something the driver must do; Ready returns them in the order
// they were decided, and the driver carries them out in that order (a
// Register must not go out before the CancelSubtasks ahead of it is done).
type Effect interface{ isEffect() }

// Register asks the JobManager at Addr to register this TaskManager,
// bounded by Timeout; answer with Registered(Seq, ...). The driver dials
// Addr first when its connection goes elsewhere, and closes the old one.
// The call reports the subtasks running here (and those whose end no
// JobManager heard yet).
type Register struct {
	Seq     uint64
	Addr    string
	Timeout time.Duration
}

// Heartbeat renews Registration with the JobManager at Addr, bounded by
// Timeout; answer with HeartbeatDone(Seq, ...). It carries the subtasks'
// loads, which the driver measures when it sends it.
type Heartbeat struct {
	Seq          uint64
	Addr         string
	Registration string
	Timeout      time.Duration
}

// Fence makes the TaskManager obey only JobManagerID from now on: a
// deposed leader that wakes up cannot deploy, trigger or cancel here.
type Fence struct {
	JobManagerID string
	Registration string
}

// CancelSubtasks cancels every subtask running here but those Keep names
// (by ExecutionAttemptID.Key) and waits until they stopped, before the
// driver carries out the next effect.
type CancelSubtasks struct {
	Reason string
	Keep   []string
}

// Unregistered: the registration ended (log it).
type Unregistered struct{ Reason string }

func (Register) isEffect()       {}
func (Heartbeat) isEffect()      {}
func (Fence) isEffect()          {}
func (CancelSubtasks) isEffect() {}
func (Unregistered) isEffect()   {}

package checkpointing

import (
	"context"
	"sync"
	"time"
)

// OperatorCoordinator is the JobManager-side part of an operator, such as a
// source's split enumerator. It is checkpointed before the tasks, and the
// events it sends to tasks after its snapshot must reach them after the
// checkpoint's barrier: they go through an EventValve that the driver
// closes for the snapshot and opens once the trigger RPCs went out.
type OperatorCoordinator interface {
	Name() string
	CheckpointCoordinator(ctx context.Context, checkpointID int64) ([]byte, error)
	NotifyCheckpointComplete(checkpointID int64)
	NotifyCheckpointAborted(checkpointID int64)
	ResetToCheckpoint(checkpointID int64, state []byte) error
}

// MasterHook snapshots state outside the job's tasks (e.g. an external
// system's position) as part of every checkpoint.
type MasterHook interface {
	Name() string
	TriggerCheckpoint(ctx context.Context, checkpointID int64, timestamp time.Time) ([]byte, error)
	RestoreCheckpoint(ctx context.Context, checkpointID int64, state []byte) error
}

// EventValve holds back an operator coordinator's events to tasks while a
// checkpoint is between the coordinator's snapshot and the tasks' trigger.
// It is closed per checkpoint and opens once no checkpoint holds it: the end
// of another checkpoint (its trigger RPCs returning, its abort) must not
// release events that belong behind this one's barrier.
type EventValve struct {
	mu        sync.Mutex
	closed    bool
	holds     map[int64]struct{} // checkpoints holding the valve closed
	releasing bool
	held      []func()
}

// Send delivers an event now, or when the valve opens again, in order.
func (v *EventValve) Send(deliver func()) {
	v.mu.Lock()
	if v.closed {
		v.held = append(v.held, deliver)
		v.mu.Unlock()
		return
	}
	v.mu.Unlock()
	deliver()
}

// close holds events back for checkpoint id.
func (v *EventValve) close(id int64) {
	v.mu.Lock()
	if v.holds == nil {
		v.holds = map[int64]struct{}{}
	}
	v.holds[id] = struct{}{}
	v.closed = true
	v.mu.Unlock()
}

// open ends checkpoint id's hold; a valve no checkpoint holds any more
// releases the held events in the order they were sent. Events sent while
// releasing wait behind them, so order is kept; only one caller releases
// at a time.
func (v *EventValve) open(id int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.holds[id]; !ok {
		return // not held for this checkpoint
	}
	delete(v.holds, id)
	if v.releasing {
		return // the caller releasing now also releases what follows
	}
	v.releasing = true
	for len(v.holds) == 0 {
		held := v.held
		v.held = nil
		if len(held) == 0 {
			v.closed = false
			break
		}
		v.mu.Unlock()
		for _, deliver := range held {
			deliver()
		}
		v.mu.Lock()
	}
	v.releasing = false
}

// CoordinatorHolder pairs an operator coordinator with the valve its
// events go through.
type CoordinatorHolder struct {
	Coordinator OperatorCoordinator
	Valve       *EventValve
}

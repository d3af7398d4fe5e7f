// Package leaderlink carries out a TaskManager's membership with the
// JobManager leader: the effects of internal/registration's state machine
// become calls to the JobManager (register, heartbeat), a fence on the
// calls the TaskManager takes, and the cancel of its subtasks; the
// answers go back to the state machine.
//
// Its owner calls it on one goroutine — the TaskManager's registration
// loop, or the control-plane simulator (internal/sim) — and what it
// reaches is an interface, so the simulator runs this same code on its
// simulated network.
package leaderlink

import (
	"context"
	"log/slog"

	"github.com/weirproject/weir/internal/registration"
)

// Executor runs a call off the loop; its answer comes back through
// Deps.Post.
type Executor interface {
	Go(ctx context.Context, io func(ctx context.Context))
}

// JobManager prepares the calls to the JobManager at an address: what a
// call carries is read on the loop, when it is prepared; the call itself,
// bounded by its timeout, runs off it.
type JobManager interface {
	Register(e registration.Register) func(ctx context.Context) (registration.Registration, error)
	Heartbeat(e registration.Heartbeat) func(ctx context.Context) (reregister bool, err error)
}

// TaskManager is what the membership changes on this TaskManager. Each
// runs on the loop.
type TaskManager interface {
	// Fence: only the JobManager jobManagerID may call from now on.
	Fence(e registration.Fence)
	// CancelAll cancels every subtask but those keep names (by
	// ExecutionAttemptID.Key) and returns once they stopped: the first
	// heartbeat after it must not let the leader deploy beside subtasks it
	// did not keep.
	CancelAll(reason string, keep []string)
	Unregistered(reason string)
}

// Deps is everything a Link works with.
type Deps struct {
	// Context ends the calls in flight when the TaskManager stops; nil:
	// never.
	Context  context.Context
	Executor Executor
	// Post runs f on the loop; called off it.
	Post        func(f func())
	JobManager  JobManager
	TaskManager TaskManager
	Logger      *slog.Logger
}

// Link carries out the registration state machine's effects.
type Link struct {
	sm  *registration.Member
	d   Deps
	log *slog.Logger
	// cancel abandons the newest call: the state machine sends one only
	// when it no longer waits for the one before.
	cancel context.CancelFunc
}

// New makes the link of the membership sm.
func New(sm *registration.Member, d Deps) *Link {
	if d.Context == nil {
		d.Context = context.Background()
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return &Link{sm: sm, d: d, log: d.Logger}
}

// Drain carries out what the state machine decided, and what carrying it
// out made it decide, until nothing is left.
func (l *Link) Drain() {
	for effects := l.sm.Ready(); len(effects) > 0; effects = l.sm.Ready() {
		for _, e := range effects {
			l.apply(e)
		}
	}
}

func (l *Link) apply(e registration.Effect) {
	switch e := e.(type) {
	case registration.Unregistered:
		l.d.TaskManager.Unregistered(e.Reason)
	case registration.CancelSubtasks:
		l.d.TaskManager.CancelAll(e.Reason, e.Keep)
	case registration.Fence:
		l.d.TaskManager.Fence(e)
	case registration.Register:
		call := l.d.JobManager.Register(e)
		l.call(func(ctx context.Context) func() {
			r, err := call(ctx)
			return func() {
				if !l.sm.Registered(e.Seq, r, err) {
					l.log.Debug("late registration answer ignored", "jobmanager", e.Addr, "err", err)
				} else if err != nil {
					l.log.Debug("registration failed; retrying", "jobmanager", e.Addr, "err", err)
				}
			}
		})
	case registration.Heartbeat:
		call := l.d.JobManager.Heartbeat(e)
		l.call(func(ctx context.Context) func() {
			again, err := call(ctx)
			return func() {
				if !l.sm.HeartbeatDone(e.Seq, err == nil && again, err) {
					l.log.Debug("late heartbeat answer ignored", "jobmanager", e.Addr, "err", err)
				} else if err != nil {
					l.log.Debug("heartbeat failed", "jobmanager", e.Addr, "err", err)
				}
			}
		})
	}
}

// call runs rpc off the loop and hands what it returns to the loop,
// followed by what the state machine then decides. A call abandons the
// one before it.
func (l *Link) call(rpc func(ctx context.Context) func()) {
	if l.cancel != nil {
		l.cancel()
	}
	ctx, cancel := context.WithCancel(l.d.Context)
	l.cancel = cancel
	l.d.Executor.Go(ctx, func(ctx context.Context) {
		defer cancel()
		answer := rpc(ctx)
		l.d.Post(func() {
			answer()
			l.Drain()
		})
	})
}

// Close abandons the call in flight.
func (l *Link) Close() {
	if l.cancel != nil {
		l.cancel()
	}
}

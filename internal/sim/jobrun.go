package sim

// The JobManager's job loop here is the production one (internal/jobrun)
// on simulated dependencies: its I/O runs as coroutines on the same
// executor as the checkpoint Driver's, its deploys and cancels go over the
// simulated network, its restores read the simulated completed store, and
// its timers are events.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/jobrun"
	"github.com/weirproject/weir/internal/members"
	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

type (
	simTaskManagers struct{ jm *jobManager }
	simCheckpoints  struct{ jm *jobManager }
	simLifecycle    struct{ jm *jobManager }
	simSlots        struct{ jm *jobManager }
	runClock        struct{ w *world }
)

// newRun is the job loop of the JobManager, which starts the job from
// start (nil: without state).
func (jm *jobManager) newRun(start *completed) *jobrun.Run[*completed] {
	return jobrun.New(jm.sched, start, jobrun.Deps[*completed]{
		Executor: executor{jm},
		// The daemon's loop drains after every message, which also
		// re-arms the coordinator's timer.
		Post: func(f func()) {
			jm.later("job loop", func() {
				f()
				jm.drain()
			})
		},
		Clock:        runClock{jm.w},
		Coordinator:  jm.drv,
		TaskManagers: simTaskManagers{jm},
		Checkpoints:  simCheckpoints{jm},
		Lifecycle:    simLifecycle{jm},
		Slots:        simSlots{jm},
		Logger:       slog.New(slog.DiscardHandler),
	})
}

func (c runClock) Now() time.Time { return c.w.now() }

func (c runClock) AfterFunc(d time.Duration, f func()) func() bool {
	stopped := false
	c.w.after(d, "job loop timer", func() {
		if !stopped {
			stopped = true
			f()
		}
	})
	return func() bool {
		was := !stopped
		stopped = true
		return was
	}
}

// Plan sends each subtask on its own (the simulated TaskManagers chain
// nothing), with its state in the checkpoint from.
func (t simTaskManagers) Plan(e scheduler.Deploy, from *completed) ([]jobrun.Deployment, error) {
	jm := t.jm
	// A rescale deploys the job at its new shape.
	for _, v := range jm.sched.Graph().GetVertices() {
		jm.w.sim.vertices[v.GetName()].parallelism = v.GetParallelism()
	}
	out := make([]jobrun.Deployment, 0, len(e.Execs))
	for _, x := range e.Execs {
		a := x.Attempt
		req := deployment{attempt: a, vertex: x.Vertex.GetName(), final: from != nil && from.final}
		if from != nil {
			req.restoredID = from.id
			for _, st := range from.md.GetSubtasks() {
				// Shared files are reused at the parallelism they were
				// written at; rescaled, a backend starts over.
				if st.GetVertex() == req.vertex && st.GetSubtaskIndex() == a.GetSubtaskIndex() && st.GetParallelism() == x.Vertex.GetParallelism() {
					req.restored = st
				}
			}
			req.refused = jm.w.channelStateRefused(from, req.vertex, x.Vertex.GetParallelism())
		}
		out = append(out, jobrun.Deployment{TaskManager: x.TaskManager, Attempts: []*weirv1.ExecutionAttemptID{a}, Payload: req})
	}
	return out, nil
}

func (t simTaskManagers) Deploy(ctx context.Context, d jobrun.Deployment) error {
	jm, req, tm := t.jm, d.Payload.(deployment), d.TaskManager
	jm.w.logf("jm: deploy %s on %s", req.attempt.Key(), tm)
	return jm.await(ctx, 1, func(done func(error)) {
		jm.callTM(tm, "deploy "+req.attempt.Key(), func() func() {
			err := jm.w.tm(tm).deploy(req)
			return func() { done(err) }
		}, func() { done(errTimeout) })
	})
}

func (t simTaskManagers) Known(tm string) bool { return t.jm.tms.Get(tm) != nil }

// Cancel answers as CancelTask does once the subtask stopped; no answer
// is a timeout (the simulated network answers no call Unavailable: a
// crashed host's calls time out).
//
// A connection to a live TaskManager that breaks under the call
// (connection-reset) answers Unavailable; the cancel may have reached the
// TaskManager or not. Cancel then drops the registration it called, as
// the JobManager's connectionLost does: the TaskManager's subtasks fail
// over, and it registers again, cancelling what it runs first, once a
// heartbeat is told to.
func (t simTaskManagers) Cancel(ctx context.Context, x scheduler.Exec) error {
	jm, a, tm, w := t.jm, x.Attempt, x.TaskManager, t.jm.w
	var reset *members.Member[struct{}]
	err := jm.await(ctx, 1, func(done func(error)) {
		m := jm.tms.Get(tm)
		live := m != nil && !jm.deposed && !w.down[tm] && !w.partitioned[tm] && w.tm(tm).leader == jm.addr
		if live && w.chance(w.cfg.ConnectionResetP) {
			reset = m
			w.fault("connection-reset", "the connection to %s breaks under the cancel of %s", tm, a.Key())
			if w.rng.IntN(2) == 0 {
				w.send(jm.addr, tm, "cancel "+a.Key()+" (its answer lost)", func() {
					if w.tm(tm).leader == jm.addr {
						w.tm(tm).cancelTask(a) //nolint:errcheck // the answer is lost with the connection
					}
				})
			}
			w.after(w.between(time.Millisecond, 50*time.Millisecond), "cancel "+a.Key()+" reset", func() { done(errUnavailable) })
			return
		}
		jm.callTMWait(tm, "cancel "+a.Key(), func(reply func(func())) {
			w.tm(tm).cancelAndWait(a, func(err error) { reply(func() { done(err) }) })
		}, func() { done(errTimeout) })
	})
	if err == nil {
		return nil
	}
	if reset != nil && errors.Is(err, errUnavailable) {
		jm.later("connection lost", func() {
			if jm.tms.Remove(tm, reset.Registration) == nil {
				return // registered again since
			}
			w.logf("jm: %s lost: its connection failed", tm)
			jm.sched.TaskManagerLost(tm, fmt.Sprintf("taskmanager %s lost: connection failed", tm))
			jm.drain()
		})
	}
	return status.Error(code(err), err.Error())
}

// AwaitFinalizations parks until the Driver learned the outcome of every
// checkpoint it was finalizing (settled wakes it).
func (c simCheckpoints) AwaitFinalizations(ctx context.Context) error {
	jm := c.jm
	if jm.drv.Finalizations() == 0 {
		return nil
	}
	return jm.await(ctx, 1, func(done func(error)) { jm.finalized = append(jm.finalized, done) })
}

func (c simCheckpoints) Sweep(context.Context) { c.jm.sweep() }

func (c simCheckpoints) Latest(context.Context) (*completed, error) {
	store := c.jm.w.sim.ha.store
	if len(store) == 0 {
		c.jm.w.logf("jm: a restart starts afresh")
		return nil, nil
	}
	return &store[len(store)-1], nil
}

func (c simCheckpoints) Restore(_ context.Context, from *completed, full bool) error {
	c.jm.restored(from)
	c.jm.w.logf("jm: a restart (whole job: %t) restores from checkpoint %d", full, from.id)
	return nil
}

// restored resets the coordinator to checkpoint c, as the JobManager's
// restore does.
func (jm *jobManager) restored(c *completed) {
	md := &weirv1.CheckpointMetadata{CheckpointId: c.id, Type: weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT}
	if err := jm.drv.Restore(context.Background(), md, fmt.Sprintf("chk-%d", c.id)); err != nil {
		panic(err) // no operator coordinators, no hooks
	}
}

func (l simLifecycle) StateChanged(e scheduler.StateChanged) {
	jm := l.jm
	jm.w.logf("jm: job %s → %s", e.From.FlinkName(), e.To.FlinkName())
	if scheduler.Terminal(e.To) {
		jm.ended = e.To
	}
	if scheduler.GloballyTerminal(e.To) {
		jm.w.sim.ha.ended = e.To // its HA data goes: no leader recovers it
	}
}

func (l simLifecycle) RestartStarted(e scheduler.RestartStarted) {
	l.jm.w.logf("jm: restart %d regions=%v full=%t: %s", e.Restart, e.Regions, e.Full, e.Cause)
}

// TakenAsStopped records the attempts taken as cancelled on their
// TaskManager's word, which must never run afterwards; one taken as
// stopped because its TaskManager was unreachable may still run there
// until that TaskManager registers again, which cancels everything first.
func (l simLifecycle) TakenAsStopped(x scheduler.Exec, gone bool) {
	if gone {
		return
	}
	l.jm.takenAsStopped[x.Attempt.Key()] = x.TaskManager
}

func (simLifecycle) PersistStatus(context.Context, scheduler.PersistStatus) {}

func (l simLifecycle) Adopted(e scheduler.Adopted) {
	l.jm.w.logf("jm: adopted %d subtasks", len(e.Execs))
}

// RecordAttempts writes the record of the attempts to the HA store at
// once, fenced: a deposed leader's write fails.
func (l simLifecycle) RecordAttempts(_ context.Context, seq int64, attempts []scheduler.Placed) error {
	jm := l.jm
	if jm.deposed {
		return errRefused
	}
	if seq <= jm.recordSeq {
		return nil
	}
	jm.recordSeq = seq
	jm.w.sim.ha.attempts = attempts
	return nil
}

// NotifyAdopted notifies the adopted attempts of the checkpoint the job
// started from, as the checkpoint coordinator notifies a completion.
func (c simCheckpoints) NotifyAdopted(ctx context.Context, from *completed, attempts []*weirv1.ExecutionAttemptID) {
	jm := c.jm
	if from == nil {
		return
	}
	_ = jm.await(ctx, len(attempts), func(done func(error)) {
		for _, a := range attempts {
			jm.toTask(a, fmt.Sprintf("notify adopted %s of %d", a.Key(), from.id), func(tm *taskManager) error {
				return tm.notifyComplete(a, from.id, false)
			}, done)
		}
	})
}

func (l simLifecycle) Terminated(_ context.Context, st weirv1.JobState) {
	l.jm.w.logf("jm: job terminated %s", st.FlinkName())
	l.jm.drv.Stop(weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_COORDINATOR_SHUTDOWN)
}

// Take offers the JobManager's free slots, as its slot pool does.
func (s simSlots) Take(prefer []string, offer func([]string)) bool {
	slots := s.jm.freeSlots()
	tms, ok := scheduler.MatchSlots(slots, prefer)
	if !ok {
		s.jm.w.logf("jm: waiting for slots: need %d, free %d", len(prefer), len(slots))
		return false
	}
	offer(tms)
	return true
}

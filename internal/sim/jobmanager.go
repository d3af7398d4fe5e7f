package sim

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirproject/weir/internal/checkpointing"
	"github.com/weirproject/weir/internal/coordinator"
	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/jobrun"
	"github.com/weirproject/weir/internal/members"
	"github.com/weirproject/weir/internal/restart"
	"github.com/weirproject/weir/internal/rpcpolicy"
	"github.com/weirproject/weir/internal/scheduler"
	"github.com/weirproject/weir/internal/storedgraph"
	"github.com/weirproject/weir/internal/sweep"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// errNotFound is the answer for an attempt a node does not have, as gRPC's
// NotFound; errRefused a definite refusal (FailedPrecondition).
var (
	errNotFound = errors.New("not found")
	errRefused  = errors.New("refused")
	errTimeout  = errors.New("deadline exceeded")
	// errUnavailable: the connection broke (gRPC's Unavailable).
	errUnavailable = errors.New("connection failed")
)

// code is the gRPC code a daemon would see for err.
func code(err error) codes.Code {
	switch {
	case err == nil:
		return codes.OK
	case errors.Is(err, errNotFound):
		return codes.NotFound
	case errors.Is(err, errRefused):
		return codes.FailedPrecondition
	case errors.Is(err, errTimeout):
		return codes.DeadlineExceeded
	case errors.Is(err, errUnavailable):
		return codes.Unavailable
	}
	return codes.Unknown
}

// completed is a checkpoint in the completed store.
type completed struct {
	id    int64
	final bool
	// savepoint: a stop-with-savepoint's, whose files are the user's.
	savepoint bool
	md        *weirv1.CheckpointMetadata
}

// jobManager is the simulated JobManager: one job's scheduler and
// checkpoint coordinator, the TaskManagers registered, the slot pool and
// the checkpoint store, driven as internal/jobmanager and the
// checkpointing.Driver drive them.
type jobManager struct {
	w *world
	// addr is this JobManager's host, and its ID as TaskManagers know it.
	addr string
	// deposed: another JobManager leads now; this one does nothing more
	// (its messages are refused, its writes fenced).
	deposed bool
	sched   *scheduler.Job
	// drv is the production checkpoint coordinator's driver, stepped.
	drv *checkpointing.Driver
	// metadata is what the storage wrote and the store has not taken
	// yet, by path.
	metadata map[string]*weirv1.CheckpointMetadata
	// tms are the TaskManagers admitted (the JobManager's own registry).
	tms  *members.Registry[struct{}]
	regs int

	// run carries out what sched decides, as the JobManager's job loop
	// does: it is internal/jobrun's, on simulated dependencies.
	run *jobrun.Run[*completed]
	// finalized are the I/O waiting for no checkpoint to be finalized.
	finalized []func(error)
	// coordWake is the event armed for the coordinator's next deadline.
	coordWake time.Time
	// takenAsStopped are attempts the JobManager took as cancelled on a
	// TaskManager's word (NotFound): none of them may run afterwards.
	takenAsStopped map[string]string
	// ended is the job's terminal state, once it has one.
	ended weirv1.JobState
	// lastCompletion is when a checkpoint last completed.
	lastCompletion time.Time
	completions    int
	// placed: the scheduler decided something since the last check of the
	// slots held.
	placed bool
	// cancelled: a client cancelled the job.
	cancelled bool
	// graphs follows whether the stored graph is the job's, as the
	// JobManager's does.
	graphs storedgraph.Tracker
	// intervalAhead: a refused checkpointing change was stored all the
	// same (its write timed out); the stored interval is not the job's.
	intervalAhead bool
	// recordSeq is the newest record of attempts written.
	recordSeq int64
}

// newJobManager makes the leader addr of job g, which starts from start
// (nil: no state).
func newJobManager(w *world, addr string, g *weirv1.JobGraph, start *completed, adopt *scheduler.Adoption) *jobManager {
	sched, err := scheduler.New(scheduler.Config{
		JobID: "job", Session: addr, Graph: g,
		Strategy: restart.New(g.GetRestartStrategy(), restart.Budget{}, w.now()),
		Adopt:    adopt,
	}, w.clock)
	if err != nil {
		panic(err)
	}
	jm := &jobManager{
		w: w, addr: addr, sched: sched, tms: members.New[struct{}](),
		metadata: map[string]*weirv1.CheckpointMetadata{}, takenAsStopped: map[string]string{},
	}
	jm.drv = jm.newDriver(g)
	jm.run = jm.newRun(start)
	return jm
}

// drain carries out what the scheduler decided, until nothing is left (the
// coordinator's driver carries out its own decisions as they are made).
func (jm *jobManager) drain() {
	if jm.deposed {
		return
	}
	if jm.run.Drain() {
		jm.placed = true // the slot and stored-graph checks run after this step
	}
	jm.armCoordinator()
}

// armCoordinator wakes the driver at its next deadline, as its own timer
// would.
func (jm *jobManager) armCoordinator() {
	next := jm.drv.NextDeadline()
	if next.IsZero() || next.Equal(jm.coordWake) {
		return
	}
	jm.coordWake = next
	jm.w.at(next, "coordinator tick", func() {
		if jm.coordWake.Equal(next) && !jm.deposed {
			jm.coordWake = time.Time{}
			jm.drv.Wake()
			jm.drain()
		}
	})
}

// sweep removes the files of checkpoints up to the newest retained one
// that no retained checkpoint references, as the JobManager's
// sweepCheckpoints does before a whole-job restart (with sweep's own
// selection).
func (jm *jobManager) sweep() {
	var retained []*weirv1.CheckpointMetadata
	var maxID int64
	for _, c := range jm.w.sim.ha.store {
		retained = append(retained, c.md)
		maxID = max(maxID, c.id)
	}
	if maxID == 0 {
		return // nothing completed: any checkpoint may still be finishing
	}
	gone := sweep.Select(jm.w.files.list(), sweep.References(nil, retained, nil), maxID)
	for _, p := range gone {
		jm.w.files.remove(p)
	}
	if len(gone) > 0 {
		jm.w.logf("jm: swept %d files no retained checkpoint references", len(gone))
	}
}

func (jm *jobManager) freeSlots() []string {
	return jm.tms.FreeSlots(jm.sched.View().SlotsHeld())
}

// toTask sends a request for attempt a to the TaskManager the job placed
// it on; done is told its outcome once.
func (jm *jobManager) toTask(a *weirv1.ExecutionAttemptID, name string, handle func(*taskManager) error, done func(error)) {
	w := jm.w
	tm := ""
	for _, x := range jm.sched.View().Execs {
		if scheduler.SameAttempt(x.Attempt, a) {
			tm = x.TaskManager
		}
	}
	if tm == "" || jm.tms.Get(tm) == nil {
		done(fmt.Errorf("unknown subtask attempt %s", a.Key()))
		return
	}
	jm.callTM(tm, name, func() func() {
		err := handle(w.tm(tm))
		return func() { done(err) }
	}, func() { done(errTimeout) })
}

// register admits a TaskManager (again): whatever it ran before for an
// earlier registration is gone; what it reports is adopted, or kept when
// the job still has it there, and the rest is to be cancelled.
func (jm *jobManager) register(id string, slots int, reports []scheduler.AttemptReport) (string, []string, error) {
	if jm.deposed {
		return "", nil, errRefused
	}
	jm.regs++
	reg := fmt.Sprintf("r%d", jm.regs)
	old := jm.tms.Register(id, reg, slots, struct{}{}, jm.w.now())
	jm.w.logf("jm: %s registered (%s)", id, reg)
	if old != nil {
		jm.sched.TaskManagerLost(id, "taskmanager registered again")
		jm.drain()
	}
	var keep []string
	adopting := jm.sched.Adopting()
	for _, r := range reports {
		if k, _ := jm.sched.Report(id, r); k {
			keep = append(keep, r.Attempt.Key())
		}
	}
	if adopting {
		// Counted with the faults, to show how often the seeds adopt.
		jm.w.faults["adopted-attempts"] += len(keep)
	}
	if len(reports) > 0 {
		jm.w.logf("jm: %s reported %d attempts, kept %d", id, len(reports), len(keep))
	}
	jm.drain()
	return reg, keep, nil
}

// heartbeat renews a registration and reconciles the attempts the
// TaskManager runs with the job's: it answers whether to register again.
func (jm *jobManager) heartbeat(id, reg string, running []*weirv1.ExecutionAttemptID) bool {
	if jm.deposed {
		return true
	}
	m, confirmed := jm.tms.Heartbeat(id, reg, jm.w.now())
	if m == nil {
		return true
	}
	for _, a := range running {
		if !jm.sched.Holds(a, id) {
			jm.w.logf("jm: %s runs %s, which no job has: cancelling it", id, a.Key())
			jm.callTM(id, "cancel stray "+a.Key(), func() func() {
				jm.w.tm(id).cancelTask(a) //nolint:errcheck // the next heartbeat shows whether it stopped
				return func() {}
			}, func() {})
		}
	}
	if confirmed {
		jm.run.TrySchedule()
		jm.drain()
	}
	return false
}

// checkHeartbeats declares TaskManagers lost whose heartbeats stopped.
func (jm *jobManager) checkHeartbeats() {
	for _, m := range jm.tms.Expire(jm.w.now(), heartbeatTimeout) {
		id := m.ID
		jm.w.logf("jm: %s lost: no heartbeat for %s", id, heartbeatTimeout)
		jm.sched.TaskManagerLost(id, fmt.Sprintf("taskmanager %s lost", id))
		jm.drain()
	}
	if !jm.deposed {
		jm.w.after(heartbeatInterval, "heartbeat check", jm.checkHeartbeats)
	}
}

// report is a TaskManager's state report for a subtask.
func (jm *jobManager) report(a *weirv1.ExecutionAttemptID, st weirv1.ExecutionState, endOfInput bool, cause string) error {
	if jm.deposed {
		// A JobManager that lost its leadership refuses the gateway as
		// Unavailable: the TaskManager tries again, at the new leader.
		return errUnavailable
	}
	defer jm.drain()
	if endOfInput {
		if !jm.sched.EndOfInput(a) {
			return errNotFound
		}
		return nil
	}
	if !jm.sched.TaskStateChanged(a, st, cause) {
		return errNotFound
	}
	return nil
}

// acknowledge hands an ack to the coordinator.
func (jm *jobManager) acknowledge(tm string, ack *weirv1.AcknowledgeCheckpointRequest) {
	if jm.deposed {
		return
	}
	r, _ := jm.drv.Acknowledge(ack)
	if r == coordinator.AckSuccess && !jm.current(ack.GetAttempt(), tm) {
		jm.w.fail("checkpoint %d took the ack of %s, which is not a current attempt on %s", ack.GetCheckpointId(), ack.GetAttempt().Key(), tm)
	}
	jm.drain()
}

// current reports whether a is its subtask's current attempt, on tm, and
// neither failed nor cancelled (a finished one acks what it took before
// it finished).
func (jm *jobManager) current(a *weirv1.ExecutionAttemptID, tm string) bool {
	for _, x := range jm.sched.View().Execs {
		if scheduler.SameAttempt(x.Attempt, a) {
			return x.TaskManager == tm && (!x.Terminal() || x.State == weirv1.ExecutionState_EXECUTION_STATE_FINISHED)
		}
	}
	return false
}

// The client's calls, as the JobManager's API carries them out. After each
// one the stored graph must be the scheduler's: what a new leader recovers
// is what the job runs, or is being rescaled to.

// clientCancel cancels the job.
func (jm *jobManager) clientCancel() {
	if err := jm.sched.Cancel(); err != nil {
		jm.w.logf("client: cancel refused: %v", err)
		return
	}
	jm.w.logf("client: job cancelled")
	jm.cancelled = true
	jm.drain()
}

// clientCheckpoint triggers a checkpoint, as `weir checkpoint trigger`
// does: it runs beside any other, up to max-concurrent.
func (jm *jobManager) clientCheckpoint() {
	if jm.sched.State() != weirv1.JobState_JOB_STATE_RUNNING {
		return
	}
	jm.w.logf("client: trigger a checkpoint")
	jm.drv.Request(coordinator.Manual, "", func(checkpointing.Result) {})
	jm.drain()
}

// clientStop stops the job with a savepoint, as `weir job stop` does:
// the subtasks finish once it completed, and the job is FINISHED; a
// savepoint that fails fails the job over, which then runs on.
func (jm *jobManager) clientStop() {
	if jm.sched.State() != weirv1.JobState_JOB_STATE_RUNNING {
		return
	}
	jm.w.logf("client: stop with a savepoint")
	jm.drv.RequestStop("savepoints", false, func(checkpointing.Result) {})
	jm.drain()
}

// clientRescale takes a rescale's checkpoint and then rescales the job
// to g, as RescaleJob does: the scheduler takes the rescale, then it is
// stored; a rescale refused resumes periodic checkpoints.
func (jm *jobManager) clientRescale(g *weirv1.JobGraph) {
	if jm.sched.State() != weirv1.JobState_JOB_STATE_RUNNING {
		return
	}
	jm.w.logf("client: rescale to %s", parallelisms(g))
	jm.drv.Request(coordinator.RescaleCheckpoint, "", func(r checkpointing.Result) {
		// No longer the leader (later runs nothing): its store writes are
		// fenced.
		jm.later("rescale checkpoint done", func() { jm.rescaleCheckpointed(g, r.Err) })
	})
	jm.drain()
}

// rescaleCheckpointed goes on with a rescale once its checkpoint is done.
func (jm *jobManager) rescaleCheckpointed(g *weirv1.JobGraph, err error) {
	if err != nil {
		jm.w.logf("client: rescale refused: its checkpoint failed: %v", err)
		jm.drv.ResumePeriodic()
		return
	}
	change := jm.graphs.Begin()
	jm.alignWhileLagging(g)
	if err := jm.sched.Rescale(g); err != nil {
		jm.w.logf("client: rescale refused: %v", err)
		jm.graphs.Abandon(change)
		jm.alignWhileLagging(g)
		jm.drv.ResumePeriodic()
		return
	}
	if jm.w.chance(jm.w.cfg.GraphStoreFailP) {
		// etcd does not take it before the call's deadline: the call
		// fails, the rescale goes on, and storing it is retried.
		jm.w.fault("graph-store", "storing the rescaled graph fails past the call's deadline; retried in the background")
		jm.storeLater(g, change, rpcpolicy.Backoff{First: 500 * time.Millisecond, Max: 10 * time.Second})
	} else {
		// Stored: it supersedes any rescale still being stored.
		jm.w.sim.ha.graph = g
		jm.graphs.Stored(change)
		jm.alignWhileLagging(g)
		jm.intervalAhead = false
		jm.checkStored("rescale")
	}
	jm.drain()
}

// storeLater stores g until the store takes it, a later change was
// stored, or this JobManager is deposed, as the JobManager's storeLater.
func (jm *jobManager) storeLater(g *weirv1.JobGraph, change storedgraph.Change, backoff rpcpolicy.Backoff) {
	w := jm.w
	w.after(backoff.Next(), "store graph", func() {
		if scheduler.Terminal(jm.sched.State()) {
			jm.graphs.End() // the job ended: its HA data goes, not comes back
		}
		if jm.deposed || !jm.graphs.Retry(change) {
			return // fenced, superseded by a change that was stored, or ended
		}
		if w.chance((1 + w.cfg.GraphStoreFailP) / 2) {
			w.fault("graph-store", "storing the rescaled graph fails again")
			jm.storeLater(g, change, backoff)
			return
		}
		w.logf("jm: the rescaled graph is stored")
		w.sim.ha.graph = g
		jm.graphs.Stored(change)
		jm.alignWhileLagging(g)
		jm.intervalAhead = false
		jm.checkStored("rescale stored in the background")
	})
}

// clientCheckpointing changes the checkpoint interval, as
// ConfigureCheckpointing does: the graph the job shows, with the new
// interval, is stored, then applied.
func (jm *jobManager) clientCheckpointing(interval time.Duration) {
	g := proto.Clone(jm.sched.View().Graph).(*weirv1.JobGraph)
	g.Checkpointing.Interval = durationpb.New(interval)
	if jm.w.chance(0.02) {
		// Refused (Unavailable), and not applied; or stored although the
		// call timed out, and not applied either.
		applied := jm.w.rng.IntN(2) == 0
		jm.w.fault("graph-store", "storing the checkpointing change fails (applied in etcd: %t): refused", applied)
		if applied && !jm.graphs.Lagging() {
			// What a new leader recovers differs from the job in its
			// interval only, which the next change sets right.
			jm.w.sim.ha.graph = g
			jm.intervalAhead = true
		}
		return
	}
	jm.intervalAhead = false
	jm.w.sim.ha.graph = g
	if !jm.sched.UpdateCheckpointing(g.GetCheckpointing()) {
		return
	}
	jm.w.logf("client: checkpoint interval %s", interval)
	jm.graphs.StoredCurrent() // it holds any rescale being stored in the background
	jm.alignWhileLagging(g)
	jm.checkStored("checkpointing change")
	jm.drain()
}

func (jm *jobManager) checkStored(call string) {
	if jm.graphs.Lagging() {
		return // the stored graph lags, and storing it is retried
	}
	if jm.intervalAhead {
		// A refused checkpointing change that etcd applied: only the
		// interval differs.
		g := proto.Clone(jm.w.sim.ha.graph).(*weirv1.JobGraph)
		g.Checkpointing.Interval = jm.sched.Graph().GetCheckpointing().GetInterval()
		if !proto.Equal(g, jm.sched.Graph()) {
			jm.w.fail("after a %s the stored graph (%s) differs from the job's (%s) in more than the interval", call, parallelisms(g), parallelisms(jm.sched.Graph()))
		}
		return
	}
	switch jm.sched.State() {
	case weirv1.JobState_JOB_STATE_CREATED, weirv1.JobState_JOB_STATE_RUNNING, weirv1.JobState_JOB_STATE_RESTARTING:
	default:
		return // being stopped for good: its shape no longer matters
	}
	if !proto.Equal(jm.w.sim.ha.graph, jm.sched.Graph()) {
		jm.w.fail("after a %s the stored graph (%s, interval %s) is not the job's (%s, interval %s): a new leader would run another job",
			call, parallelisms(jm.w.sim.ha.graph), jm.w.sim.ha.graph.GetCheckpointing().GetInterval().AsDuration(),
			parallelisms(jm.sched.Graph()), jm.sched.Graph().GetCheckpointing().GetInterval().AsDuration())
	}
}

// alignWhileLagging makes the job's checkpoints aligned while the stored
// graph lags, if it has a broadcast edge, as the JobManager's does.
func (jm *jobManager) alignWhileLagging(g *weirv1.JobGraph) {
	if !jobgraph.HasBroadcastEdge(g) {
		return
	}
	aligned := jm.graphs.Lagging()
	jm.drv.Reconfigure(coordinator.Reconfiguration{Aligned: &aligned})
}

func parallelisms(g *weirv1.JobGraph) string {
	var s []string
	for _, v := range g.GetVertices() {
		s = append(s, fmt.Sprintf("%s×%d", v.GetName(), v.GetParallelism()))
	}
	return strings.Join(s, " ")
}

// callTM sends a request to TaskManager tm, which obeys only the leader it
// registered with: another JobManager's call is refused, and the caller
// handles that as it handles no answer (failed).
func (jm *jobManager) callTM(tm, name string, handle func() func(), failed func()) {
	jm.callTMWait(tm, name, func(reply func(func())) { reply(handle()) }, failed)
}

// callTMWait is callTM for a call the TaskManager answers when it has its
// answer (handle calls reply).
func (jm *jobManager) callTMWait(tm, name string, handle func(reply func(func())), failed func()) {
	w := jm.w
	w.callWait(jm.addr, tm, name, rpcTimeout, func(reply func(func())) {
		if w.tm(tm).leader != jm.addr {
			reply(failed)
			return
		}
		handle(reply)
	}, failed)
}

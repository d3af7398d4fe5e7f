// Package jobrun carries out what a job's scheduler decides: it deploys
// and cancels subtasks, prepares each restart's restore, arms the restart
// timers, offers slots, takes the final checkpoint and ends the job's run.
//
// It is the JobManager's job loop without its I/O. Its owner calls it on
// one goroutine — the JobManager's loop for the job, or the control-plane
// simulator (internal/sim) — and everything it reaches is an interface:
// the TaskManagers, the checkpoint store and storage, the slot pool, the
// clock, and the executor that runs each I/O. The simulator runs this same
// code on simulated ones, so what it explores is the daemon's own dispatch:
// which effect becomes which call, what an answer means, what is retried.
package jobrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/checkpointing"
	"github.com/weirproject/weir/internal/coordinator"
	"github.com/weirproject/weir/internal/rpcpolicy"
	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Executor runs an I/O off the loop: on a goroutine of its own in the
// daemon, as a coroutine at a later simulated time in the simulator. An
// I/O feeds its outcome back through Deps.Post.
type Executor interface {
	Go(ctx context.Context, io func(ctx context.Context))
}

// Clock is the loop's time: the scheduler's deadlines are read against
// Now, and AfterFunc calls f (from any goroutine) once d passed, unless
// stopped first.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Coordinator is the job's checkpoint coordinator, as the loop drives it.
type Coordinator interface {
	Start(tasks []coordinator.Task)
	// StartSoon starts as Start does, the first checkpoint after the
	// minimum pause.
	StartSoon(tasks []coordinator.Task)
	Stop(reason weirv1.CheckpointFailureReason)
	TaskFinished(a *weirv1.ExecutionAttemptID)
	// Request calls done with the checkpoint's outcome, on the
	// coordinator's loop.
	Request(kind coordinator.RequestKind, target string, done func(checkpointing.Result))
}

// Deployment is what one deploy call sends: subtasks that go to one
// TaskManager together (a chain, head first), and what the transport
// makes of them.
type Deployment struct {
	TaskManager string
	Attempts    []*weirv1.ExecutionAttemptID
	Payload     any
}

// TaskManagers reaches the TaskManagers the job's subtasks run on.
type TaskManagers[RP comparable] interface {
	// Plan builds the deployments of e, which start from rp (the zero
	// RP: no state); an error fails the job. On the loop.
	Plan(e scheduler.Deploy, rp RP) ([]Deployment, error)
	// Deploy sends one deployment. I/O.
	Deploy(ctx context.Context, d Deployment) error
	// Known reports whether tm is a TaskManager the job deployed to and
	// can still call. On the loop.
	Known(tm string) bool
	// Cancel asks x's TaskManager to cancel it; the error carries a gRPC
	// status, read by rpcpolicy.Cancel. A connection that failed
	// (Unavailable) is Cancel's to act on before it returns: the
	// TaskManager it used is dropped, so nothing is scheduled onto it
	// again and its subtasks fail over. I/O.
	Cancel(ctx context.Context, x scheduler.Exec) error
}

// Checkpoints is the job's checkpoint store and storage, as a restart
// uses them. Each is I/O.
type Checkpoints[RP comparable] interface {
	// AwaitFinalizations waits until no checkpoint is being finalized: a
	// _metadata write in flight may still add a newer checkpoint to the
	// store, which the restore must then start from.
	AwaitFinalizations(ctx context.Context) error
	// Sweep removes the files no retained checkpoint references, before
	// a whole-job restart (no subtask of the job writes then).
	Sweep(ctx context.Context)
	// Latest is the newest readable retained checkpoint, or where the job
	// first started; the zero RP: start without state.
	Latest(ctx context.Context) (RP, error)
	// Restore resets the coordinator to rp, which a restart of the
	// whole job (full) or of some regions deploys from.
	Restore(ctx context.Context, rp RP, full bool) error
	// NotifyAdopted tells attempts a new leader adopted that rp, the
	// checkpoint it started from, completed: the previous leader may have
	// stored it and died before its sinks heard of it.
	NotifyAdopted(ctx context.Context, rp RP, attempts []*weirv1.ExecutionAttemptID)
}

// Lifecycle is told what the job's run goes through.
type Lifecycle interface {
	// StateChanged and RestartStarted are for logs and metrics. On the
	// loop.
	StateChanged(e scheduler.StateChanged)
	RestartStarted(e scheduler.RestartStarted)
	// Adopted: the job took over attempts a previous leader deployed; the
	// driver makes them reachable before the notification goes out. On the
	// loop.
	Adopted(e scheduler.Adopted)
	// TakenAsStopped: x is taken as cancelled without x's own report:
	// on its TaskManager's word that it does not have x, or (gone) because
	// the TaskManager cannot be reached, which then cancels what it runs
	// before it registers again. On the loop.
	TakenAsStopped(x scheduler.Exec, gone bool)
	// PersistStatus stores the restart count and budget for a new leader;
	// a failure loses only the count. I/O.
	PersistStatus(ctx context.Context, e scheduler.PersistStatus)
	// RecordAttempts stores every subtask's current attempt for a new
	// leader to adopt (scheduler.Adoption), before any of them is
	// deployed: an attempt that may run is always in the record, or was
	// replaced in it. A record with a lower seq than one already stored
	// is not stored. An error keeps the deployment from going out. I/O.
	RecordAttempts(ctx context.Context, seq int64, attempts []scheduler.Placed) error
	// Terminated ends the job's run here: the coordinator closes and,
	// for a globally terminal state, the job's checkpoints follow the
	// retention policy and its HA data goes. I/O.
	Terminated(ctx context.Context, st weirv1.JobState)
}

// Slots hands out free slots. Take calls offer, on the loop, with a
// TaskManager ID per entry of prefer (scheduler.MatchSlots: the one it
// names where it has a slot free), under whatever keeps two jobs from
// taking one slot; false, without calling it, when fewer are free.
type Slots interface {
	Take(prefer []string, offer func(taskManagers []string)) bool
}

// Deps is everything a Run works with.
type Deps[RP comparable] struct {
	// Context is cancelled when the run stops here; nil: never.
	Context  context.Context
	Executor Executor
	// Post runs f on the loop, later; it never blocks. The I/O, the
	// timers and the coordinator's callbacks feed back through it.
	Post         func(f func())
	Clock        Clock
	Coordinator  Coordinator
	TaskManagers TaskManagers[RP]
	Checkpoints  Checkpoints[RP]
	Lifecycle    Lifecycle
	Slots        Slots
	Logger       *slog.Logger
}

// FinalCheckpointRetry is the pause before a failed final checkpoint is
// triggered again.
const FinalCheckpointRetry = 100 * time.Millisecond

// finalizeWait bounds one wait for the checkpoints being finalized; a
// restart that is still wanted then waits again.
const finalizeWait = 30 * time.Second

// Run carries out one job's scheduler effects. All its methods run on the
// loop; RP is where a restart deploys from (a checkpoint's metadata and
// path), opaque to the run.
type Run[RP comparable] struct {
	sm  *scheduler.Job
	d   Deps[RP]
	log *slog.Logger
	// timers are the restart timers, by restart; retries the pauses
	// before a cancel or a final checkpoint is tried again.
	timers  map[int64]func() bool
	retries map[int]func() bool
	retry   int
	// from is where each restart deploys from (restart 0: the job's
	// start), set by its restore.
	from map[int64]RP
	// recordSeq orders the attempt records of successive deployments.
	recordSeq int64
}

// adoptionTimer keys the adoption's deadline among the restart timers.
const adoptionTimer = -1

// New makes the run of the job sm schedules, which starts from start.
func New[RP comparable](sm *scheduler.Job, start RP, d Deps[RP]) *Run[RP] {
	if d.Context == nil {
		d.Context = context.Background()
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return &Run[RP]{sm: sm, d: d, log: d.Logger, timers: map[int64]func() bool{}, retries: map[int]func() bool{}, from: map[int64]RP{0: start}}
}

// Drain carries out the effects the scheduler decided, and those the
// carrying out made it decide (a deployment that cannot be built fails
// the job), until none is left. It reports whether there were any.
func (r *Run[RP]) Drain() bool {
	did := false
	for effects := r.sm.Ready(); len(effects) > 0; effects = r.sm.Ready() {
		did = true
		for _, e := range effects {
			r.process(e)
		}
	}
	return did
}

// StopTimers stops the restart timers and the retries' pauses: the run
// stops here.
func (r *Run[RP]) StopTimers() {
	for id, stop := range r.timers {
		stop()
		delete(r.timers, id)
	}
	for n, stop := range r.retries {
		stop()
		delete(r.retries, n)
	}
}

func (r *Run[RP]) process(e scheduler.Effect) {
	switch e := e.(type) {
	case scheduler.StateChanged:
		r.d.Lifecycle.StateChanged(e)
	case scheduler.Deploy:
		r.deploy(e)
	case scheduler.CancelTasks:
		for _, x := range e.Execs {
			r.cancel(x, rpcpolicy.Retries())
		}
	case scheduler.StartCheckpoints:
		tasks := make([]coordinator.Task, 0, len(e.Tasks))
		for _, t := range e.Tasks {
			tasks = append(tasks, coordinator.Task{Attempt: t.Attempt, Source: t.Source})
		}
		r.log.Info("all subtasks running; checkpoint coordinator started")
		if e.Soon {
			r.d.Coordinator.StartSoon(tasks)
		} else {
			r.d.Coordinator.Start(tasks)
		}
	case scheduler.StopCheckpoints:
		r.d.Coordinator.Stop(e.Reason)
	case scheduler.TaskFinished:
		r.d.Coordinator.TaskFinished(e.Attempt)
	case scheduler.RestartStarted:
		r.d.Lifecycle.RestartStarted(e)
	case scheduler.PersistStatus:
		r.io(func(ctx context.Context) { r.d.Lifecycle.PersistStatus(ctx, e) })
	case scheduler.ArmTimer:
		id := e.Restart
		r.after(e.At.Sub(r.d.Clock.Now()), id, func() { r.sm.RestartDue(id) })
	case scheduler.PrepareRestore:
		r.io(func(ctx context.Context) { r.prepareRestore(ctx, e) })
	case scheduler.AwaitSlots:
		// On the loop's next turn, as a TaskManager's registration or a
		// job's end offer slots: taking them decides the deployment.
		r.d.Post(r.TrySchedule)
	case scheduler.FinalCheckpoint:
		r.log.Info("all subtasks reached the end of their input; taking the final checkpoint")
		r.finalCheckpoint(e.Generation)
	case scheduler.ArmAdoption:
		r.after(e.At.Sub(r.d.Clock.Now()), adoptionTimer, r.sm.AdoptionDue)
	case scheduler.Adopted:
		attempts := make([]*weirv1.ExecutionAttemptID, 0, len(e.Execs))
		for _, x := range e.Execs {
			attempts = append(attempts, x.Attempt)
		}
		r.log.Info("subtasks adopted from the previous leader; they run on", "subtasks", len(attempts))
		r.d.Lifecycle.Adopted(e)
		rp := r.from[0]
		r.io(func(ctx context.Context) { r.d.Checkpoints.NotifyAdopted(ctx, rp, attempts) })
	case scheduler.Terminated:
		r.StopTimers()
		r.io(func(ctx context.Context) { r.d.Lifecycle.Terminated(ctx, e.State) })
	default:
		panic(fmt.Sprintf("jobrun: unknown scheduler effect %T", e))
	}
}

// io runs f off the loop.
func (r *Run[RP]) io(f func(ctx context.Context)) { r.d.Executor.Go(r.d.Context, f) }

// post runs f on the loop later, and then what it made the scheduler
// decide.
func (r *Run[RP]) post(f func()) {
	r.d.Post(func() {
		f()
		r.Drain()
	})
}

// after runs f on the loop once d passed; a timer of the same key (a
// restart's) is replaced. Key 0 is a retry's pause, never replaced.
func (r *Run[RP]) after(d time.Duration, key int64, f func()) {
	if key == 0 {
		r.retry++
		n := r.retry
		r.retries[n] = r.d.Clock.AfterFunc(d, func() {
			r.post(func() {
				delete(r.retries, n)
				f()
			})
		})
		return
	}
	if stop := r.timers[key]; stop != nil {
		stop()
	}
	r.timers[key] = r.d.Clock.AfterFunc(d, func() {
		r.post(func() {
			delete(r.timers, key)
			f()
		})
	})
}

// deploy sends each deployment of e to its TaskManager; one that fails
// fails its subtasks.
func (r *Run[RP]) deploy(e scheduler.Deploy) {
	rp := r.from[e.Restart]
	for id := range r.from {
		if id <= e.Restart && id != 0 {
			delete(r.from, id)
		}
	}
	deployments, err := r.d.TaskManagers.Plan(e, rp)
	if err != nil {
		r.sm.Fail(fmt.Sprintf("scheduling failed: %v", err))
		return
	}
	r.recordAndDeploy(deployments, rpcpolicy.Retries())
}

// recordAndDeploy records the job's current attempts, then sends each
// deployment to its TaskManager; one that fails fails its subtasks. A
// record that fails (etcd unavailable) is tried again, with a newer
// record, while the deployments are still the job's: nothing goes out
// unrecorded, and no restart budget is spent on etcd's outage.
func (r *Run[RP]) recordAndDeploy(deployments []Deployment, backoff rpcpolicy.Backoff) {
	r.recordSeq++
	seq, record := r.recordSeq, r.sm.CurrentAttempts()
	r.io(func(ctx context.Context) {
		if err := r.d.Lifecycle.RecordAttempts(ctx, seq, record); err != nil {
			r.post(func() {
				if r.d.Context.Err() != nil || !r.current(deployments) {
					return // stopped here, or failed over meanwhile
				}
				r.log.Warn("recording the attempts for a new leader failed; the deploy waits and retries", "err", err)
				r.after(backoff.Next(), 0, func() {
					if r.current(deployments) {
						r.recordAndDeploy(deployments, backoff)
					}
				})
			})
			return
		}
		for _, dep := range deployments {
			r.io(func(ctx context.Context) {
				if err := r.d.TaskManagers.Deploy(ctx, dep); err != nil {
					cause := fmt.Sprintf("deploy on %s: %v", dep.TaskManager, err)
					r.post(func() {
						for _, a := range dep.Attempts {
							r.sm.TaskStateChanged(a, weirv1.ExecutionState_EXECUTION_STATE_FAILED, cause)
						}
					})
				}
			})
		}
	})
}

// current reports whether every attempt of deployments is still a live
// current attempt on its TaskManager.
func (r *Run[RP]) current(deployments []Deployment) bool {
	for _, dep := range deployments {
		for _, a := range dep.Attempts {
			if !r.sm.Holds(a, dep.TaskManager) {
				return false
			}
		}
	}
	return true
}

// cancel asks x's TaskManager to cancel it until it answers what
// rpcpolicy.Cancel takes as stopped (or as going to report it), while x
// is live.
func (r *Run[RP]) cancel(x scheduler.Exec, backoff rpcpolicy.Backoff) {
	if !r.d.TaskManagers.Known(x.TaskManager) {
		r.sm.TaskStateChanged(x.Attempt, weirv1.ExecutionState_EXECUTION_STATE_CANCELED, "")
		return
	}
	r.io(func(ctx context.Context) {
		err := r.d.TaskManagers.Cancel(ctx, x)
		verdict := rpcpolicy.Cancel(status.Code(err))
		r.post(func() {
			switch verdict {
			case rpcpolicy.Done:
				return // its CANCELED report follows
			case rpcpolicy.Unreachable, rpcpolicy.NotThere:
				r.d.Lifecycle.TakenAsStopped(x, verdict == rpcpolicy.Unreachable)
				r.sm.TaskStateChanged(x.Attempt, weirv1.ExecutionState_EXECUTION_STATE_CANCELED, "")
				return
			}
			if r.d.Context.Err() != nil || !r.sm.Holds(x.Attempt, x.TaskManager) {
				return // stopped here, or the attempt ended otherwise (its TaskManager was lost)
			}
			r.log.Warn("cancelling a subtask did not complete; retrying", "task", x.Name(), "taskmanager_id", x.TaskManager, "err", err)
			r.after(backoff.Next(), 0, func() {
				if r.sm.Holds(x.Attempt, x.TaskManager) {
					r.cancel(x, backoff)
				}
			})
		})
	})
}

// prepareRestore finds where restart e deploys from and resets the
// coordinator to it.
func (r *Run[RP]) prepareRestore(ctx context.Context, e scheduler.PrepareRestore) {
	// A checkpoint whose _metadata was being written when the regions
	// failed may still enter the store: restoring from the one before it
	// would leave a stored checkpoint whose sink transactions this restart
	// aborts, and a later restore from it would find them gone.
	wait, cancel := context.WithTimeout(ctx, finalizeWait)
	err := r.d.Checkpoints.AwaitFinalizations(wait)
	cancel()
	if err != nil {
		r.post(func() {
			if ctx.Err() != nil || scheduler.Terminal(r.sm.State()) {
				return // stopped, or cancelled meanwhile
			}
			r.log.Warn("restart waits for a checkpoint still being finalized", "err", err)
			r.io(func(ctx context.Context) { r.prepareRestore(ctx, e) })
		})
		return
	}
	if e.Full {
		// No subtask runs and none is deployed yet: nothing writes to the
		// checkpoint directory. A region restart leaves the sweep to the
		// next whole-job restart or the job's end, since the other regions
		// still write.
		r.d.Checkpoints.Sweep(ctx)
	}
	var zero RP
	rp, err := r.d.Checkpoints.Latest(ctx)
	if err == nil && rp != zero {
		err = r.d.Checkpoints.Restore(ctx, rp, e.Full)
	} else if err == nil {
		r.log.Info("restarting without state: no checkpoint completed yet")
	}
	r.post(func() {
		if err == nil {
			r.from[e.Restart] = rp
		}
		r.sm.RestoreReady(e.Restart, err)
	})
}

// TrySchedule offers free slots to the restart that waits for them, if
// there are enough.
func (r *Run[RP]) TrySchedule() {
	prefer, waiting := r.sm.NextSlotRequest()
	if !waiting {
		return
	}
	taken := r.d.Slots.Take(prefer, func(tms []string) {
		if err := r.sm.SlotsOffered(tms); err != nil {
			r.sm.Fail(fmt.Sprintf("scheduling failed: %v", err))
		}
		r.Drain()
	})
	if _, still := r.sm.NextSlotRequest(); taken && still {
		// Another restart waits too: the slots that woke this one may
		// be enough for it, and nothing else would offer them.
		r.d.Post(r.TrySchedule)
	}
	if !taken {
		r.log.Info("waiting for slots", "needed", len(prefer))
	}
}

// finalCheckpoint triggers checkpoints until one completes as the job's
// final one (the job finishes), while the job runs in the generation that
// asked for it.
func (r *Run[RP]) finalCheckpoint(generation int64) {
	if r.sm.State() != weirv1.JobState_JOB_STATE_RUNNING || r.sm.Generation() != generation || r.d.Context.Err() != nil {
		return
	}
	r.d.Coordinator.Request(coordinator.Manual, "", func(res checkpointing.Result) {
		if res.Err == nil || errors.Is(res.Err, checkpointing.ErrShutDown) {
			return
		}
		r.post(func() {
			r.log.Info("final checkpoint failed; retrying", "err", res.Err)
			r.after(FinalCheckpointRetry, 0, func() { r.finalCheckpoint(generation) })
		})
	})
}

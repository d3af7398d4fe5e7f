package jobmanager

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/checkpointing"
	"github.com/weirproject/weir/internal/coordinator"
	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/jobrun"
	"github.com/weirproject/weir/internal/restart"
	"github.com/weirproject/weir/internal/scheduler"
	"github.com/weirproject/weir/internal/storage"
	"github.com/weirproject/weir/internal/storedgraph"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// jobMaster drives one job: its lifecycle state machine (the scheduler),
// its checkpoint coordinator, and the I/O both ask for. One goroutine owns
// the state machine; everything else sends it messages through the
// mailbox and reads the view it publishes after every step.
type jobMaster struct {
	s         *Server
	id, name  string
	submitted time.Time
	// graph is what the job was submitted (or recovered) with: a retried
	// submission of its ID must name the same.
	graph    *weirv1.JobGraph
	log      *slog.Logger
	coord    *checkpointing.Driver
	store    checkpointStore
	counter  checkpointCounter
	services haServices
	// restore is where the job first started (--from); a restart finds
	// the latest completed checkpoint instead, and this when there is none.
	restore *restorePoint

	// statusMu serializes the writes of status, what a new leader carries
	// on (restart count and budget, the attempts to adopt); recordSeq is
	// the newest record of attempts written.
	statusMu  sync.Mutex
	status    jobStatus
	recordSeq int64
	// adoptIdentity is, for each attempt a new leader adopts, the identity
	// of the TaskManager it was deployed to: only that certificate may
	// report it (mutual TLS). Set before the job runs, read-only after.
	adoptIdentity map[string]string

	// reconfig serializes the changes of the stored graph (rescale,
	// checkpointing configuration); graphs, under it, follows whether the
	// store holds the graph the job runs.
	reconfig reconfigLock
	graphs   storedgraph.Tracker

	mailbox mailbox
	ctx     context.Context // cancelled when the job master stops
	cancel  context.CancelFunc
	loopEnd chan struct{}
	io      sync.WaitGroup // the I/O goroutines effects started

	// Owned by the loop.
	sm *scheduler.Job
	// effects carries out what sm decides.
	effects    *jobrun.Run[*restorePoint]
	tms        map[string]*taskManager // the TaskManagers subtasks were deployed to
	finalLoads map[string]*weirv1.SubtaskInfo_Load

	view atomic.Pointer[jobView]
	// autoscale is the job's autoscaler; nil when it has none. Set before
	// the job is registered, read-only after.
	autoscale *autoscaling
	// closed is closed once the coordinator closed with the job's end.
	closed     chan struct{}
	closeOnce  sync.Once
	finalStats atomic.Pointer[weirv1.ListCheckpointsResponse]
}

// jobView is what the loop published last, for readers on other
// goroutines.
type jobView struct {
	scheduler.View
	tms        map[string]*taskManager
	finalLoads map[string]*weirv1.SubtaskInfo_Load
	held       map[string]int
}

// newJob makes the master of job id under the current leadership's HA
// services and starts it. origin is where the job first started (--from),
// start where this run starts: origin for a new job, the latest completed
// checkpoint for a job a new leader recovers. status carries on what a
// previous leader counted.
func (s *Server) newJob(services haServices, id string, g *weirv1.JobGraph, origin, start *restorePoint, status jobStatus, adopt *scheduler.Adoption) (*jobMaster, error) {
	counter, store, err := services.jobServices(id, int(g.GetCheckpointing().GetRetained()))
	if err != nil {
		return nil, err
	}
	if start != nil {
		// Checkpoint IDs go on from the restored one, as in Flink.
		if err := counter.SetIfHigher(context.Background(), start.metadata.GetCheckpointId()); err != nil {
			return nil, err
		}
	}
	sm, err := scheduler.New(scheduler.Config{
		JobID: id, Session: newID()[:8], Graph: g,
		Strategy: restart.New(g.GetRestartStrategy(), status.Budget, time.Now()),
		Restarts: status.Restarts,
		Adopt:    adopt,
	}, wallClock{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	j := &jobMaster{
		s: s, id: id, name: g.GetName(), submitted: time.Now(), restore: origin, graph: proto.Clone(g).(*weirv1.JobGraph),
		log:     s.log.With("job_id", id, "job_name", g.GetName()),
		store:   store,
		counter: counter, services: services,
		ctx: ctx, cancel: cancel, loopEnd: make(chan struct{}), closed: make(chan struct{}),
		sm: sm, status: status,
		tms: map[string]*taskManager{}, finalLoads: map[string]*weirv1.SubtaskInfo_Load{},
	}
	if status.SubmittedMs > 0 {
		j.submitted = time.UnixMilli(status.SubmittedMs)
	}
	if adopt != nil {
		j.adoptIdentity = status.identities(id)
	}
	j.mailbox.init()
	cp := g.GetCheckpointing()
	j.coord = checkpointing.New(coordinator.Config{
		JobID:    id,
		Interval: cp.GetInterval().AsDuration(),
		// Unset: the interval throughout, as 0 cannot say.
		BacklogInterval:       cp.GetIntervalDuringBacklog() != nil,
		IntervalDuringBacklog: cp.GetIntervalDuringBacklog().AsDuration(),
		Timeout:               cp.GetTimeout().AsDuration(),
		MinPause:              cp.GetMinPause().AsDuration(),
		MaxConcurrent:         int(cp.GetMaxConcurrent()),
		Tolerable:             int(cp.GetTolerableFailedCheckpoints()),
		MaxParallelism:        int(g.GetMaxParallelism()),
		Options:               checkpointOptions(g),
		AlignRescale:          jobgraph.HasBroadcastEdge(g),
	}, checkpointing.Deps{
		Counter: j.counter,
		Store:   j.store,
		Storage: jobStorage{j: j},
		Tasks:   taskGateway{j: j},
		FailJob: func(cause error) { j.post(func() { j.sm.Fail(cause.Error()) }) },
		// Posted before the subtasks are notified, so it reaches the
		// scheduler before any of them reports FINISHED.
		Finishing: func(int64) { j.post(func() { j.sm.Finishing() }) },
		Metrics:   s.ckptMet,
		JobName:   g.GetName(),
		Logger:    s.log,
	})
	j.effects = jobrun.New(sm, start, jobrun.Deps[*restorePoint]{
		Context:      ctx,
		Executor:     jobExecutor{j},
		Post:         j.post,
		Clock:        wallClock{},
		Coordinator:  j.coord,
		TaskManagers: jobTaskManagers{j},
		Checkpoints:  jobCheckpoints{j},
		Lifecycle:    jobLifecycle{j},
		Slots:        jobSlots{j},
		Logger:       j.log,
	})
	j.rebuildShared()
	go j.coord.Run()
	if start != nil {
		if err := j.coord.Restore(context.Background(), start.metadata, start.path); err != nil {
			j.coord.Close()
			cancel()
			return nil, err
		}
		j.log.Info("job restores from checkpoint", "checkpoint_id", start.metadata.GetCheckpointId(), "path", start.path)
	}
	j.setStateMetric(weirv1.JobState_JOB_STATE_CREATED)
	j.publish()
	go j.run()
	j.startAutoscaler(g)
	return j, nil
}

func checkpointOptions(g *weirv1.JobGraph) *weirv1.CheckpointOptions {
	cp := g.GetCheckpointing()
	return &weirv1.CheckpointOptions{
		ExactlyOnce:                cp.GetMode() != weirv1.CheckpointingMode_CHECKPOINTING_MODE_AT_LEAST_ONCE,
		Unaligned:                  cp.GetUnaligned(),
		AlignedCheckpointTimeoutMs: cp.GetAlignedCheckpointTimeout().AsDuration().Milliseconds(),
		Incremental:                g.GetState().GetIncremental(),
	}
}

// run owns the state machine until stop: it runs each message, carries
// out the effects it decided and publishes the view.
func (j *jobMaster) run() {
	defer close(j.loopEnd)
	for {
		select {
		case <-j.ctx.Done():
			j.effects.StopTimers()
			return
		case <-j.mailbox.wake:
		}
		for _, f := range j.mailbox.take() {
			f()
			j.drain()
		}
		j.publish()
	}
}

// drain carries out the effects the state machine decided, and those an
// effect's handling made it decide (a deployment that cannot be built
// fails the job), until none is left.
func (j *jobMaster) drain() { j.effects.Drain() }

// post runs f on the loop; it never blocks, so the coordinator and RPC
// handlers can post while the loop waits on them.
func (j *jobMaster) post(f func()) { j.mailbox.put(f) }

// call runs f on the loop and waits for it; false once the job master
// stopped.
func (j *jobMaster) call(f func()) bool {
	done := make(chan struct{})
	// The view is published before the caller goes on, so what the caller
	// changed is what the next read of the job (REST, client API) shows.
	j.post(func() {
		f()
		j.drain()
		j.publish()
		close(done)
	})
	select {
	case <-done:
		return true
	case <-j.loopEnd:
		return false
	}
}

// goIO runs an effect's I/O off the loop; stop waits for it.
func (j *jobMaster) goIO(f func()) {
	j.io.Add(1)
	go func() {
		defer j.io.Done()
		f()
	}()
}

func (j *jobMaster) publish() {
	v := &jobView{View: j.sm.View(), tms: maps.Clone(j.tms), finalLoads: maps.Clone(j.finalLoads)}
	v.held = v.SlotsHeld()
	j.view.Store(v)
}

func (j *jobMaster) current() *jobView { return j.view.Load() }

// state is the job's state as last published.
func (j *jobMaster) state() weirv1.JobState { return j.current().State }

// stop ends the loop and waits for the I/O it started (the coordinator
// must be closed first, or its calls to the job could outlive it).
func (j *jobMaster) stop() {
	j.cancel()
	<-j.loopEnd
	j.io.Wait()
}

// trySchedule offers slots to the job when a restart waits for them.
func (j *jobMaster) trySchedule() { j.post(j.effects.TrySchedule) }

// updateTask applies a subtask's state change reported by its TaskManager
// (with the totals a finishing subtask reported last); false for an
// attempt the job does not have.
func (j *jobMaster) updateTask(a *weirv1.ExecutionAttemptID, st weirv1.ExecutionState, cause string, final *weirv1.SubtaskInfo_Load) bool {
	known := false
	j.call(func() {
		if final != nil && st == weirv1.ExecutionState_EXECUTION_STATE_FINISHED {
			j.finalLoads[a.Key()] = final
		}
		known = j.sm.TaskStateChanged(a, st, cause)
	})
	return known
}

// adopt applies a registering TaskManager's reports of the job's attempts
// and returns those it is to go on running.
func (j *jobMaster) adopt(tm *taskManager, reports []*weirv1.AttemptReport) []*weirv1.ExecutionAttemptID {
	var keep []*weirv1.ExecutionAttemptID
	j.call(func() {
		if cur, ok := j.s.taskManager(tm.id); !ok || cur != tm {
			// Declared lost (or registered again) since: nothing of this
			// registration is kept, and no later loss would undo it.
			return
		}
		for _, r := range reports {
			if want, ok := j.adoptIdentity[r.GetAttempt().Key()]; ok && want != tm.identity {
				// Deployed to a TaskManager with another certificate.
				j.s.foreignReports.WithLabelValues("state").Inc()
				continue
			}
			k, _ := j.sm.Report(tm.id, scheduler.AttemptReport{
				Attempt: r.GetAttempt(), State: r.GetState(), EndOfInput: r.GetEndOfInput(), Cause: r.GetFailureCause(), Stopping: r.GetStopping(),
			})
			if k {
				j.tms[tm.id] = tm
				keep = append(keep, r.GetAttempt())
			}
		}
	})
	return keep
}

// reconcile checks the attempts a TaskManager's heartbeat says it runs
// for this job against the job's current ones, and cancels the others.
func (j *jobMaster) reconcile(tm *taskManager, running []*weirv1.ExecutionAttemptID) {
	j.post(func() {
		var strays []*weirv1.ExecutionAttemptID
		for _, a := range running {
			if !j.sm.Holds(a, tm.id) {
				strays = append(strays, a)
			}
		}
		if len(strays) > 0 {
			j.s.cancelStrays(tm, strays)
		}
	})
}

// endOfInput records that a subtask received all its input; false for an
// attempt that is not current and running.
func (j *jobMaster) endOfInput(a *weirv1.ExecutionAttemptID) bool {
	ok := false
	j.call(func() { ok = j.sm.EndOfInput(a) })
	return ok
}

// cancelJob cancels the job on a user's request.
func (j *jobMaster) cancelJob() error {
	err := fmt.Errorf("jobmanager: job %s is no longer managed here", j.id)
	j.call(func() { err = j.sm.Cancel() })
	return err
}

func (j *jobMaster) taskManagerLost(tmID, cause string) {
	j.post(func() { j.sm.TaskManagerLost(tmID, cause) })
}

// suspend ends this JobManager's part in the job when it lost leadership:
// the coordinator closes and nothing is sent to TaskManagers any more
// (they cancel the subtasks themselves when they follow the new leader,
// which recovers the job from its store).
func (j *jobMaster) suspend() {
	j.call(func() { j.sm.Suspend() })
	j.close()
}

// close closes the coordinator, keeping its final statistics for the API,
// and waits until it is closed.
func (j *jobMaster) close() {
	j.closeOnce.Do(func() {
		j.coord.Stop(weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_COORDINATOR_SHUTDOWN)
		// The final statistics are kept before the coordinator closes:
		// a read between the two finds them, not a closed driver's
		// empty answer.
		j.finalStats.Store(j.coord.Stats())
		j.coord.Close()
		close(j.closed)
	})
	<-j.closed
}

func (j *jobMaster) isClosed() bool {
	select {
	case <-j.closed:
		return true
	default:
		return false
	}
}

func (j *jobMaster) checkpointStats() *weirv1.ListCheckpointsResponse {
	if final := j.finalStats.Load(); final != nil {
		return final
	}
	return j.coord.Stats()
}

func (j *jobMaster) setStateMetric(st weirv1.JobState) {
	for s := range weirv1.JobState_name {
		if s == 0 {
			continue
		}
		v := 0.0
		if weirv1.JobState(s) == st {
			v = 1
		}
		j.s.jobState.WithLabelValues(j.id, j.name, weirv1.JobState(s).FlinkName()).Set(v)
	}
}

// rebuildShared counts the shared state files of the retained checkpoints,
// so those no longer referenced after the next subsumption are deleted.
// Unreadable metadata only means some files are kept.
func (j *jobMaster) rebuildShared() {
	all, err := j.store.All(context.Background())
	if err != nil {
		j.log.Warn("rebuilding the shared state registry failed", "err", err)
		return
	}
	var mds []*weirv1.CheckpointMetadata
	for _, c := range all {
		md, err := storage.ReadMetadata(c.MetadataPath)
		if err != nil {
			j.log.Warn("shared state registry: unreadable checkpoint", "checkpoint_id", c.ID, "err", err)
			continue
		}
		mds = append(mds, md)
	}
	j.coord.RebuildShared(mds)
}

func (j *jobMaster) info() *weirv1.JobInfo {
	v := j.current()
	info := &weirv1.JobInfo{
		Id: j.id, Name: j.name, State: v.State, FailureCause: v.Cause, Graph: v.Graph, Restarts: v.Restarts,
		Regions: int32(v.Regions), Autoscaler: j.lastAutoscalerEntry(),
	}
	if !v.Start.IsZero() {
		info.StartTimeMs = v.Start.UnixMilli()
	}
	if !v.End.IsZero() {
		info.EndTimeMs = v.End.UnixMilli()
	}
	for _, r := range v.Restarting {
		info.RestartingRegions = append(info.RestartingRegions, int32(r))
	}
	for _, ex := range v.Exceptions {
		je := &weirv1.JobException{
			TimestampMs: ex.Time.UnixMilli(), Task: ex.Task, TaskmanagerId: ex.TaskManager, Cause: ex.Cause, FullRestart: ex.Full,
		}
		for _, r := range ex.Regions {
			je.Regions = append(je.Regions, int32(r))
		}
		info.Exceptions = append(info.Exceptions, je)
	}
	for _, vx := range v.Graph.GetVertices() {
		vi := &weirv1.VertexInfo{Name: vx.GetName(), Operator: vx.GetOperator(), Parallelism: vx.GetParallelism()}
		for _, e := range v.Execs {
			if e.Vertex.GetName() != vx.GetName() {
				continue
			}
			si := &weirv1.SubtaskInfo{
				Index: e.Attempt.GetSubtaskIndex(), Attempt: e.Attempt.GetAttempt(), State: e.State,
				TaskmanagerId: e.TaskManager, FailureCause: e.Failure, Region: int32(e.Region),
			}
			if !e.Start.IsZero() {
				si.StartTimeMs = e.Start.UnixMilli()
			}
			if !e.End.IsZero() {
				si.EndTimeMs = e.End.UnixMilli()
			}
			si.Load, si.Watermarks = v.load(e)
			vi.Subtasks = append(vi.Subtasks, si)
		}
		addVertexLoad(vi)
		info.Vertices = append(info.Vertices, vi)
	}
	return info
}

// regionLabel names a restarted region in metrics: its number, or "all"
// for a restart of the whole job.
func regionLabel(r int, full bool) string {
	if full {
		return "all"
	}
	return strconv.Itoa(r)
}

// mailbox is the loop's unbounded queue: posting never blocks.
type mailbox struct {
	mu    sync.Mutex
	queue []func()
	wake  chan struct{}
}

func (m *mailbox) init() { m.wake = make(chan struct{}, 1) }

func (m *mailbox) put(f func()) {
	m.mu.Lock()
	m.queue = append(m.queue, f)
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *mailbox) take() []func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.queue
	m.queue = nil
	return q
}

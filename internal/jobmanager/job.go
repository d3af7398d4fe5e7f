package jobmanager

import (
	"context"
	"errors"

	"fmt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"log/slog"
	"sync"
	"time"

	"github.com/weirproject/weir/internal/coordinator"
	"github.com/weirproject/weir/internal/restart"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// jobTransitions is the job lifecycle: every edge not listed is refused.
var jobTransitions = map[weirv1.JobState][]weirv1.JobState{
	weirv1.JobState_JOB_STATE_CREATED:    {weirv1.JobState_JOB_STATE_SUSPENDED, weirv1.JobState_JOB_STATE_RUNNING, weirv1.JobState_JOB_STATE_FAILING, weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELLING, weirv1.JobState_JOB_STATE_CANCELED},
	weirv1.JobState_JOB_STATE_RUNNING:    {weirv1.JobState_JOB_STATE_SUSPENDED, weirv1.JobState_JOB_STATE_FINISHED, weirv1.JobState_JOB_STATE_FAILING, weirv1.JobState_JOB_STATE_CANCELLING, weirv1.JobState_JOB_STATE_RESTARTING},
	weirv1.JobState_JOB_STATE_RESTARTING: {weirv1.JobState_JOB_STATE_SUSPENDED, weirv1.JobState_JOB_STATE_RUNNING, weirv1.JobState_JOB_STATE_FAILING, weirv1.JobState_JOB_STATE_CANCELLING},
	weirv1.JobState_JOB_STATE_FAILING:    {weirv1.JobState_JOB_STATE_SUSPENDED, weirv1.JobState_JOB_STATE_FAILED},
	weirv1.JobState_JOB_STATE_CANCELLING: {weirv1.JobState_JOB_STATE_SUSPENDED, weirv1.JobState_JOB_STATE_CANCELED},
}

func canTransition(from, to weirv1.JobState) bool {
	for _, s := range jobTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

func terminal(s weirv1.JobState) bool {
	return s == weirv1.JobState_JOB_STATE_FINISHED || s == weirv1.JobState_JOB_STATE_FAILED || s == weirv1.JobState_JOB_STATE_CANCELED ||
		s == weirv1.JobState_JOB_STATE_SUSPENDED
}

// jobMaster runs one job: its executions, its lifecycle and its checkpoint
// coordinator. Lock order: Server.mu before jobMaster.mu; RPCs are never
// made while holding mu.
type jobMaster struct {
	s         *Server
	id, name  string
	graph     *weirv1.JobGraph
	submitted time.Time
	log       *slog.Logger
	coord     *coordinator.Driver
	store     checkpointStore
	counter   checkpointCounter
	services  haServices
	// session is unique to this leadership term's run of the job.
	session string
	// restore is where the first run starts from (--from); restarts start
	// from the latest completed checkpoint instead.
	restore  *restorePoint
	strategy restart.Strategy

	mu struct {
		sync.Mutex
		state      weirv1.JobState
		start, end time.Time
		cause      string
		execs      []*execution
		// deploy: the job waits for slots to (re)deploy its subtasks.
		deploy       bool
		attempt      int32
		restarts     int32
		restoreFrom  *restorePoint
		settled      chan struct{} // closed when a restarting job's subtasks all stopped
		coordStarted bool
		finalStats   *weirv1.ListCheckpointsResponse
		closed       bool
	}
}

// newJob makes the master of job id under the current leadership's HA
// services. origin is where the job first started (--from), start where this
// run starts: origin for a new job, the latest completed checkpoint for a
// job a new leader recovers.
func (s *Server) newJob(services haServices, id string, g *weirv1.JobGraph, origin, start *restorePoint) (*jobMaster, error) {
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
	restore := start
	j := &jobMaster{
		s: s, id: id, name: g.GetName(), graph: g, submitted: time.Now(), restore: origin,
		strategy: restart.New(g.GetRestartStrategy()),
		log:      s.log.With("job_id", id, "job_name", g.GetName()),
		store:    store,
		counter:  counter,
		services: services,
		session:  newID()[:8],
	}
	j.mu.state = weirv1.JobState_JOB_STATE_CREATED
	j.mu.deploy, j.mu.restoreFrom = true, restore
	cp := g.GetCheckpointing()
	j.coord = coordinator.NewDriver(coordinator.Config{
		JobID:          id,
		Interval:       cp.GetInterval().AsDuration(),
		Timeout:        cp.GetTimeout().AsDuration(),
		MinPause:       cp.GetMinPause().AsDuration(),
		MaxConcurrent:  int(cp.GetMaxConcurrent()),
		Tolerable:      int(cp.GetTolerableFailedCheckpoints()),
		MaxParallelism: int(g.GetMaxParallelism()),
		Options: &weirv1.CheckpointOptions{
			ExactlyOnce:                cp.GetMode() != weirv1.CheckpointingMode_CHECKPOINTING_MODE_AT_LEAST_ONCE,
			Unaligned:                  cp.GetUnaligned(),
			AlignedCheckpointTimeoutMs: cp.GetAlignedCheckpointTimeout().AsDuration().Milliseconds(),
			Incremental:                g.GetState().GetIncremental(),
		},
	}, coordinator.Deps{
		Counter: j.counter,
		Store:   j.store,
		Storage: jobStorage{j: j},
		Tasks:   taskGateway{j: j},
		FailJob: func(cause error) { j.fail(cause.Error()) },
		Metrics: s.ckptMet,
		JobName: g.GetName(),
		Logger:  s.log,
	})
	j.rebuildShared()
	go j.coord.Run()
	if restore != nil {
		if err := j.coord.Restore(context.Background(), restore.metadata, restore.path); err != nil {
			j.coord.Close()
			return nil, err
		}
		j.log.Info("job restores from checkpoint", "checkpoint_id", restore.metadata.GetCheckpointId(), "path", restore.path)
	}
	j.setStateMetric(weirv1.JobState_JOB_STATE_CREATED)
	return j, nil
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
		j.s.jobState.WithLabelValues(j.id, j.name, stateName(weirv1.JobState(s))).Set(v)
	}
}

// transitionLocked moves the job to st; illegal edges are refused.
func (j *jobMaster) transitionLocked(st weirv1.JobState) error {
	if !canTransition(j.mu.state, st) {
		return fmt.Errorf("jobmanager: job %s cannot go from %s to %s", j.id, stateName(j.mu.state), stateName(st))
	}
	j.log.Info("job state changed", "from", stateName(j.mu.state), "to", stateName(st))
	j.mu.state = st
	if terminal(st) {
		j.mu.end = time.Now()
	}
	j.setStateMetric(st)
	return nil
}

// slotsHeld counts the slots the job holds per TaskManager.
func (j *jobMaster) slotsHeld() map[string]int {
	j.mu.Lock()
	defer j.mu.Unlock()
	held := map[string]int{}
	if terminal(j.mu.state) {
		return held
	}
	perTM := map[string]map[int32]bool{}
	for _, e := range j.mu.execs {
		if e.terminal() {
			continue
		}
		if perTM[e.tm.id] == nil {
			perTM[e.tm.id] = map[int32]bool{}
		}
		perTM[e.tm.id][e.attempt.GetSubtaskIndex()] = true
	}
	for tm, subs := range perTM {
		held[tm] = len(subs)
	}
	return held
}

// trySchedule deploys a job that waits for slots: a new job, or a
// restarting one whose subtasks all stopped.
func (j *jobMaster) trySchedule() {
	j.s.schedMu.Lock()
	defer j.s.schedMu.Unlock()
	j.mu.Lock()
	waiting := j.mu.deploy
	attempt, restore := j.mu.attempt, j.mu.restoreFrom
	j.mu.Unlock()
	if !waiting {
		return
	}
	need := slotsNeeded(j.graph)
	slots := j.s.freeSlots()
	if len(slots) < need {
		j.log.Info("waiting for slots", "needed", need, "free", len(slots))
		return
	}
	execs, err := expand(j.id, j.session, j.graph, slots[:need], attempt)
	if err == nil {
		var tdds []*weirv1.TaskDeploymentDescriptor
		tdds, err = descriptors(j.graph, execs, j.s.cfg.CheckpointDir, restore)
		if err == nil {
			j.mu.Lock()
			if !j.mu.deploy {
				j.mu.Unlock() // cancelled meanwhile
				return
			}
			if err = j.transitionLocked(weirv1.JobState_JOB_STATE_RUNNING); err == nil {
				j.mu.execs, j.mu.deploy, j.mu.coordStarted = execs, false, false
				if j.mu.start.IsZero() {
					j.mu.start = time.Now()
				}
			}
			j.mu.Unlock()
			if err == nil {
				go j.deploy(execs, tdds)
				return
			}
		}
	}
	j.fail(fmt.Sprintf("scheduling failed: %v", err))
}

func (j *jobMaster) deploy(execs []*execution, tdds []*weirv1.TaskDeploymentDescriptor) {
	var wg sync.WaitGroup
	for i, e := range execs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), j.s.cfg.RPCTimeout)
			defer cancel()
			j.log.Info("deploying subtask", "task", e.name(), "taskmanager_id", e.tm.id)
			if _, err := e.tm.client.DeployTask(ctx, &weirv1.DeployTaskRequest{Task: tdds[i]}); err != nil {
				j.updateTask(e.attempt, weirv1.ExecutionState_EXECUTION_STATE_FAILED, fmt.Sprintf("deploy on %s: %v", e.tm.id, err))
			}
		}()
	}
	wg.Wait()
}

func (j *jobMaster) findLocked(a *weirv1.ExecutionAttemptID) *execution {
	for _, e := range j.mu.execs {
		if e.attempt.GetVertex() == a.GetVertex() && e.attempt.GetSubtaskIndex() == a.GetSubtaskIndex() &&
			e.attempt.GetAttempt() == a.GetAttempt() && e.attempt.GetSession() == a.GetSession() {
			return e
		}
	}
	return nil
}

// updateTask applies a subtask's state change reported by its TaskManager.
func (j *jobMaster) updateTask(a *weirv1.ExecutionAttemptID, st weirv1.ExecutionState, cause string) bool {
	j.mu.Lock()
	e := j.findLocked(a)
	if e == nil || e.terminal() {
		j.mu.Unlock()
		return e != nil
	}
	e.state = st
	if cause != "" {
		e.failure = cause
	}
	var startCoord []coordinator.Task
	allFinished := true
	allRunning := true
	for _, x := range j.mu.execs {
		allFinished = allFinished && x.state == weirv1.ExecutionState_EXECUTION_STATE_FINISHED
		allRunning = allRunning && x.state == weirv1.ExecutionState_EXECUTION_STATE_RUNNING
	}
	if allRunning && !j.mu.coordStarted && j.mu.state == weirv1.JobState_JOB_STATE_RUNNING {
		j.mu.coordStarted = true
		for _, x := range j.mu.execs {
			startCoord = append(startCoord, coordinator.Task{Attempt: x.attempt, Source: x.source})
		}
	}
	state := j.mu.state
	j.mu.Unlock()

	switch st {
	case weirv1.ExecutionState_EXECUTION_STATE_RUNNING:
		if startCoord != nil {
			j.log.Info("all subtasks running; checkpoint coordinator started")
			j.coord.Start(startCoord)
		}
	case weirv1.ExecutionState_EXECUTION_STATE_FINISHED:
		j.coord.TaskFinished(a)
		if allFinished && state == weirv1.JobState_JOB_STATE_RUNNING {
			j.end(weirv1.JobState_JOB_STATE_FINISHED, "")
		}
	case weirv1.ExecutionState_EXECUTION_STATE_FAILED:
		j.log.Warn("subtask failed", "task", e.name(), "cause", cause)
		j.fail(fmt.Sprintf("subtask %s failed: %s", e.name(), cause))
	}
	j.maybeSettle()
	return true
}

// fail handles a failure of the running job: the restart strategy decides
// between restarting every subtask from the latest completed checkpoint
// (RESTARTING) and failing for good (FAILING, then FAILED).
func (j *jobMaster) fail(cause string) {
	j.mu.Lock()
	if j.mu.state != weirv1.JobState_JOB_STATE_RUNNING && j.mu.state != weirv1.JobState_JOB_STATE_CREATED {
		// Already restarting, failing, cancelling or over: later failures
		// of the subtasks being stopped add nothing.
		j.mu.Unlock()
		return
	}
	j.mu.cause = cause
	delay, restarting := j.strategy.Failure(time.Now())
	var settled chan struct{}
	if restarting && j.mu.state == weirv1.JobState_JOB_STATE_RUNNING {
		_ = j.transitionLocked(weirv1.JobState_JOB_STATE_RESTARTING)
		j.mu.restarts++
		j.mu.attempt++
		settled = make(chan struct{})
		j.mu.settled = settled
		j.s.restarts.WithLabelValues(j.id, j.name).Inc()
	} else {
		j.mu.cause = fmt.Sprintf("%s (not restarted: %s)", cause, j.strategy.Describe())
		_ = j.transitionLocked(weirv1.JobState_JOB_STATE_FAILING)
	}
	j.mu.deploy = false
	j.mu.Unlock()
	j.coord.Stop(weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_JOB_FAILOVER_REGION)
	j.cancelExecutions()
	if settled != nil {
		j.log.Warn("job failed; restarting", "cause", cause, "delay", delay)
		go j.restartAfter(settled, delay)
	}
	j.maybeSettle()
}

// restartAfter redeploys the job once its subtasks all stopped and the
// restart delay passed, from the latest completed checkpoint.
func (j *jobMaster) restartAfter(settled <-chan struct{}, delay time.Duration) {
	<-settled
	j.persistStatus()
	time.Sleep(delay) // the restart strategy's pause, not a wait for a condition
	// A checkpoint whose _metadata was being written when the job failed
	// may still enter the store: restoring from the one before it would
	// leave a stored checkpoint whose sink transactions this restart
	// aborts, and a later restore from it would find them gone.
	for {
		ctx, cancel := context.WithTimeout(context.Background(), finalizeWait)
		err := j.coord.AwaitFinalizations(ctx)
		cancel()
		if err == nil {
			break
		}
		j.mu.Lock()
		restarting := j.mu.state == weirv1.JobState_JOB_STATE_RESTARTING
		j.mu.Unlock()
		if !restarting {
			return // cancelled meanwhile
		}
		j.log.Warn("restart waits for a checkpoint still being finalized", "err", err)
	}
	// Every subtask stopped and none is deployed yet.
	j.sweepCheckpoints("restart", -1)
	rp, err := j.latestRestorePoint()
	j.mu.Lock()
	if j.mu.state != weirv1.JobState_JOB_STATE_RESTARTING {
		j.mu.Unlock()
		return // cancelled meanwhile
	}
	if err != nil {
		j.mu.Unlock()
		j.failForGood(fmt.Sprintf("restart: %v", err))
		return
	}
	j.mu.restoreFrom, j.mu.deploy = rp, true
	j.mu.Unlock()
	if rp != nil {
		if err := j.coord.Restore(context.Background(), rp.metadata, rp.path); err != nil {
			j.failForGood(fmt.Sprintf("restart: %v", err))
			return
		}
		j.log.Info("restarting from checkpoint", "checkpoint_id", rp.metadata.GetCheckpointId(), "path", rp.path)
	} else {
		j.log.Info("restarting without state: no checkpoint completed yet")
	}
	j.trySchedule()
}

// persistStatus stores the restart count, so that a new leader carries it
// on. Losing it loses only the count, so a failure is logged, not fatal.
func (j *jobMaster) persistStatus() {
	j.mu.Lock()
	st := jobStatus{Restarts: j.mu.restarts, SubmittedMs: j.submitted.UnixMilli()}
	j.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := j.services.putStatus(ctx, j.id, st); err != nil {
		j.log.Warn("storing the job's restart count failed", "restarts", st.Restarts, "err", err)
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

// finalizeWait bounds one wait for a checkpoint being finalized or for the
// store (each is bounded by the store's own request timeout anyway).
const finalizeWait = 30 * time.Second

// latestRestorePoint is the newest readable retained checkpoint; an
// unreadable one — a store entry that does not decode, or _metadata that
// cannot be read — is skipped, with a log line, for the one before it, as
// a new leader's recovery does. With none, the job restarts from where it
// first started.
func (j *jobMaster) latestRestorePoint() (*restorePoint, error) {
	ctx, cancel := context.WithTimeout(context.Background(), finalizeWait)
	defer cancel()
	all, skipped, err := j.store.RecoverReport(ctx, nil)
	if err != nil {
		return nil, err
	}
	for _, sk := range skipped {
		j.log.Error("skipping unreadable checkpoint store entry", "key", sk.Key, "checkpoint_id", sk.ID, "err", sk.Err)
	}
	for i := len(all) - 1; i >= 0; i-- {
		md, err := storage.ReadMetadata(all[i].MetadataPath)
		if err != nil {
			j.log.Error("skipping unreadable checkpoint", "checkpoint_id", all[i].ID, "err", err)
			continue
		}
		return newRestorePoint(all[i].MetadataPath, md), nil
	}
	return j.restore, nil
}

// failForGood ends a restarting job FAILED.
func (j *jobMaster) failForGood(cause string) {
	j.mu.Lock()
	j.mu.cause, j.mu.deploy = cause, false
	err := j.transitionLocked(weirv1.JobState_JOB_STATE_FAILING)
	j.mu.Unlock()
	if err == nil {
		j.maybeSettle()
	}
}

// cancel cancels the job on a user's request.
func (j *jobMaster) cancel() error {
	j.mu.Lock()
	if j.mu.execs == nil && j.mu.state == weirv1.JobState_JOB_STATE_CREATED {
		err := j.transitionLocked(weirv1.JobState_JOB_STATE_CANCELED)
		j.mu.Unlock()
		j.close()
		return err
	}
	if err := j.transitionLocked(weirv1.JobState_JOB_STATE_CANCELLING); err != nil {
		j.mu.Unlock()
		return err
	}
	j.mu.deploy = false
	j.mu.Unlock()
	j.coord.Stop(weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_JOB_NOT_RUNNING)
	j.cancelExecutions()
	j.maybeSettle()
	return nil
}

func (j *jobMaster) cancelExecutions() {
	j.mu.Lock()
	var live []*execution
	for _, e := range j.mu.execs {
		if !e.terminal() {
			live = append(live, e)
		}
	}
	j.mu.Unlock()
	for _, e := range live {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), j.s.cfg.RPCTimeout)
			defer cancel()
			_, err := e.tm.client.CancelTask(ctx, &weirv1.CancelTaskRequest{Attempt: e.attempt})
			if status.Code(err) == codes.Unavailable {
				// The connection failed: the TaskManager is gone, whatever
				// its heartbeats still say. Do not schedule onto it again.
				j.s.connectionLost(e.tm, err)
			}
			if err != nil {
				// Gone, or it does not know the task: either way the
				// subtask no longer runs.
				j.updateTask(e.attempt, weirv1.ExecutionState_EXECUTION_STATE_CANCELED, "")
			}
		}()
	}
}

// maybeSettle ends a failing or cancelling job once every subtask stopped.
func (j *jobMaster) maybeSettle() {
	j.mu.Lock()
	st := j.mu.state
	for _, e := range j.mu.execs {
		if !e.terminal() {
			j.mu.Unlock()
			return
		}
	}
	settled := j.mu.settled
	if st == weirv1.JobState_JOB_STATE_RESTARTING && settled != nil {
		j.mu.settled = nil
	}
	j.mu.Unlock()
	switch st {
	case weirv1.JobState_JOB_STATE_RESTARTING:
		if settled != nil {
			close(settled)
		}
	case weirv1.JobState_JOB_STATE_FAILING:
		j.end(weirv1.JobState_JOB_STATE_FAILED, "")
	case weirv1.JobState_JOB_STATE_CANCELLING:
		j.end(weirv1.JobState_JOB_STATE_CANCELED, "")
	}
}

func (j *jobMaster) end(st weirv1.JobState, cause string) {
	j.mu.Lock()
	err := j.transitionLocked(st)
	if cause != "" {
		j.mu.cause = cause
	}
	j.mu.Unlock()
	if err != nil {
		return
	}
	j.close()
	j.cleanupCheckpoints(st)
	j.removeHAData()
	// Its slots are free again.
	go j.s.scheduleWaiting()
}

// close stops the coordinator, keeping its final statistics for the API.
func (j *jobMaster) close() {
	j.mu.Lock()
	if j.mu.closed {
		j.mu.Unlock()
		return
	}
	j.mu.closed = true
	j.mu.Unlock()
	j.coord.Stop(weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_COORDINATOR_SHUTDOWN)
	stats := j.coord.Stats()
	j.coord.Close()
	j.mu.Lock()
	j.mu.finalStats = stats
	j.mu.Unlock()
}

func (j *jobMaster) taskManagerLost(tmID, cause string) {
	j.mu.Lock()
	var lost []*execution
	for _, e := range j.mu.execs {
		if e.tm.id == tmID && !e.terminal() {
			lost = append(lost, e)
		}
	}
	j.mu.Unlock()
	for _, e := range lost {
		j.updateTask(e.attempt, weirv1.ExecutionState_EXECUTION_STATE_FAILED, cause)
	}
}

func (j *jobMaster) checkpointStats() *weirv1.ListCheckpointsResponse {
	j.mu.Lock()
	final := j.mu.finalStats
	j.mu.Unlock()
	if final != nil {
		return final
	}
	return j.coord.Stats()
}

func (j *jobMaster) info() *weirv1.JobInfo {
	j.mu.Lock()
	defer j.mu.Unlock()
	info := &weirv1.JobInfo{
		Id: j.id, Name: j.name, State: j.mu.state, FailureCause: j.mu.cause, Graph: j.graph, Restarts: j.mu.restarts,
	}
	if !j.mu.start.IsZero() {
		info.StartTimeMs = j.mu.start.UnixMilli()
	}
	if !j.mu.end.IsZero() {
		info.EndTimeMs = j.mu.end.UnixMilli()
	}
	for _, v := range j.graph.GetVertices() {
		vi := &weirv1.VertexInfo{Name: v.GetName(), Operator: v.GetOperator(), Parallelism: v.GetParallelism()}
		for _, e := range j.mu.execs {
			if e.vertex == v {
				vi.Subtasks = append(vi.Subtasks, &weirv1.SubtaskInfo{
					Index: e.attempt.GetSubtaskIndex(), Attempt: e.attempt.GetAttempt(), State: e.state,
					TaskmanagerId: e.tm.id, FailureCause: e.failure, Load: e.load(), Watermarks: e.watermarks(),
				})
			}
		}
		addVertexLoad(vi)
		info.Vertices = append(info.Vertices, vi)
	}
	return info
}

func stateName(s weirv1.JobState) string {
	n := s.String()
	const prefix = "JOB_STATE_"
	if len(n) > len(prefix) {
		return n[len(prefix):]
	}
	return n
}

// cleanupCheckpoints applies Flink's retention: a finished job's checkpoints
// are of no further use; a cancelled job keeps them only when the job asked
// to retain them on cancellation; a failed job keeps them for a restart.
func (j *jobMaster) cleanupCheckpoints(st weirv1.JobState) {
	keep := true
	switch st {
	case weirv1.JobState_JOB_STATE_FINISHED:
		keep = false
	case weirv1.JobState_JOB_STATE_CANCELED:
		keep = j.graph.GetCheckpointing().GetExternalizedRetention() == weirv1.ExternalizedRetention_EXTERNALIZED_RETENTION_RETAIN_ON_CANCELLATION
	}
	if keep {
		j.sweepCheckpoints(stateName(st), 0)
		return
	}
	if err := storage.Discard(j.s.storage.JobDir(j.id)); err != nil {
		j.log.Warn("discarding checkpoints failed", "err", err)
	}
}

// endOfInput records that a subtask received all its input. Once every
// subtask has, the job takes its final checkpoint now rather than at the
// next period (and at all when periodic checkpoints are off): the sinks
// commit their last epoch and every subtask finishes after it.
func (j *jobMaster) endOfInput(a *weirv1.ExecutionAttemptID) bool {
	j.mu.Lock()
	e := j.findLocked(a)
	if e == nil || e.terminal() {
		j.mu.Unlock()
		return false
	}
	e.endOfInput = true
	all := j.mu.state == weirv1.JobState_JOB_STATE_RUNNING
	for _, x := range j.mu.execs {
		all = all && x.endOfInput
	}
	attempt := j.mu.attempt
	j.mu.Unlock()
	if all {
		j.log.Info("all subtasks reached the end of their input; taking the final checkpoint")
		go j.finalCheckpoint(attempt)
	}
	return true
}

// finalCheckpoint triggers checkpoints until one completes as the job's
// final one (the job finishes) or the job leaves this attempt.
func (j *jobMaster) finalCheckpoint(attempt int32) {
	for {
		j.mu.Lock()
		current := j.mu.state == weirv1.JobState_JOB_STATE_RUNNING && j.mu.attempt == attempt
		j.mu.Unlock()
		if !current {
			return
		}
		r := j.coord.Trigger(context.Background(), coordinator.Manual, "")
		if r.Err == nil {
			return
		}
		if errors.Is(r.Err, coordinator.ErrShutDown) {
			return
		}
		j.log.Info("final checkpoint failed; retrying", "err", r.Err)
		time.Sleep(100 * time.Millisecond) // a pause between attempts, not a wait for a condition
	}
}

// suspend ends this JobManager's part in the job when it lost leadership:
// the coordinator stops and nothing is sent to TaskManagers any more (they
// cancel the subtasks themselves when they follow the new leader, which
// recovers the job from its store).
func (j *jobMaster) suspend() {
	j.mu.Lock()
	_ = j.transitionLocked(weirv1.JobState_JOB_STATE_SUSPENDED)
	j.mu.deploy = false
	j.mu.Unlock()
	j.close()
}

// removeHAData deletes a globally terminal job's metadata from the HA
// services: its graph, checkpoint counter and completed-checkpoint entries
// (the files themselves follow the retention policy).
func (j *jobMaster) removeHAData() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := j.store.Shutdown(ctx, true)
	err = errors.Join(err, j.counter.Shutdown(ctx, true), j.services.removeJob(ctx, j.id))
	if err != nil {
		j.log.Warn("removing the job's HA data failed", "err", err)
	}
}

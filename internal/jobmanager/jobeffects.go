package jobmanager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/checkpointing"
	"github.com/weirproject/weir/internal/coordinator"
	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/rpcpolicy"
	"github.com/weirproject/weir/internal/scheduler"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// process carries out the scheduler's effects in order. Anything that
// waits on the network or storage runs in an I/O goroutine, which answers
// through the mailbox; the loop itself only calls the coordinator.
func (j *jobMaster) process(effects []scheduler.Effect) {
	for _, e := range effects {
		switch e := e.(type) {
		case scheduler.StateChanged:
			j.log.Info("job state changed", "from", e.From.FlinkName(), "to", e.To.FlinkName())
			j.setStateMetric(e.To)
		case scheduler.Deploy:
			j.deploy(e)
		case scheduler.CancelTasks:
			j.cancelTasks(e.Execs)
		case scheduler.StartCheckpoints:
			tasks := make([]coordinator.Task, 0, len(e.Tasks))
			for _, t := range e.Tasks {
				tasks = append(tasks, coordinator.Task{Attempt: t.Attempt, Source: t.Source})
			}
			j.log.Info("all subtasks running; checkpoint coordinator started")
			j.coord.Start(tasks)
		case scheduler.StopCheckpoints:
			j.coord.Stop(e.Reason)
		case scheduler.TaskFinished:
			j.coord.TaskFinished(e.Attempt)
		case scheduler.RestartStarted:
			j.s.restarts.WithLabelValues(j.id, j.name).Inc()
			for _, r := range e.Regions {
				j.s.regionRestarts.WithLabelValues(j.id, j.name, regionLabel(r, e.Full)).Inc()
				if e.Full {
					break
				}
			}
			j.log.Warn("job failed; restarting", "cause", e.Cause, "delay", e.Delay, "regions", e.Regions, "whole_job", e.Full)
		case scheduler.PersistStatus:
			st := jobStatus{Restarts: e.Restarts, SubmittedMs: j.submitted.UnixMilli(), Budget: e.Budget}
			j.goIO(func() { j.persistStatus(st) })
		case scheduler.ArmTimer:
			id := e.Restart
			if t := j.timers[id]; t != nil {
				t.Stop()
			}
			j.timers[id] = time.AfterFunc(time.Until(e.At), func() {
				j.post(func() {
					delete(j.timers, id)
					j.sm.RestartDue(id)
				})
			})
		case scheduler.PrepareRestore:
			j.goIO(func() { j.prepareRestore(e) })
		case scheduler.AwaitSlots:
			j.trySchedule()
		case scheduler.FinalCheckpoint:
			j.log.Info("all subtasks reached the end of their input; taking the final checkpoint")
			j.goIO(func() { j.finalCheckpoint(e.Generation) })
		case scheduler.Terminated:
			for id, t := range j.timers {
				t.Stop()
				delete(j.timers, id)
			}
			j.goIO(func() { j.terminated(e.State) })
		default:
			panic(fmt.Sprintf("jobmanager: unknown scheduler effect %T", e))
		}
	}
}

// deploy builds the deployment descriptors and sends them, each subtask to
// its TaskManager; a deployment that fails fails its subtask.
func (j *jobMaster) deploy(e scheduler.Deploy) {
	rp := j.restorePoints[e.Restart]
	for id := range j.restorePoints {
		if id <= e.Restart && id != 0 {
			delete(j.restorePoints, id)
		}
	}
	all := j.sm.View().Execs
	tdds, err := descriptors(j.sm.Graph(), all, e.Execs, j.tms, j.s.cfg.CheckpointDir, rp)
	if err != nil {
		j.sm.Fail(fmt.Sprintf("scheduling failed: %v", err))
		return
	}
	for _, chain := range chains(j.sm.Graph(), e.Execs) {
		head := e.Execs[chain[0]]
		tm := j.tms[head.TaskManager]
		req := &weirv1.DeployTaskRequest{Task: tdds[chain[0]]}
		names := []string{head.Name()}
		for _, i := range chain[1:] {
			req.Chained = append(req.Chained, tdds[i])
			names = append(names, e.Execs[i].Name())
		}
		j.goIO(func() {
			ctx, cancel := context.WithTimeout(j.ctx, j.s.cfg.RPCTimeout)
			defer cancel()
			j.log.Info("deploying subtask", "task", strings.Join(names, " → "), "taskmanager_id", head.TaskManager)
			if _, err := tm.client.DeployTask(ctx, req); err != nil {
				cause := fmt.Sprintf("deploy on %s: %v", head.TaskManager, err)
				j.post(func() {
					for _, i := range chain {
						j.sm.TaskStateChanged(e.Execs[i].Attempt, weirv1.ExecutionState_EXECUTION_STATE_FAILED, cause)
					}
				})
			}
		})
	}
}

// chains groups the subtasks to deploy into the chains that run as one
// subtask (indexes into execs, head first), by jobgraph.ChainedAfter: a
// subtask joins the chain of its upstream subtask when both are deployed
// now, on the same TaskManager. Any other subtask is a chain of its own
// and reads its input over a channel.
func chains(g *weirv1.JobGraph, execs []scheduler.Exec) [][]int {
	after := jobgraph.ChainedAfter(g)
	type key struct {
		vertex string
		index  int32
	}
	at := make(map[key]int, len(execs))
	for i, x := range execs {
		at[key{x.Vertex.GetName(), x.Attempt.GetSubtaskIndex()}] = i
	}
	next := map[int]int{}
	chained := map[int]bool{}
	for i, x := range execs {
		up, ok := after[x.Vertex.GetName()]
		if !ok {
			continue
		}
		if u, ok := at[key{up, x.Attempt.GetSubtaskIndex()}]; ok && execs[u].TaskManager == x.TaskManager {
			next[u], chained[i] = i, true
		}
	}
	var out [][]int
	for i := range execs {
		if chained[i] {
			continue
		}
		chain := []int{i}
		for n, ok := next[i]; ok; n, ok = next[n] {
			chain = append(chain, n)
		}
		out = append(out, chain)
	}
	return out
}

// cancelTasks asks the TaskManagers to cancel the attempts. One that
// cannot be reached, or does not know the attempt, no longer runs it.
func (j *jobMaster) cancelTasks(execs []scheduler.Exec) {
	for _, x := range execs {
		tm := j.tms[x.TaskManager]
		if tm == nil {
			j.sm.TaskStateChanged(x.Attempt, weirv1.ExecutionState_EXECUTION_STATE_CANCELED, "")
			continue
		}
		j.goIO(func() { j.cancelTask(tm, x) })
	}
}

// cancelTask asks tm to cancel x until it answers what rpcpolicy.Cancel
// takes as stopped (or as going to report it).
func (j *jobMaster) cancelTask(tm *taskManager, x scheduler.Exec) {
	backoff := rpcpolicy.Retries()
	for {
		ctx, cancel := context.WithTimeout(j.ctx, j.s.cfg.RPCTimeout)
		_, err := tm.client.CancelTask(ctx, &weirv1.CancelTaskRequest{Attempt: x.Attempt})
		cancel()
		switch rpcpolicy.Cancel(status.Code(err)) {
		case rpcpolicy.Done:
			return // its CANCELED report follows
		case rpcpolicy.Unreachable:
			// Do not schedule onto it again.
			j.s.connectionLost(tm, err)
			j.post(func() { j.sm.TaskStateChanged(x.Attempt, weirv1.ExecutionState_EXECUTION_STATE_CANCELED, "") })
			return
		case rpcpolicy.NotThere:
			j.post(func() { j.sm.TaskStateChanged(x.Attempt, weirv1.ExecutionState_EXECUTION_STATE_CANCELED, "") })
			return
		}
		if j.ctx.Err() != nil || !j.live(x.Attempt) {
			return // stopped here, or the attempt ended otherwise (its TaskManager was lost)
		}
		j.log.Warn("cancelling a subtask did not complete; retrying", "task", x.Name(), "taskmanager_id", tm.id, "err", err)
		select {
		case <-j.ctx.Done():
			return
		case <-time.After(backoff.Next()):
		}
	}
}

// live reports whether a is a current attempt not known to have stopped,
// as last published.
func (j *jobMaster) live(a *weirv1.ExecutionAttemptID) bool {
	for _, e := range j.current().Execs {
		if scheduler.SameAttempt(e.Attempt, a) {
			return !e.Terminal()
		}
	}
	return false
}

// persistStatus stores the restart count and budget, so that a new leader
// carries them on. Losing it loses only the count, so a failure is logged,
// not fatal.
func (j *jobMaster) persistStatus(st jobStatus) {
	ctx, cancel := context.WithTimeout(j.ctx, 5*time.Second)
	defer cancel()
	if err := j.services.putStatus(ctx, j.id, st); err != nil {
		j.log.Warn("storing the job's restart count failed", "restarts", st.Restarts, "err", err)
	}
}

// finalizeWait bounds one wait for a checkpoint being finalized or for the
// store (each is bounded by the store's own request timeout anyway).
const finalizeWait = 30 * time.Second

// prepareRestore finds where restart e deploys from and resets the
// coordinator to it.
func (j *jobMaster) prepareRestore(e scheduler.PrepareRestore) {
	// A checkpoint whose _metadata was being written when the regions
	// failed may still enter the store: restoring from the one before it
	// would leave a stored checkpoint whose sink transactions this restart
	// aborts, and a later restore from it would find them gone.
	for {
		ctx, cancel := context.WithTimeout(j.ctx, finalizeWait)
		err := j.coord.AwaitFinalizations(ctx)
		cancel()
		if err == nil {
			break
		}
		if j.ctx.Err() != nil || scheduler.Terminal(j.state()) {
			return // stopped, or cancelled meanwhile
		}
		j.log.Warn("restart waits for a checkpoint still being finalized", "err", err)
	}
	if e.Full {
		// No subtask runs and none is deployed yet: nothing writes to the
		// checkpoint directory. A region restart leaves the sweep to the
		// next whole-job restart or the job's end, since the other regions
		// still write.
		j.sweepCheckpoints("restart", -1)
	}
	rp, err := j.latestRestorePoint()
	if err == nil && rp != nil {
		if err = j.coord.Restore(j.ctx, rp.metadata, rp.path); err == nil {
			j.log.Info("restarting from checkpoint", "checkpoint_id", rp.metadata.GetCheckpointId(), "path", rp.path, "whole_job", e.Full)
		}
	} else if err == nil {
		j.log.Info("restarting without state: no checkpoint completed yet")
	}
	j.post(func() {
		if err == nil {
			j.restorePoints[e.Restart] = rp
		}
		j.sm.RestoreReady(e.Restart, err)
	})
}

// latestRestorePoint is the newest readable retained checkpoint; an
// unreadable one — a store entry that does not decode, or _metadata that
// cannot be read — is skipped, with a log line, for the one before it, as
// a new leader's recovery does. With none, the job restarts from where it
// first started.
func (j *jobMaster) latestRestorePoint() (*restorePoint, error) {
	ctx, cancel := context.WithTimeout(j.ctx, finalizeWait)
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

// finalCheckpoint triggers checkpoints until one completes as the job's
// final one (the job finishes) or a failure made the request moot.
func (j *jobMaster) finalCheckpoint(generation int64) {
	for {
		v := j.current()
		if v.State != weirv1.JobState_JOB_STATE_RUNNING || v.Generation != generation || j.ctx.Err() != nil {
			return
		}
		r := j.coord.Trigger(j.ctx, coordinator.Manual, "")
		if r.Err == nil || errors.Is(r.Err, checkpointing.ErrShutDown) {
			return
		}
		j.log.Info("final checkpoint failed; retrying", "err", r.Err)
		select {
		case <-j.ctx.Done():
			return
		case <-time.After(100 * time.Millisecond): // a pause between attempts
		}
	}
}

// terminated ends the job's run here: the coordinator closes and, when the
// job is over for good, its checkpoints follow the retention policy and
// its HA data goes. Its slots are free again.
func (j *jobMaster) terminated(st weirv1.JobState) {
	j.close()
	if scheduler.GloballyTerminal(st) {
		j.cleanupCheckpoints(st)
		j.removeHAData()
	}
	j.s.scheduleWaiting()
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
		keep = j.current().Graph.GetCheckpointing().GetExternalizedRetention() == weirv1.ExternalizedRetention_EXTERNALIZED_RETENTION_RETAIN_ON_CANCELLATION
	}
	if keep {
		j.sweepCheckpoints(st.FlinkName(), 0)
		return
	}
	if err := storage.Discard(j.s.storage.JobDir(j.id)); err != nil {
		j.log.Warn("discarding checkpoints failed", "err", err)
	}
}

// removeHAData deletes a globally terminal job's metadata from the HA
// services: its graph, checkpoint counter and completed-checkpoint entries
// (the files themselves follow the retention policy).
func (j *jobMaster) removeHAData() {
	// Under reconfig: a rescale still being stored in the background
	// gives up rather than store it again.
	j.reconfig.Lock()
	defer j.reconfig.Unlock()
	j.graphs.End()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := j.store.Shutdown(ctx, true)
	err = errors.Join(err, j.counter.Shutdown(ctx, true), j.services.removeJob(ctx, j.id))
	if err != nil {
		j.log.Warn("removing the job's HA data failed", "err", err)
	}
}

package jobmanager

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/jobrun"
	"github.com/weirproject/weir/internal/scheduler"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// The job loop's dependencies, as internal/jobrun reaches them: the
// TaskManagers over gRPC, the checkpoint store and storage, the slot pool
// shared with the other jobs, and the job's logs and metrics.

type (
	jobTaskManagers struct{ j *jobMaster }
	jobCheckpoints  struct{ j *jobMaster }
	jobLifecycle    struct{ j *jobMaster }
	jobSlots        struct{ j *jobMaster }
	jobExecutor     struct{ j *jobMaster }
	wallClock       struct{}
)

// deployCall is what one DeployTask call sends.
type deployCall struct {
	tm    *taskManager
	req   *weirv1.DeployTaskRequest
	names []string
}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// Go runs an I/O on a goroutine of its own; stop waits for it.
func (x jobExecutor) Go(ctx context.Context, io func(context.Context)) {
	x.j.io.Add(1)
	go func() {
		defer x.j.io.Done()
		io(ctx)
	}()
}

// Plan builds the deployment descriptors, one DeployTask call per chain.
func (t jobTaskManagers) Plan(e scheduler.Deploy, rp *restorePoint) ([]jobrun.Deployment, error) {
	j := t.j
	tdds, err := descriptors(j.sm.Graph(), j.sm.View().Execs, e.Execs, j.tms, j.s.cfg.CheckpointDir, rp)
	if err != nil {
		return nil, err
	}
	var out []jobrun.Deployment
	for _, chain := range chains(j.sm.Graph(), e.Execs) {
		head := e.Execs[chain[0]]
		call := deployCall{tm: j.tms[head.TaskManager], req: &weirv1.DeployTaskRequest{Task: tdds[chain[0]]}, names: []string{head.Name()}}
		attempts := []*weirv1.ExecutionAttemptID{head.Attempt}
		for _, i := range chain[1:] {
			call.req.Chained = append(call.req.Chained, tdds[i])
			call.names = append(call.names, e.Execs[i].Name())
			attempts = append(attempts, e.Execs[i].Attempt)
		}
		out = append(out, jobrun.Deployment{TaskManager: head.TaskManager, Attempts: attempts, Payload: call})
	}
	return out, nil
}

func (t jobTaskManagers) Deploy(ctx context.Context, d jobrun.Deployment) error {
	call := d.Payload.(deployCall)
	ctx, cancel := context.WithTimeout(ctx, t.j.s.cfg.RPCTimeout)
	defer cancel()
	t.j.log.Info("deploying subtask", "task", strings.Join(call.names, " → "), "taskmanager_id", d.TaskManager)
	_, err := call.tm.client.DeployTask(ctx, call.req)
	return err
}

func (t jobTaskManagers) Known(tm string) bool { return t.j.tms[tm] != nil }

// Cancel drops the TaskManager whose connection failed under the call:
// the one it called, not one that registered again since.
func (t jobTaskManagers) Cancel(ctx context.Context, x scheduler.Exec) error {
	tm := t.j.current().tms[x.TaskManager]
	if tm == nil {
		return status.Errorf(codes.Unavailable, "jobmanager: TaskManager %s is not connected", x.TaskManager)
	}
	ctx, cancel := context.WithTimeout(ctx, t.j.s.cfg.RPCTimeout)
	defer cancel()
	_, err := tm.client.CancelTask(ctx, &weirv1.CancelTaskRequest{Attempt: x.Attempt})
	if status.Code(err) == codes.Unavailable {
		t.j.s.connectionLost(tm, err)
	}
	return err
}

func (c jobCheckpoints) AwaitFinalizations(ctx context.Context) error {
	return c.j.coord.AwaitFinalizations(ctx)
}

func (c jobCheckpoints) Sweep(context.Context) { c.j.sweepCheckpoints("restart", -1) }

func (c jobCheckpoints) Latest(context.Context) (*restorePoint, error) {
	return c.j.latestRestorePoint()
}

// NotifyAdopted repeats the completion of the checkpoint the job started
// from to the attempts adopted: a sink whose notification the previous
// leader did not send commits now, one that did commits nothing twice.
func (c jobCheckpoints) NotifyAdopted(ctx context.Context, rp *restorePoint, attempts []*weirv1.ExecutionAttemptID) {
	if rp == nil {
		return
	}
	id := rp.metadata.GetCheckpointId()
	if err := (taskGateway{j: c.j}).NotifyCheckpointComplete(ctx, attempts, id, 0, false); err != nil {
		// A subtask that missed it commits with the next checkpoint.
		c.j.log.Warn("notifying the adopted subtasks of the checkpoint the job started from failed", "checkpoint_id", id, "err", err)
	}
}

func (c jobCheckpoints) Restore(ctx context.Context, rp *restorePoint, full bool) error {
	if err := c.j.coord.Restore(ctx, rp.metadata, rp.path); err != nil {
		return err
	}
	c.j.log.Info("restarting from checkpoint", "checkpoint_id", rp.metadata.GetCheckpointId(), "path", rp.path, "whole_job", full)
	return nil
}

func (l jobLifecycle) StateChanged(e scheduler.StateChanged) {
	l.j.log.Info("job state changed", "from", e.From.FlinkName(), "to", e.To.FlinkName())
	l.j.setStateMetric(e.To)
}

func (l jobLifecycle) RestartStarted(e scheduler.RestartStarted) {
	j := l.j
	j.s.restarts.WithLabelValues(j.id, j.name).Inc()
	for _, r := range e.Regions {
		j.s.regionRestarts.WithLabelValues(j.id, j.name, regionLabel(r, e.Full)).Inc()
		if e.Full {
			break
		}
	}
	j.log.Warn("job failed; restarting", "cause", e.Cause, "delay", e.Delay, "regions", e.Regions, "whole_job", e.Full)
}

// Adopted publishes the view: the notification of the adopted subtasks
// (and the coordinator's first trigger) find their TaskManagers in it.
func (l jobLifecycle) Adopted(scheduler.Adopted) { l.j.publish() }

// TakenAsStopped needs nothing here: the scheduler's view is the record.
func (jobLifecycle) TakenAsStopped(scheduler.Exec, bool) {}

// PersistStatus stores the restart count and budget, so that a new leader
// carries them on. Losing it loses only the count, so a failure is logged,
// not fatal.
func (l jobLifecycle) PersistStatus(ctx context.Context, e scheduler.PersistStatus) {
	j := l.j
	j.statusMu.Lock()
	defer j.statusMu.Unlock()
	j.status.Restarts, j.status.Budget = e.Restarts, e.Budget
	if err := j.putStatus(ctx); err != nil {
		j.log.Warn("storing the job's restart count failed", "restarts", e.Restarts, "err", err)
	}
}

// RecordAttempts stores the attempts about to be deployed with the job's
// status, one record at a time so that an older one never overwrites a
// newer.
func (l jobLifecycle) RecordAttempts(ctx context.Context, seq int64, attempts []scheduler.Placed) error {
	j := l.j
	// The TaskManagers placed: published before the deploy was decided.
	tms := j.current().tms
	record := make([]recordedAttempt, len(attempts))
	for i, p := range attempts {
		a := p.Attempt
		record[i] = recordedAttempt{Vertex: a.GetVertex(), Subtask: a.GetSubtaskIndex(), Attempt: a.GetAttempt(), Session: a.GetSession(), TaskManager: p.TaskManager}
		if tm := tms[p.TaskManager]; tm != nil {
			record[i].Identity = tm.identity
		}
	}
	j.statusMu.Lock()
	defer j.statusMu.Unlock()
	if seq <= j.recordSeq {
		return nil
	}
	j.status.Attempts = record
	if err := j.putStatus(ctx); err != nil {
		return err
	}
	j.recordSeq = seq
	return nil
}

// putStatus stores j.status; the caller holds statusMu.
func (j *jobMaster) putStatus(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	j.status.SubmittedMs = j.submitted.UnixMilli()
	return j.services.putStatus(ctx, j.id, j.status)
}

// Terminated ends the job's run here: the coordinator closes and, when the
// job is over for good, its checkpoints follow the retention policy and
// its HA data goes. Its slots are free again.
func (l jobLifecycle) Terminated(_ context.Context, st weirv1.JobState) {
	j := l.j
	j.close()
	if scheduler.GloballyTerminal(st) {
		j.cleanupCheckpoints(st)
		j.removeHAData()
	}
	j.s.scheduleWaiting()
}

// Take offers slots under the server's scheduling lock, and publishes the
// view before it is released, so two jobs never take one slot.
func (s jobSlots) Take(prefer []string, offer func([]string)) bool {
	j := s.j
	j.s.schedMu.Lock()
	defer j.s.schedMu.Unlock()
	slots := j.s.freeSlots()
	free := make([]string, len(slots))
	byID := map[string]*taskManager{}
	for i, tm := range slots {
		free[i], byID[tm.id] = tm.id, tm
	}
	ids, ok := scheduler.MatchSlots(free, prefer)
	if !ok {
		return false
	}
	for _, id := range ids {
		j.tms[id] = byID[id]
	}
	offer(ids)
	j.publish()
	return true
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

// latestRestorePoint is the newest readable retained checkpoint; an
// unreadable one — a store entry that does not decode, or _metadata that
// cannot be read — is skipped, with a log line, for the one before it, as
// a new leader's recovery does. With none, the job restarts from where it
// first started.
func (j *jobMaster) latestRestorePoint() (*restorePoint, error) {
	ctx, cancel := context.WithTimeout(j.ctx, 30*time.Second)
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

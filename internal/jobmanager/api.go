package jobmanager

import (
	"context"
	"errors"

	"github.com/weirproject/weir/internal/checkpointing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/coordinator"
	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// SubmitJob validates a job graph, registers the job and schedules it as
// soon as enough slots are free.
func (s *Server) SubmitJob(ctx context.Context, req *weirv1.SubmitJobRequest) (*weirv1.SubmitJobResponse, error) {
	g := proto.Clone(req.GetJob()).(*weirv1.JobGraph)
	if g == nil {
		return nil, status.Error(codes.InvalidArgument, "jobmanager: no job graph")
	}
	// Clients other than the CLI may leave fields unset.
	jobgraph.ApplyDefaults(g)
	id := req.GetJobId()
	if id != "" && !validJobID(id) {
		return nil, status.Errorf(codes.InvalidArgument, "jobmanager: job ID %q: want 32 lower-case hex characters", id)
	}
	s.submits.Lock()
	defer s.submits.Unlock()
	// The ID first: a job under it answers whatever this graph is (the
	// client learns that the job it runs is not the one it meant even
	// when this graph is invalid).
	if err := s.unrecoveredError(id); err != nil && id != "" {
		return nil, err
	}
	if j, ok := s.job(id); ok && id != "" {
		if !proto.Equal(j.graph, g) {
			return nil, status.Errorf(codes.AlreadyExists, "jobmanager: job %s exists and runs another graph than the one submitted", id)
		}
		// A retried submission: the job is there already.
		return &weirv1.SubmitJobResponse{JobId: id}, nil
	}
	if err := jobgraph.Validate(g); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := supported(g); err != nil {
		return nil, status.Error(codes.Unimplemented, err.Error())
	}
	if err := s.checkClaims(g); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	var restore *restorePoint
	if g.GetRestoreFrom() != "" {
		if err := s.CheckStorageLocation("restore-from", g.GetRestoreFrom()); err != nil {
			return nil, err
		}
		var err error
		if restore, err = loadRestorePoint(g); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	if id == "" {
		id = newID()
	}
	services, err := s.services()
	if err != nil {
		return nil, err
	}
	// The job is durable before it is accepted: a new leader recovers it.
	if err := services.putJob(ctx, id, g); err != nil {
		return nil, status.Errorf(codes.Unavailable, "jobmanager: store job: %v", err)
	}
	j, err := s.newJob(services, id, g, restore, restore, jobStatus{}, nil)
	if err != nil {
		_ = services.removeJob(ctx, id)
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := services.putStatus(ctx, id, jobStatus{SubmittedMs: j.submitted.UnixMilli()}); err != nil {
		j.close()
		j.stop()
		_ = services.removeJob(ctx, id)
		return nil, status.Errorf(codes.Unavailable, "jobmanager: store job status: %v", err)
	}
	s.mu.Lock()
	s.mu.jobs[id] = j
	s.mu.Unlock()
	j.log.Info("job submitted", "vertices", len(g.GetVertices()), "slots_needed", scheduler.SlotsNeeded(g))
	j.trySchedule()
	return &weirv1.SubmitJobResponse{JobId: id}, nil
}

func (s *Server) lookup(id string) (*jobMaster, error) {
	j, ok := s.job(id)
	if !ok {
		if err := s.unrecoveredError(id); err != nil {
			return nil, err
		}
		return nil, status.Errorf(codes.NotFound, "jobmanager: job %s not found", id)
	}
	return j, nil
}

// unrecoveredError is Unavailable for a job stored in the HA services
// that this leadership could not recover, nil for any other ID. Such a
// job is not "not found": a client that took it for gone and submitted
// it again would run it twice once a later leader recovers it.
func (s *Server) unrecoveredError(id string) error {
	s.mu.Lock()
	_, stored := s.mu.unrecovered[id]
	s.mu.Unlock()
	if !stored {
		return nil
	}
	return status.Errorf(codes.Unavailable, "jobmanager: job %s is stored, but this leader could not recover it (its log says why); a later leader may", id)
}

// CancelJob cancels a job.
func (s *Server) CancelJob(_ context.Context, req *weirv1.CancelJobRequest) (*weirv1.CancelJobResponse, error) {
	j, err := s.lookup(req.GetJobId())
	if err != nil {
		return nil, err
	}
	if err := j.cancelJob(); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &weirv1.CancelJobResponse{}, nil
}

// GetJob describes one job.
func (s *Server) GetJob(_ context.Context, req *weirv1.GetJobRequest) (*weirv1.GetJobResponse, error) {
	j, err := s.lookup(req.GetJobId())
	if err != nil {
		return nil, err
	}
	return &weirv1.GetJobResponse{Job: j.info()}, nil
}

// ListJobs lists every job, oldest first.
func (s *Server) ListJobs(context.Context, *weirv1.ListJobsRequest) (*weirv1.ListJobsResponse, error) {
	out := &weirv1.ListJobsResponse{}
	for _, j := range s.jobsSorted() {
		info := j.info()
		info.Graph = nil
		out.Jobs = append(out.Jobs, info)
	}
	return out, nil
}

func (s *Server) runningJob(id string) (*jobMaster, error) {
	j, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	if st := j.state(); st != weirv1.JobState_JOB_STATE_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "jobmanager: job %s is %s, not RUNNING", id, st.FlinkName())
	}
	return j, nil
}

func triggerError(jobID string, r checkpointing.Result) error {
	var f *coordinator.Failure
	switch {
	case r.Err == nil:
		return nil
	case errors.As(r.Err, &f):
		return status.Errorf(codes.Aborted, "jobmanager: checkpoint %d of job %s failed: %v", r.ID, jobID, r.Err)
	case errors.Is(r.Err, context.DeadlineExceeded), errors.Is(r.Err, context.Canceled):
		return status.Errorf(codes.DeadlineExceeded, "jobmanager: checkpoint of job %s still running: %v", jobID, r.Err)
	default:
		return status.Error(codes.Unavailable, r.Err.Error())
	}
}

func (s *Server) trigger(ctx context.Context, jobID string, kind coordinator.RequestKind, target string) (checkpointing.Result, error) {
	j, err := s.runningJob(jobID)
	if err != nil {
		return checkpointing.Result{}, err
	}
	r := j.coord.Trigger(ctx, kind, target)
	return r, triggerError(jobID, r)
}

// TriggerCheckpoint takes a checkpoint now and waits for it to complete.
func (s *Server) TriggerCheckpoint(ctx context.Context, req *weirv1.TriggerCheckpointRequest) (*weirv1.TriggerCheckpointResponse, error) {
	kind := coordinator.Manual
	if req.GetFull() {
		kind = coordinator.FullCheckpoint
	}
	r, err := s.trigger(ctx, req.GetJobId(), kind, "")
	if err != nil {
		return nil, err
	}
	return &weirv1.TriggerCheckpointResponse{CheckpointId: r.ID, ExternalPath: r.Path}, nil
}

// TriggerSavepoint takes a savepoint and waits for it to complete.
func (s *Server) TriggerSavepoint(ctx context.Context, req *weirv1.TriggerSavepointRequest) (*weirv1.TriggerSavepointResponse, error) {
	if t := req.GetTargetDirectory(); t != "" {
		if err := s.CheckStorageLocation("savepoint target directory", t); err != nil {
			return nil, err
		}
	}
	r, err := s.trigger(ctx, req.GetJobId(), coordinator.Savepoint, req.GetTargetDirectory())
	if err != nil {
		return nil, err
	}
	return &weirv1.TriggerSavepointResponse{CheckpointId: r.ID, ExternalPath: r.Path}, nil
}

// StopWithSavepoint takes a synchronous savepoint: the sources stop (or,
// with drain, end their input), every subtask snapshots and finishes once
// the savepoint completed, so sinks commit their last epoch and the job
// ends FINISHED. A failed synchronous savepoint fails the job.
func (s *Server) StopWithSavepoint(ctx context.Context, req *weirv1.StopWithSavepointRequest) (*weirv1.StopWithSavepointResponse, error) {
	if t := req.GetTargetDirectory(); t != "" {
		if err := s.CheckStorageLocation("savepoint target directory", t); err != nil {
			return nil, err
		}
	}
	j, err := s.runningJob(req.GetJobId())
	if err != nil {
		return nil, err
	}
	r := j.coord.StopWithSavepoint(ctx, req.GetTargetDirectory(), req.GetDrain())
	if err := triggerError(req.GetJobId(), r); err != nil {
		return nil, err
	}
	return &weirv1.StopWithSavepointResponse{CheckpointId: r.ID, ExternalPath: r.Path}, nil
}

// ListCheckpoints returns a job's checkpoint statistics.
func (s *Server) ListCheckpoints(_ context.Context, req *weirv1.ListCheckpointsRequest) (*weirv1.ListCheckpointsResponse, error) {
	j, err := s.lookup(req.GetJobId())
	if err != nil {
		return nil, err
	}
	return j.checkpointStats(), nil
}

// GetCheckpoint returns one checkpoint's statistics.
func (s *Server) GetCheckpoint(_ context.Context, req *weirv1.GetCheckpointRequest) (*weirv1.GetCheckpointResponse, error) {
	j, err := s.lookup(req.GetJobId())
	if err != nil {
		return nil, err
	}
	if d, ok := j.coord.Detail(req.GetCheckpointId()); ok {
		return d, nil
	}
	// Closed (or closing) meanwhile: the final statistics still have it.
	if j.finalStats.Load() != nil {
		for _, c := range j.checkpointStats().GetHistory() {
			if c.GetId() == req.GetCheckpointId() {
				return &weirv1.GetCheckpointResponse{Checkpoint: c}, nil
			}
		}
	}
	return nil, status.Errorf(codes.NotFound, "jobmanager: job %s has no checkpoint %d in its history", req.GetJobId(), req.GetCheckpointId())
}

// UpdateTaskExecutionState applies a subtask state change.
func (s *Server) UpdateTaskExecutionState(ctx context.Context, req *weirv1.UpdateTaskExecutionStateRequest) (*weirv1.UpdateTaskExecutionStateResponse, error) {
	j, err := s.lookup(req.GetAttempt().GetJobId())
	if err != nil {
		return nil, err
	}
	if err := s.checkSender(ctx, j, req.GetAttempt(), "state"); err != nil {
		return nil, err
	}
	if req.GetEndOfInput() {
		if !j.endOfInput(req.GetAttempt()) {
			return nil, status.Errorf(codes.NotFound, "jobmanager: job %s has no running subtask attempt %s/%d/%d", j.id,
				req.GetAttempt().GetVertex(), req.GetAttempt().GetSubtaskIndex(), req.GetAttempt().GetAttempt())
		}
		return &weirv1.UpdateTaskExecutionStateResponse{}, nil
	}
	if !j.updateTask(req.GetAttempt(), req.GetState(), req.GetFailureCause(), req.GetFinalLoad()) {
		return nil, status.Errorf(codes.NotFound, "jobmanager: job %s has no subtask attempt %s/%d/%d", j.id,
			req.GetAttempt().GetVertex(), req.GetAttempt().GetSubtaskIndex(), req.GetAttempt().GetAttempt())
	}
	return &weirv1.UpdateTaskExecutionStateResponse{}, nil
}

// AcknowledgeCheckpoint hands a subtask's ack to the job's coordinator.
func (s *Server) AcknowledgeCheckpoint(ctx context.Context, req *weirv1.AcknowledgeCheckpointRequest) (*weirv1.AcknowledgeCheckpointResponse, error) {
	j, err := s.lookup(req.GetAttempt().GetJobId())
	if err != nil {
		return nil, err
	}
	if err := s.checkSender(ctx, j, req.GetAttempt(), "ack"); err != nil {
		return nil, err
	}
	j.coord.Acknowledge(req)
	return &weirv1.AcknowledgeCheckpointResponse{}, nil
}

// AcknowledgeCheckpoints hands each of several subtasks' acks to its job's
// coordinator, as AcknowledgeCheckpoint would, and says which it refused.
func (s *Server) AcknowledgeCheckpoints(ctx context.Context, req *weirv1.AcknowledgeCheckpointsRequest) (*weirv1.AcknowledgeCheckpointsResponse, error) {
	resp := &weirv1.AcknowledgeCheckpointsResponse{Errors: make([]string, len(req.GetAcks()))}
	for i, ack := range req.GetAcks() {
		if _, err := s.AcknowledgeCheckpoint(ctx, ack); err != nil {
			resp.Errors[i] = err.Error()
		}
	}
	return resp, nil
}

// DeclineCheckpoint hands a subtask's decline to the job's coordinator.
func (s *Server) DeclineCheckpoint(ctx context.Context, req *weirv1.DeclineCheckpointRequest) (*weirv1.DeclineCheckpointResponse, error) {
	j, err := s.lookup(req.GetAttempt().GetJobId())
	if err != nil {
		return nil, err
	}
	if err := s.checkSender(ctx, j, req.GetAttempt(), "decline"); err != nil {
		return nil, err
	}
	j.coord.Decline(req)
	return &weirv1.DeclineCheckpointResponse{}, nil
}

// supported refuses valid specs that ask for what this JobManager cannot do
// yet, rather than silently running them differently.
func supported(g *weirv1.JobGraph) error {
	switch {
	case g.GetState().GetBackend() != weirv1.StateBackendConfig_BACKEND_PEBBLE && g.GetState().GetIncremental():
		return errors.New("jobmanager: state: incremental checkpoints need the pebble backend")
	}
	return nil
}

// validJobID reports whether id has the form of the JobManager's own IDs.
func validJobID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

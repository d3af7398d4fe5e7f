package jobmanager

import (
	"context"
	"errors"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/scheduler"
	"github.com/weirproject/weir/internal/state"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// DisposeSavepoint deletes a savepoint (Flink's `savepoint --dispose`). It
// refuses anything that is not provably a savepoint, so a wrong path cannot
// delete a checkpoint a job still needs or an unrelated directory, and a
// savepoint that a running job would restart from; and anything outside
// the checkpoint directory, whatever it holds.
func (s *Server) DisposeSavepoint(ctx context.Context, req *weirv1.DisposeSavepointRequest) (*weirv1.DisposeSavepointResponse, error) {
	if !s.recovered.Load() {
		// A job not recovered yet may restart from the savepoint; the REST
		// API comes here past the gRPC gate.
		return nil, status.Error(codes.Unavailable, "jobmanager: the new leader is still recovering the stored jobs; try again")
	}
	if req.GetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "jobmanager: dispose savepoint: no path")
	}
	dir := blob.Dir(storage.MetadataLocation(req.GetPath()))
	if err := s.checkDisposable(req.GetPath(), dir); err != nil {
		return nil, err
	}
	md, err := storage.ReadMetadata(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, status.Errorf(codes.NotFound, "jobmanager: dispose savepoint: there is no savepoint at %s (no %s file)", dir, storage.MetadataFile)
	case err != nil:
		return nil, status.Errorf(codes.FailedPrecondition, "jobmanager: dispose savepoint: %s is not a readable savepoint, nothing was deleted: %v", dir, err)
	}
	if !state.IsSavepoint(md.GetType()) {
		return nil, status.Errorf(codes.FailedPrecondition,
			"jobmanager: dispose savepoint: %s holds checkpoint %d of job %s, not a savepoint; nothing was deleted (checkpoints are removed by their job's retention)",
			dir, md.GetCheckpointId(), md.GetJobId())
	}
	if j := s.needsForRestart(dir); j != nil {
		return nil, status.Errorf(codes.FailedPrecondition,
			"jobmanager: dispose savepoint: job %s started from %s and has no completed checkpoint yet, so a restart would need it; nothing was deleted",
			j.id, dir)
	}
	// A savepoint is self-contained (canonical format), and ReadMetadata
	// reads its files beside its _metadata: deleting its directory deletes
	// all of it.
	if err := storage.Discard(dir); err != nil {
		return nil, status.Errorf(codes.Unavailable, "jobmanager: dispose savepoint: %v", err)
	}
	s.log.Info("savepoint disposed", "path", dir, "checkpoint_id", md.GetCheckpointId(), "job_id", md.GetJobId())
	return &weirv1.DisposeSavepointResponse{}, nil
}

// needsForRestart returns a job that is not over, started from the
// savepoint in dir, and would restart from it because it has completed no
// checkpoint of its own yet.
func (s *Server) needsForRestart(dir string) *jobMaster {
	for _, j := range s.jobsSorted() {
		if j.restore == nil || blob.Dir(j.restore.path) != dir {
			continue
		}
		if scheduler.Terminal(j.state()) {
			continue
		}
		if all, err := j.store.All(context.Background()); err != nil || len(all) == 0 {
			return j
		}
	}
	return nil
}

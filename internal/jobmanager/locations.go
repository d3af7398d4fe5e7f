package jobmanager

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/storage"
)

// storageRoots are where clients may point the JobManager at: the
// checkpoint directory, which holds the default savepoint directory
// (<checkpoint-dir>/savepoints) too, and the savepoint directories it was
// given. A savepoint restored, taken into a target directory or disposed
// of is read, written or deleted by the JobManager and its TaskManagers
// with their own rights, so a location outside would let any client of
// the API reach files it should not.
func (s *Server) storageRoots() []string {
	return append([]string{s.cfg.CheckpointDir}, s.cfg.SavepointDirs...)
}

// CheckStorageLocation refuses with InvalidArgument a location a client
// names (what for: "restore-from", "savepoint target directory", ...)
// outside the storage roots; see storage.CheckWithin.
func (s *Server) CheckStorageLocation(what, loc string) error {
	err := storage.CheckWithin(loc, s.storageRoots()...)
	if err != nil && !errors.Is(err, storage.ErrOutsideRoots) {
		return status.Errorf(codes.InvalidArgument, "jobmanager: %s %s: %v", what, loc, err)
	}
	if err != nil {
		others := ""
		if len(s.cfg.SavepointDirs) > 0 {
			others = " or the savepoint directories " + strings.Join(s.cfg.SavepointDirs, ", ")
		}
		return status.Errorf(codes.InvalidArgument,
			"jobmanager: %s: savepoints must be within the checkpoint directory %s%s (by default in %s): %v",
			what, s.cfg.CheckpointDir, others, blob.Join(s.cfg.CheckpointDir, "savepoints"), err)
	}
	return nil
}

// checkDisposable refuses what DisposeSavepoint must never delete
// whatever it holds: a directory outside the storage roots, or a root
// itself.
func (s *Server) checkDisposable(path, dir string) error {
	if err := s.CheckStorageLocation("dispose savepoint", path); err != nil {
		return err
	}
	if err := s.CheckStorageLocation("dispose savepoint", dir); err != nil {
		return err
	}
	if storage.IsRoot(dir, s.storageRoots()...) {
		return status.Error(codes.InvalidArgument, fmt.Sprintf("jobmanager: dispose savepoint: %s is the checkpoint directory itself, not a savepoint in it", dir))
	}
	return nil
}

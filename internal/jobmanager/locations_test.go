package jobmanager

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestStorageLocationsStayInTheCheckpointDirectory: a restore-from path
// and a savepoint target directory outside the checkpoint directory are
// refused with InvalidArgument before anything is read or written there,
// whether named directly, through ".." or through a link.
func TestStorageLocationsStayInTheCheckpointDirectory(t *testing.T) {
	ckpt := t.TempDir()
	s, err := New(Config{CheckpointDir: ckpt})
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	// A real savepoint outside: refused although it is readable.
	outside := filepath.Join(elsewhere, "savepoint-ab-1")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.WriteMetadata(outside, &weirv1.CheckpointMetadata{JobId: "job-x", CheckpointId: 1, Type: weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT, MaxParallelism: 128}); err != nil {
		t.Fatal(err)
	}
	escape := filepath.Join(ckpt, "escape")
	if err := os.Symlink(elsewhere, escape); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"absolute path outside": outside,
		"..":                    ckpt + "/../" + filepath.Base(elsewhere) + "/savepoint-ab-1",
		"link escaping":         filepath.Join(escape, "savepoint-ab-1"),
		"/etc":                  "/etc",
		"S3 without S3 storage": "s3://bucket/savepoints/savepoint-ab-1",
	}
	for name, path := range bad {
		t.Run("restore-from/"+name, func(t *testing.T) {
			g := &weirv1.JobGraph{Name: "j", RestoreFrom: path, Vertices: []*weirv1.JobVertex{{Name: "a", Operator: "sequence-source"}}}
			_, err := s.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g})
			requireRefused(t, err, path)
		})
		t.Run("savepoint/"+name, func(t *testing.T) {
			_, err := s.TriggerSavepoint(context.Background(), &weirv1.TriggerSavepointRequest{JobId: "no-such-job", TargetDirectory: path})
			requireRefused(t, err, path)
		})
		t.Run("stop/"+name, func(t *testing.T) {
			_, err := s.StopWithSavepoint(context.Background(), &weirv1.StopWithSavepointRequest{JobId: "no-such-job", TargetDirectory: path})
			requireRefused(t, err, path)
		})
	}
	if entries, err := os.ReadDir(elsewhere); err != nil || len(entries) != 1 {
		t.Errorf("the outside directory holds %v (%v), want only the savepoint", entries, err)
	}

	// Inside, the checks pass and the usual ones answer: an unknown job,
	// a missing savepoint.
	inside := filepath.Join(ckpt, "savepoints", "savepoint-ab-1")
	if _, err := s.TriggerSavepoint(context.Background(), &weirv1.TriggerSavepointRequest{JobId: "no-such-job", TargetDirectory: filepath.Dir(inside)}); status.Code(err) != codes.NotFound {
		t.Errorf("savepoint into the checkpoint directory for an unknown job: %v, want NotFound", err)
	}
	g := &weirv1.JobGraph{Name: "j", RestoreFrom: inside, Vertices: []*weirv1.JobVertex{{Name: "a", Operator: "sequence-source"}}}
	if _, err := s.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("restore from a missing savepoint inside: %v, want InvalidArgument naming the missing file", err)
	}
}

func requireRefused(t *testing.T, err error, path string) {
	t.Helper()
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("%s: %v, want InvalidArgument", path, err)
	}
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "savepoints must be within the checkpoint directory") || !strings.Contains(msg, path) {
		t.Fatalf("error %q does not name %s and the checkpoint directory", msg, path)
	}
}

// TestSavepointDirs: a directory given as a savepoint directory is a root
// like the checkpoint directory; outside both is still refused.
func TestSavepointDirs(t *testing.T) {
	ckpt, spDir, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	s, err := New(Config{CheckpointDir: ckpt, SavepointDirs: []string{spDir}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckStorageLocation("restore-from", filepath.Join(spDir, "savepoint-ab-1")); err != nil {
		t.Errorf("in a savepoint directory: %v", err)
	}
	err = s.CheckStorageLocation("restore-from", filepath.Join(elsewhere, "savepoint-ab-1"))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), spDir) {
		t.Errorf("outside: %v, want InvalidArgument naming the savepoint directory too", err)
	}
	if _, err := s.DisposeSavepoint(context.Background(), &weirv1.DisposeSavepointRequest{Path: spDir}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("disposing of the savepoint directory itself: %v, want InvalidArgument", err)
	}
}

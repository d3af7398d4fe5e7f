package jobmanager

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/checkpoint"
	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/scheduler"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestDisposeSavepoint deletes savepoints and nothing else: checkpoints,
// unrelated or corrupt directories, a savepoint a running job would
// restart from and savepoints outside the checkpoint directory (named
// directly, through "..", or through a link) are refused and left whole.
func TestDisposeSavepoint(t *testing.T) {
	ckpt := t.TempDir()
	s, err := New(Config{CheckpointDir: ckpt})
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(ckpt, "savepoints")
	elsewhere := t.TempDir()
	write := func(name string, typ weirv1.CheckpointType) string {
		dir := filepath.Join(root, name)
		if filepath.IsAbs(name) {
			dir = name
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		state := filepath.Join(dir, "sum-0.keyed")
		if err := os.WriteFile(state, []byte("state"), 0o644); err != nil {
			t.Fatal(err)
		}
		md := &weirv1.CheckpointMetadata{JobId: "job-x", CheckpointId: 7, Type: typ, MaxParallelism: 128,
			Subtasks: []*weirv1.SubtaskState{{Vertex: "sum", KeyedState: &weirv1.StateHandle{Path: state, Size: 5}}}}
		if _, err := storage.WriteMetadata(dir, md); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	savepoint := write("savepoint-1", weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT)
	chk := write("chk-7", weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT)
	corrupt := write("savepoint-corrupt", weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT)
	if err := os.WriteFile(filepath.Join(corrupt, storage.MetadataFile), []byte("not metadata"), 0o644); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(root, "plain")
	if err := os.MkdirAll(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := write(filepath.Join(elsewhere, "savepoint-outside"), weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT)
	escape := filepath.Join(root, "escape")
	if err := os.Symlink(elsewhere, escape); err != nil {
		t.Fatal(err)
	}
	// The checkpoint directory itself, holding a savepoint's _metadata.
	if _, err := storage.WriteMetadata(ckpt, &weirv1.CheckpointMetadata{JobId: "job-x", CheckpointId: 3, Type: weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT}); err != nil {
		t.Fatal(err)
	}
	needed := write("savepoint-needed", weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT)
	md, err := storage.ReadMetadata(needed)
	if err != nil {
		t.Fatal(err)
	}
	store := ha.NewStandaloneStore(1)
	j := &jobMaster{s: s, id: "running", restore: newRestorePoint(filepath.Join(needed, storage.MetadataFile), md), store: store}
	j.view.Store(&jobView{View: scheduler.View{State: weirv1.JobState_JOB_STATE_RUNNING}})
	s.mu.Lock()
	s.mu.jobs[j.id] = j
	s.mu.Unlock()

	for _, tc := range []struct {
		name, path string
		code       codes.Code
		gone       bool
	}{
		{"no path", "", codes.InvalidArgument, false},
		{"outside the checkpoint directory", outside, codes.InvalidArgument, false},
		{"its _metadata", filepath.Join(outside, storage.MetadataFile), codes.InvalidArgument, false},
		{"out through ..", root + "/../../" + filepath.Base(elsewhere) + "/savepoint-outside", codes.InvalidArgument, false},
		{"out through a link", filepath.Join(escape, "savepoint-outside"), codes.InvalidArgument, false},
		{"the checkpoint directory", ckpt, codes.InvalidArgument, false},
		{"missing", filepath.Join(root, "nope"), codes.NotFound, false},
		{"not a checkpoint directory", plain, codes.NotFound, false},
		{"corrupt metadata", corrupt, codes.FailedPrecondition, false},
		{"a checkpoint", chk, codes.FailedPrecondition, false},
		{"needed by a running job", needed, codes.FailedPrecondition, false},
		{"a savepoint, by its _metadata", filepath.Join(savepoint, storage.MetadataFile), codes.OK, true},
		{"the same savepoint again", savepoint, codes.NotFound, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.DisposeSavepoint(context.Background(), &weirv1.DisposeSavepointRequest{Path: tc.path})
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code %v (%v), want %v", got, err, tc.code)
			}
			if tc.path == "" {
				return
			}
			dir := tc.path
			if filepath.Base(dir) == storage.MetadataFile {
				dir = filepath.Dir(dir)
			}
			_, statErr := os.Stat(dir)
			if gone := os.IsNotExist(statErr); gone != tc.gone && tc.code != codes.NotFound {
				t.Errorf("directory gone = %v, want %v", gone, tc.gone)
			}
			t.Logf("%v", err)
		})
	}
	for _, kept := range []string{outside, ckpt} {
		if _, err := storage.ReadMetadata(kept); err != nil {
			t.Errorf("%s after the refused disposals: %v", kept, err)
		}
	}

	// Once the job has a checkpoint of its own, the savepoint is free.
	if _, err := store.Add(context.Background(), checkpoint.Completed{ID: 8, MetadataPath: filepath.Join(root, "chk-8", storage.MetadataFile)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DisposeSavepoint(context.Background(), &weirv1.DisposeSavepointRequest{Path: needed}); err != nil {
		t.Fatalf("dispose after the job's first checkpoint: %v", err)
	}
}

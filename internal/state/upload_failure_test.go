//go:build failpoints

package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/fault"
)

// TestFailedIncrementalUploadLeavesNothing: a checkpoint whose upload
// fails after some of its new files reached the shared directory removes
// them: nothing references them, and the shared directory is swept only
// at the next restart of the whole job.
func TestFailedIncrementalUploadLeavesNothing(t *testing.T) {
	root := t.TempDir()
	shared := filepath.Join(root, "shared")
	b := newBackend(t, kinds[2], shared, 1, 0)
	// Snapshots taken and aborted flush the memtable each time: the next
	// checkpoint has several SST files to upload.
	for i := range 3 {
		writeKeys(b, i*5000, (i+1)*5000, strings.Repeat("v", 100))
		s, err := b.TakeSnapshot(SnapshotOptions{CheckpointID: int64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		s.Release()
		b.NotifyCheckpointAborted(int64(i + 1))
	}
	// The first upload goes through, the second fails.
	if err := fault.Enable(fault.IncrementalUpload, `1*off->return("error")`); err != nil {
		t.Fatal(err)
	}
	defer fault.Disable(fault.IncrementalUpload) //nolint:errcheck
	dir := filepath.Join(root, "chk-4")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := b.TakeSnapshot(SnapshotOptions{CheckpointID: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(dir, "op", 0, 1); err == nil {
		t.Fatal("the write did not fail")
	}
	left, _ := os.ReadDir(shared)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if len(names) > 0 {
		t.Fatalf("the failed upload left %v in the shared directory", names)
	}
}

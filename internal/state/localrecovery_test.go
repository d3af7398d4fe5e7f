package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

func recoveringPebble(t *testing.T, shared, recovery string, restored int64) Backend {
	t.Helper()
	b, err := New(Config{
		Kind: weirv1.StateBackendConfig_BACKEND_PEBBLE, Incremental: true, MaxParallelism: confMaxP,
		KeyGroups: keygroup.RangeFor(confMaxP, 1, 0), LocalDir: t.TempDir(), SharedDir: shared,
		LocalRecoveryDir: recovery, RestoredCheckpointID: restored,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestLocalRecovery: the newest completed incremental snapshot is kept on
// local disk; a restore of that checkpoint reads it from there, even with
// checkpoint storage gone, and falls back to checkpoint storage for a
// copy that does not match. Copies of older and of aborted checkpoints
// are dropped.
func TestLocalRecovery(t *testing.T) {
	root := t.TempDir()
	shared, recovery := filepath.Join(root, "shared"), filepath.Join(t.TempDir(), "local-recovery", "job", "op-0")
	b := recoveringPebble(t, shared, recovery, 0)
	writeKeys(b, 0, 5000, "one")
	checkpointOnce(t, b, root, 1, SnapshotOptions{})
	writeKeys(b, 0, 100, "two")
	second := checkpointOnce(t, b, root, 2, SnapshotOptions{})
	// Checkpoint 3 is taken and aborted.
	writeKeys(b, 0, 10, "three")
	if err := os.MkdirAll(filepath.Join(root, "chk-3"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := b.TakeSnapshot(SnapshotOptions{CheckpointID: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(filepath.Join(root, "chk-3"), "op", 0, 1); err != nil {
		t.Fatal(err)
	}
	b.NotifyCheckpointAborted(3)
	if got := names(t, recovery); strings.Join(got, " ") != "chk-2" {
		t.Fatalf("local copies %v, want only chk-2 (chk-1 subsumed, chk-3 aborted)", got)
	}

	check := func(r Backend, want string) {
		t.Helper()
		r.SetCurrentKey([]byte("key-000050"))
		if v, ok := r.ValueState("v").Value(); !ok || string(v) != want {
			t.Fatalf("restored key-000050 = %q %v, want %q", v, ok, want)
		}
		r.SetCurrentKey([]byte("key-004000"))
		if v, ok := r.ValueState("v").Value(); !ok || string(v) != "one" {
			t.Fatalf("restored key-004000 = %q %v", v, ok)
		}
	}

	// Checkpoint storage loses the shared files: only the local copy can
	// restore them.
	moved := filepath.Join(t.TempDir(), "shared-away")
	if err := os.Rename(shared, moved); err != nil {
		t.Fatal(err)
	}
	r := recoveringPebble(t, shared, recovery, 2)
	if err := r.Restore([]*weirv1.SubtaskState{second}, 0, 1); err != nil {
		t.Fatalf("restore from the local copy: %v", err)
	}
	check(r, "two")

	// A local copy whose files do not match is not used: checkpoint
	// storage is.
	if err := os.Rename(moved, shared); err != nil {
		t.Fatal(err)
	}
	for _, n := range names(t, filepath.Join(recovery, "chk-2")) {
		if strings.HasSuffix(n, ".sst") {
			if err := os.WriteFile(filepath.Join(recovery, "chk-2", n), []byte("not the file"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	r2 := recoveringPebble(t, shared, recovery, 2)
	if err := r2.Restore([]*weirv1.SubtaskState{second}, 0, 1); err != nil {
		t.Fatalf("restore past a damaged local copy: %v", err)
	}
	check(r2, "two")
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

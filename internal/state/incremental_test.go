package state

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// checkpointOnce takes and writes checkpoint id of b into root/chk-<id>
// and confirms it.
func checkpointOnce(t *testing.T, b Backend, root string, id int64, opts SnapshotOptions) *weirv1.SubtaskState {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprintf("chk-%d", id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts.CheckpointID = id
	s, err := b.TakeSnapshot(opts)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Write(dir, "op", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.NotifyCheckpointComplete(id)
	return st
}

func writeKeys(b Backend, from, to int, val string) {
	v, m := b.ValueState("v"), b.MapState("m")
	for i := from; i < to; i++ {
		b.SetCurrentKey([]byte(fmt.Sprintf("key-%06d", i)))
		v.Update([]byte(val))
		m.Put([]byte("u"), []byte(val))
	}
}

func sharedHandles(st *weirv1.SubtaskState) map[string]bool {
	out := map[string]bool{}
	for _, h := range st.GetSharedFiles() {
		if h.GetShared() {
			out[h.GetPath()] = true
		}
	}
	return out
}

// State smaller than a memtable is flushed into SSTs by the snapshot: no
// WAL is uploaded, and a checkpoint after a small change uploads a small
// fraction of the state.
func TestPebbleIncrementalUploadsNoWAL(t *testing.T) {
	root := t.TempDir()
	shared := filepath.Join(root, "shared")
	b := newBackend(t, kinds[2], shared, 1, 0)
	writeKeys(b, 0, 20000, strings.Repeat("v", 50))
	first := checkpointOnce(t, b, root, 1, SnapshotOptions{})
	writeKeys(b, 0, 100, "changed")
	second := checkpointOnce(t, b, root, 2, SnapshotOptions{})
	for _, st := range []*weirv1.SubtaskState{first, second} {
		for _, h := range st.GetSharedFiles() {
			if strings.HasSuffix(h.GetPath(), ".log") {
				t.Fatalf("checkpoint uploaded a WAL: %s (%d bytes)", h.GetPath(), h.GetSize())
			}
		}
	}
	t.Logf("first: state %d checkpointed %d; second: state %d checkpointed %d",
		first.GetStateSize(), first.GetCheckpointedSize(), second.GetStateSize(), second.GetCheckpointedSize())
	if second.GetCheckpointedSize()*5 > second.GetStateSize() {
		t.Fatalf("second checkpoint uploaded %d of %d bytes", second.GetCheckpointedSize(), second.GetStateSize())
	}
	r := newBackend(t, kinds[2], shared, 1, 0)
	if err := r.Restore([]*weirv1.SubtaskState{second}, 0, 1); err != nil {
		t.Fatal(err)
	}
	r.SetCurrentKey([]byte("key-000050"))
	if v, _ := r.MapState("m").Get([]byte("u")); string(v) != "changed" {
		t.Fatalf("restored %q", v)
	}
	r.SetCurrentKey([]byte("key-019999"))
	if v, _ := r.ValueState("v").Value(); len(v) != 50 {
		t.Fatalf("restored %q", v)
	}
}

// A full checkpoint of an incremental backend uploads every file; the
// checkpoints after it reference its files again.
func TestPebbleFullCheckpoint(t *testing.T) {
	root := t.TempDir()
	shared := filepath.Join(root, "shared")
	b := newBackend(t, kinds[2], shared, 1, 0)
	writeKeys(b, 0, 20000, strings.Repeat("v", 50))
	first := checkpointOnce(t, b, root, 1, SnapshotOptions{})
	writeKeys(b, 0, 10, "x")
	full := checkpointOnce(t, b, root, 2, SnapshotOptions{Full: true})
	if full.GetCheckpointedSize() != full.GetStateSize() {
		t.Fatalf("full checkpoint uploaded %d of %d bytes", full.GetCheckpointedSize(), full.GetStateSize())
	}
	before := sharedHandles(first)
	for p := range sharedHandles(full) {
		if before[p] {
			t.Fatalf("full checkpoint references %s of checkpoint 1", p)
		}
	}
	writeKeys(b, 0, 10, "y")
	next := checkpointOnce(t, b, root, 3, SnapshotOptions{})
	// Every SST that checkpoint 3 still has from checkpoint 2 is referenced,
	// not uploaded again. (A background compaction may have rewritten
	// some or all of them in between: those are new files.)
	fullByLocal := map[string]string{}
	for p := range sharedHandles(full) {
		fullByLocal[uploadedAs(p)] = p
	}
	for p := range sharedHandles(next) {
		if was, ok := fullByLocal[uploadedAs(p)]; ok && was != p {
			t.Fatalf("checkpoint 3 uploaded %s again as %s after the full checkpoint", was, p)
		}
	}
}

// uploadedAs is the store's own name of an uploaded shared file.
func uploadedAs(path string) string {
	parts := strings.SplitN(filepath.Base(path), "_", 3)
	return parts[len(parts)-1]
}

// The first checkpoint after a restore references the restored shared
// files instead of uploading them again, when they are this job's; files
// of another job's checkpoint are uploaded again.
func TestPebbleRestoreReferencesRestoredFiles(t *testing.T) {
	root := t.TempDir()
	shared := filepath.Join(root, "shared")
	b := newBackend(t, kinds[2], shared, 1, 0)
	writeKeys(b, 0, 20000, strings.Repeat("v", 50))
	st := checkpointOnce(t, b, root, 1, SnapshotOptions{})
	restoredFiles := sharedHandles(st)

	same := newBackend(t, kinds[2], shared, 1, 0)
	if err := same.Restore([]*weirv1.SubtaskState{st}, 0, 1); err != nil {
		t.Fatal(err)
	}
	writeKeys(same, 0, 10, "x")
	next := checkpointOnce(t, same, root, 2, SnapshotOptions{})
	reused := 0
	for p := range sharedHandles(next) {
		if restoredFiles[p] {
			reused++
		}
	}
	t.Logf("after restore: state %d checkpointed %d, %d of %d restored files referenced",
		next.GetStateSize(), next.GetCheckpointedSize(), reused, len(restoredFiles))
	if reused != len(restoredFiles) || next.GetCheckpointedSize()*5 > next.GetStateSize() {
		t.Fatalf("first checkpoint after restore re-uploaded: %d of %d bytes, %d of %d files referenced",
			next.GetCheckpointedSize(), next.GetStateSize(), reused, len(restoredFiles))
	}

	otherJob := filepath.Join(t.TempDir(), "shared")
	other := newBackend(t, kinds[2], otherJob, 1, 0)
	if err := other.Restore([]*weirv1.SubtaskState{st}, 0, 1); err != nil {
		t.Fatal(err)
	}
	fresh := checkpointOnce(t, other, t.TempDir(), 2, SnapshotOptions{})
	for p := range sharedHandles(fresh) {
		if restoredFiles[p] || filepath.Dir(p) != otherJob {
			t.Fatalf("a job started from another job's checkpoint references %s", p)
		}
	}
}

func TestCleanLocalDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tm")
	if n, err := CleanLocalDir(dir); err != nil || n != 0 {
		t.Fatalf("fresh dir: %d %v", n, err)
	}
	open := func() *Pebble {
		b, err := OpenPebble(Config{Kind: weirv1.StateBackendConfig_BACKEND_PEBBLE, MaxParallelism: confMaxP, LocalDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// A store left behind by a killed process: its files without the
	// lock held (closed here, then its directory put back).
	dead := open()
	leftover := dead.Dir()
	if err := dead.db.Close(); err != nil {
		t.Fatal(err)
	}
	dead.db = nil
	// A store in use, as another TaskManager sharing the directory has.
	live := open()
	defer live.Close()
	if err := os.WriteFile(filepath.Join(dir, "keep.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := CleanLocalDir(dir); err != nil || n != 1 {
		t.Fatalf("clean: %d %v", n, err)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("leftover store still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(live.Dir(), "db")); err != nil {
		t.Fatalf("store in use removed: %v", err)
	}
	live.SetCurrentKey([]byte("k"))
	live.ValueState("v").Update([]byte("still works"))
	if _, err := os.Stat(filepath.Join(dir, "keep.txt")); err != nil {
		t.Fatalf("unrelated file removed: %v", err)
	}
}

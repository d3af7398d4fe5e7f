package state

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// TestLocalRecoveryAcrossRescale: subtasks rescaled 2 → 4 → 2 on one
// TaskManager restore every key group from the local copies their
// predecessors left (checkpoint storage is gone), each opening the
// snapshot holding most of its key groups in place. A store so opened is
// clipped to the new key groups: a key deleted by the subtask that owns
// it now must not come back from a sibling's copy of the same files.
func TestLocalRecoveryAcrossRescale(t *testing.T) {
	root := t.TempDir()
	shared, parent := filepath.Join(root, "shared"), filepath.Join(t.TempDir(), "local-recovery", "job")
	open := func(p, i int, restored int64) Backend {
		b, err := New(Config{
			Kind: weirv1.StateBackendConfig_BACKEND_PEBBLE, Incremental: true, MaxParallelism: confMaxP,
			KeyGroups: keygroup.RangeFor(confMaxP, p, i), LocalDir: t.TempDir(), SharedDir: shared,
			LocalRecoveryDir: LocalRecoveryDir(filepath.Dir(filepath.Dir(parent)), "job", "op", i), RestoredCheckpointID: restored,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	const n = 4000
	want := map[string]string{}
	snapshot := func(bs []Backend, id int64) []*weirv1.SubtaskState {
		dir := filepath.Join(root, fmt.Sprintf("chk-%d", id))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var out []*weirv1.SubtaskState
		for i, b := range bs {
			s, err := b.TakeSnapshot(SnapshotOptions{CheckpointID: id})
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.Write(dir, "op", i, len(bs))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, st)
		}
		for _, b := range bs {
			b.NotifyCheckpointComplete(id)
		}
		return out
	}
	// restore brings up p subtasks from prev with checkpoint storage
	// away, so that a download would fail.
	restore := func(prev []*weirv1.SubtaskState, id int64, p int) []Backend {
		away := filepath.Join(t.TempDir(), "away")
		if err := os.Rename(shared, away); err != nil {
			t.Fatal(err)
		}
		var bs []Backend
		for i := range p {
			b := open(p, i, id)
			if err := b.Restore(prev, i, p); err != nil {
				t.Fatalf("%d subtasks: subtask %d restores from local copies: %v", p, i, err)
			}
			bs = append(bs, b)
		}
		if err := os.Rename(away, shared); err != nil {
			t.Fatal(err)
		}
		return bs
	}
	check := func(bs []Backend, when string) {
		t.Helper()
		for k := range n {
			key := fmt.Sprintf("key-%06d", k)
			for i, b := range bs {
				if !owned(key, len(bs), i) {
					continue
				}
				b.SetCurrentKey([]byte(key))
				v, ok := b.ValueState("v").Value()
				if w, live := want[key]; ok != live || string(v) != w {
					t.Fatalf("%s: subtask %d of %d: %s = %q %v, want %q %v", when, i, len(bs), key, v, ok, w, live)
				}
			}
		}
		// A store holds nothing outside its subtask's key groups (what it
		// was opened from held more).
		for i, b := range bs {
			kgs := keygroup.RangeFor(confMaxP, len(bs), i)
			b.(*Pebble).writeBack()
			it, err := b.(*Pebble).db.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			for it.First(); it.Valid(); it.Next() {
				if kg, _, ok := decodeKey(it.Key()); ok && !kgs.Contains(kg) {
					it.Close()
					t.Fatalf("%s: subtask %d of %d stores key group %d, outside %v", when, i, len(bs), kg, kgs)
				}
			}
			it.Close()
		}
	}

	two := []Backend{open(2, 0, 0), open(2, 1, 0)}
	for k := range n {
		key := fmt.Sprintf("key-%06d", k)
		for i, b := range two {
			if owned(key, 2, i) {
				b.SetCurrentKey([]byte(key))
				b.ValueState("v").Update([]byte("one"))
				want[key] = "one"
			}
		}
	}
	four := restore(snapshot(two, 1), 1, 4)
	check(four, "2 → 4")
	// Each of the four deletes and rewrites some of its keys.
	for k := 0; k < n; k += 3 {
		key := fmt.Sprintf("key-%06d", k)
		for i, b := range four {
			if owned(key, 4, i) {
				b.SetCurrentKey([]byte(key))
				if k%2 == 0 {
					b.ValueState("v").Clear()
					delete(want, key)
				} else {
					b.ValueState("v").Update([]byte("two"))
					want[key] = "two"
				}
			}
		}
	}
	prev := snapshot(four, 2)
	// The sibling whose store holds deleted keys of the other comes first:
	// it is the base, and clipping is what keeps them deleted.
	slices.Reverse(prev)
	back := restore(prev, 2, 2)
	check(back, "4 → 2")
	// Once a checkpoint at the new parallelism completed, the copies the
	// indexes that are gone left behind are dropped too.
	snapshot(back, 3)
	for _, i := range []int{2, 3} {
		dir := LocalRecoveryDir(filepath.Dir(filepath.Dir(parent)), "job", "op", i)
		if got := names(t, dir); len(got) != 0 {
			t.Errorf("subtask %d's copies %v outlived checkpoint 3 at parallelism 2", i, got)
		}
	}
}

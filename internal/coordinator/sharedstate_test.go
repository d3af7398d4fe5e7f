package coordinator

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

func sharedState(paths ...string) *weirv1.SubtaskState {
	st := &weirv1.SubtaskState{}
	for _, p := range paths {
		st.SharedFiles = append(st.SharedFiles, &weirv1.StateHandle{Path: p, Shared: true})
	}
	// Exclusive files are never counted.
	st.SharedFiles = append(st.SharedFiles, &weirv1.StateHandle{Path: "chk/MANIFEST"})
	return st
}

func TestSharedRegistryLifecycle(t *testing.T) {
	r := NewSharedRegistry()
	mustRegister(t, r, 1, sharedState("a", "b"))
	mustRegister(t, r, 2, sharedState("b", "c")) // in flight
	mustRegister(t, r, 3, sharedState("c", "d")) // in flight, will abort
	if got := r.Unreferenced(sharedState("a", "x")); fmt.Sprint(got) != "[x]" {
		t.Fatalf("unreferenced %v", got)
	}
	if got := r.Release(3); fmt.Sprint(got) != "[d]" { // abort: c still held by 2
		t.Fatalf("abort freed %v", got)
	}
	if got := r.Release(1); fmt.Sprint(got) != "[a]" { // subsumed by 2
		t.Fatalf("subsume freed %v", got)
	}
	if got := r.Release(1); len(got) != 0 {
		t.Fatalf("second release freed %v", got)
	}
	if got := r.Release(99); len(got) != 0 {
		t.Fatalf("unknown checkpoint freed %v", got)
	}
	if r.Len() != 2 {
		t.Fatalf("len %d", r.Len())
	}
	// Rebuild from the retained checkpoints' metadata.
	r.Rebuild([]*weirv1.CheckpointMetadata{
		{CheckpointId: 2, Subtasks: []*weirv1.SubtaskState{sharedState("b"), sharedState("c")}},
		{CheckpointId: 4, Subtasks: []*weirv1.SubtaskState{sharedState("c", "e")}},
	})
	if got := r.Release(2); fmt.Sprint(got) != "[b]" {
		t.Fatalf("after rebuild freed %v", got)
	}
	if got := r.Release(4); fmt.Sprint(got) != "[c e]" {
		t.Fatalf("after rebuild freed %v", got)
	}
}

// A checkpoint whose ack references a shared file the registry gave up (it
// was deleted) is refused, naming the file, and registers nothing.
func TestSharedRegistryRefusesDeletedFiles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(r *SharedRegistry)
		ack     *weirv1.SubtaskState
		refused string // the deleted files the error names; "" accepts
	}{
		{
			name:    "file of a subsumed checkpoint",
			setup:   func(r *SharedRegistry) { mustRegister(t, r, 1, sharedState("a", "b")); r.Release(1) },
			ack:     sharedState("a", "c"),
			refused: "a",
		},
		{
			name: "file kept by a newer checkpoint",
			setup: func(r *SharedRegistry) {
				mustRegister(t, r, 1, sharedState("a", "b"))
				mustRegister(t, r, 2, sharedState("a"))
				r.Release(1)
			},
			ack: sharedState("a", "c"),
		},
		{
			name:    "files of an unused ack",
			setup:   func(r *SharedRegistry) { r.Unreferenced(sharedState("x", "y")) },
			ack:     sharedState("y", "x", "c"),
			refused: "x, y",
		},
		{
			name:    "file of an aborted checkpoint",
			setup:   func(r *SharedRegistry) { mustRegister(t, r, 3, sharedState("d")); r.Release(3) },
			ack:     sharedState("d"),
			refused: "d",
		},
		{
			name: "file of a retained checkpoint after a rebuild",
			setup: func(r *SharedRegistry) {
				mustRegister(t, r, 1, sharedState("a"))
				r.Release(1)
				r.Rebuild([]*weirv1.CheckpointMetadata{{CheckpointId: 2, Subtasks: []*weirv1.SubtaskState{sharedState("b")}}})
			},
			ack:     sharedState("a", "b"),
			refused: "a",
		},
		{
			name:  "new files only",
			setup: func(r *SharedRegistry) {},
			ack:   sharedState("n1", "n2"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewSharedRegistry()
			tc.setup(r)
			before := r.Len()
			err := r.Register(7, tc.ack)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("a checkpoint referencing deleted files was accepted")
			}
			if !strings.HasSuffix(err.Error(), "already deleted: "+tc.refused) {
				t.Fatalf("error %q does not name %s", err, tc.refused)
			}
			if r.Len() != before {
				t.Fatalf("a refused ack registered files: %d, was %d", r.Len(), before)
			}
			if got := r.Release(7); len(got) != 0 {
				t.Fatalf("a refused ack holds %v", got)
			}
		})
	}
}

// Unregister takes back one ack's references and no other's.
func TestSharedRegistryUnregister(t *testing.T) {
	r := NewSharedRegistry()
	mustRegister(t, r, 1, sharedState("a"))
	mustRegister(t, r, 2, sharedState("a", "b"))
	mustRegister(t, r, 2, sharedState("a", "b")) // a duplicate ack
	r.Unregister(2, sharedState("a", "b"))
	if got := r.Release(1); len(got) != 0 {
		t.Fatalf("released %v while checkpoint 2 still references a", got)
	}
	r.Unregister(2, sharedState("a", "b"))
	if r.Len() != 0 {
		t.Fatalf("%d files still referenced", r.Len())
	}
	if got := r.Unreferenced(sharedState("a", "b")); fmt.Sprint(got) != "[a b]" {
		t.Fatalf("unreferenced %v", got)
	}
}

func mustRegister(t *testing.T, r *SharedRegistry, id int64, states ...*weirv1.SubtaskState) {
	t.Helper()
	if err := r.Register(id, states...); err != nil {
		t.Fatal(err)
	}
}

// An ack that references a shared file deleted when an older checkpoint was
// subsumed makes its checkpoint fail, declined with the file named, instead
// of completing a checkpoint that cannot be restored; the ack's own new
// upload is deleted with it.
func TestDriverRefusesAckOfDeletedSharedFile(t *testing.T) {
	e := newDriverEnv(t, testConfig(), nil, nil)
	e.d.Start(e.tasks)
	shared := filepath.Join(e.storage.root, "shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	upload := func(name string) string {
		p := filepath.Join(shared, name)
		if err := os.WriteFile(p, []byte("sst"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// checkpoint acks src/0 with the shared files given, the others with
	// exclusive state only.
	checkpoint := func(id int64, files ...string) Result {
		t.Helper()
		res := e.trigger(Manual, "")
		e.triggered(id, "CHECKPOINT")
		keyed := filepath.Join(e.chk(id), "src-0.keyed")
		if err := os.WriteFile(keyed, []byte("state"), 0o644); err != nil {
			t.Fatal(err)
		}
		st := &weirv1.SubtaskState{Vertex: "src", KeyedState: &weirv1.StateHandle{Path: keyed, Size: 5}}
		for _, f := range files {
			st.SharedFiles = append(st.SharedFiles, &weirv1.StateHandle{Path: f, Size: 3, Shared: true})
		}
		e.d.Acknowledge(&weirv1.AcknowledgeCheckpointRequest{Attempt: e.tasks[0].Attempt, CheckpointId: id, State: st})
		for _, task := range e.tasks[1:] {
			e.ack(task, id, e.chk(id))
		}
		return waitResult(t, res)
	}
	s1 := upload("a_1_000005.sst")
	if r := checkpoint(1, s1); r.Err != nil {
		t.Fatal(r.Err)
	}
	s2 := upload("a_2_000007.sst")
	if r := checkpoint(2, s2); r.Err != nil { // subsumes 1, and s1 with it
		t.Fatal(r.Err)
	}
	e.rec.waitFor(t, "discard chk-1")
	wantGone(t, s1)

	s3 := upload("a_3_000009.sst")
	r := checkpoint(3, s1, s3)
	wantFailure(t, r, weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED)
	if !strings.Contains(r.Err.Error(), s1) {
		t.Fatalf("the failure does not name the deleted file: %v", r.Err)
	}
	e.aborted(3)
	e.rec.waitFor(t, "discard chk-3", "discard-state chk-3/src-0.keyed") // the shared files go first
	wantGone(t, s3)
	if _, err := os.Stat(s2); err != nil {
		t.Fatalf("the retained checkpoint's file: %v", err)
	}
	if st := e.d.Stats(); st.GetLatestCompleted().GetId() != 2 {
		t.Fatalf("latest completed %d, want 2", st.GetLatestCompleted().GetId())
	}
}

package coordinator

import (
	"fmt"
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

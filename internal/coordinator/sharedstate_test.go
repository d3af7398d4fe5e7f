package coordinator

import (
	"fmt"
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
	r.Register(1, sharedState("a", "b"))
	r.Register(2, sharedState("b", "c")) // in flight
	r.Register(3, sharedState("c", "d")) // in flight, will abort
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

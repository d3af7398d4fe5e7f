package state

import (
	"fmt"
	"testing"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// operatorStates checkpoints one subtask per list of items: each holds
// them as list state "l", and its index as union state "u".
func operatorStates(t *testing.T, k backendKind, items ...[]string) []*weirv1.SubtaskState {
	t.Helper()
	dir := t.TempDir()
	var out []*weirv1.SubtaskState
	for i, its := range items {
		b := newBackend(t, k, t.TempDir(), len(items), i)
		for _, it := range its {
			b.ListState("l", false).Add([]byte(it))
		}
		b.ListState("u", true).Add([]byte(fmt.Sprint("u", i)))
		s, err := b.TakeSnapshot(SnapshotOptions{CheckpointID: 1})
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Write(dir, "op", i, len(items))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, st)
	}
	// Acks arrive in any order.
	out[0], out[len(out)-1] = out[len(out)-1], out[0]
	return out
}

// restoredLists restores prev into parallelism fresh backends and
// returns, per subtask, its list state and its union state.
func restoredLists(t *testing.T, k backendKind, prev []*weirv1.SubtaskState, parallelism int) (lists, unions []string) {
	t.Helper()
	for i := range parallelism {
		b := newBackend(t, k, t.TempDir(), parallelism, i)
		if err := b.Restore(prev, i, parallelism); err != nil {
			t.Fatal(err)
		}
		lists = append(lists, fmt.Sprintf("%s", b.ListState("l", false).Get()))
		unions = append(unions, fmt.Sprintf("%s", b.ListState("u", true).Get()))
	}
	return lists, unions
}

// At the parallelism it was taken at, every subtask gets its own list items
// back, however unevenly the lists were filled; union state is still given
// whole. At another parallelism the items are dealt round-robin in subtask
// order.
func TestRestoreOperatorListAssignment(t *testing.T) {
	forEachBackend(t, func(t *testing.T, k backendKind) {
		prev := operatorStates(t, k, []string{"a0", "a1", "a2"}, []string{"b0"})
		for _, tc := range []struct {
			parallelism int
			lists       string
		}{
			{2, "[[a0 a1 a2] [b0]]"},
			{3, "[[a0 b0] [a1] [a2]]"},
			{1, "[[a0 a1 a2 b0]]"},
		} {
			lists, unions := restoredLists(t, k, prev, tc.parallelism)
			if fmt.Sprint(lists) != tc.lists {
				t.Errorf("parallelism %d: lists %v, want %s", tc.parallelism, lists, tc.lists)
			}
			for i, u := range unions {
				if u != "[u0 u1]" {
					t.Errorf("parallelism %d: subtask %d union state %s", tc.parallelism, i, u)
				}
			}
		}
	})
}

package jobmanager

import (
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestForKeyGroupsSendsOnlyOverlappingKeyedState rescales 3 → 2 subtasks
// (max parallelism 12): each new subtask gets every old operator state,
// but keyed state only from the old subtasks whose key groups it takes over.
func TestForKeyGroupsSendsOnlyOverlappingKeyedState(t *testing.T) {
	var prev []*weirv1.SubtaskState
	for i := 0; i < 3; i++ {
		r := keygroup.RangeFor(12, 3, i) // 0-3, 4-7, 8-11
		prev = append(prev, &weirv1.SubtaskState{
			SubtaskIndex: int32(i), KeyGroups: &weirv1.KeyGroupRange{Start: int32(r.Start), End: int32(r.End)},
			KeyedState:    &weirv1.StateHandle{InlineData: []byte{byte(i)}},
			OperatorState: &weirv1.StateHandle{InlineData: []byte{byte(i)}},
			SharedFiles:   []*weirv1.StateHandle{{Path: "shared/x", Shared: true}},
		})
	}
	for _, tc := range []struct {
		subtask int
		keyed   []bool // whether old subtask i's keyed state is sent
	}{
		{0, []bool{true, true, false}}, // key groups 0-5
		{1, []bool{false, true, true}}, // key groups 6-11
	} {
		got := forKeyGroups(prev, keygroup.RangeFor(12, 2, tc.subtask))
		if len(got) != 3 {
			t.Fatalf("subtask %d: %d old subtasks, want all 3 (operator state)", tc.subtask, len(got))
		}
		for i, st := range got {
			if st.GetOperatorState() == nil {
				t.Errorf("subtask %d: old subtask %d's operator state dropped", tc.subtask, i)
			}
			if has := st.GetKeyedState() != nil && len(st.GetSharedFiles()) > 0; has != tc.keyed[i] {
				t.Errorf("subtask %d: old subtask %d's keyed state sent = %v, want %v", tc.subtask, i, has, tc.keyed[i])
			}
		}
	}
	if prev[2].GetKeyedState() == nil {
		t.Error("forKeyGroups modified the restore point's state")
	}
}

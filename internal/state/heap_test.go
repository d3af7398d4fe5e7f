package state

import (
	"fmt"
	"sort"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// State written by two subtasks must come back, key by key, to whichever
// subtask owns the key's group at the new parallelism.
func TestSnapshotRestoreRescales(t *testing.T) {
	const maxP = 16
	dir := t.TempDir()
	var prev []*weirv1.SubtaskState
	want := map[string]string{}
	for i := 0; i < 2; i++ {
		h := NewHeap(maxP, keygroup.RangeFor(maxP, 2, i))
		sums := h.ValueState("sum")
		for k := 0; k < 100; k++ {
			key := []byte(fmt.Sprint(k))
			if keygroup.OperatorIndex(keygroup.Of(key, maxP), maxP, 2) != i {
				continue
			}
			h.SetCurrentKey(key)
			sums.Update([]byte(fmt.Sprint(k * 10)))
			want[string(key)] = fmt.Sprint(k * 10)
		}
		h.ListState("offsets", false).Update([][]byte{[]byte(fmt.Sprint("off", i))})
		snap := h.Snapshot()
		// Changes after the snapshot must not leak into it.
		h.SetCurrentKey([]byte("late"))
		sums.Update([]byte("x"))
		st, err := snap.Write(dir, "sum", i, 2)
		if err != nil {
			t.Fatal(err)
		}
		prev = append(prev, st)
	}
	got := map[string]string{}
	var offsets []string
	for i := 0; i < 3; i++ {
		h := NewHeap(maxP, keygroup.RangeFor(maxP, 3, i))
		if err := h.Restore(prev, i, 3); err != nil {
			t.Fatal(err)
		}
		for k, v := range h.values["sum"] {
			if keygroup.OperatorIndex(keygroup.Of([]byte(k), maxP), maxP, 3) != i {
				t.Fatalf("subtask %d restored key %q it does not own", i, k)
			}
			got[k] = string(v)
		}
		for _, it := range h.ListState("offsets", false).Get() {
			offsets = append(offsets, string(it))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored %v, want %v", got, want)
	}
	sort.Strings(offsets)
	if fmt.Sprint(offsets) != "[off0 off1]" {
		t.Fatalf("offsets %v", offsets)
	}
}

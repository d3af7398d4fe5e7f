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
			got[k] = string(v.b)
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

// Update writes a value in place only when nothing else can see its bytes:
// not a snapshot taken since it was allocated (written out on another
// goroutine), not a caller of Value. A caller of Peek lends them back.
func TestHeapUpdatesInPlaceOnlyWhatNobodyHolds(t *testing.T) {
	h := NewHeap(16, keygroup.RangeFor(16, 1, 0))
	v := h.ValueState("sum").(*valueState)
	h.SetCurrentKey([]byte("k"))
	v.Update([]byte("10"))
	peeked, _ := v.Peek()
	v.Update([]byte("11"))
	if got, _ := v.Peek(); &got[0] != &peeked[0] {
		t.Fatal("an update after Peek allocated: want the value written in place")
	}

	snap := h.Snapshot()
	v.Update([]byte("12"))
	if got := string(snap.values["sum"]["k"]); got != "11" {
		t.Fatalf("snapshot holds %q after an update, want 11", got)
	}
	// Allocated after the snapshot: in place again.
	before, _ := v.Peek()
	v.Update([]byte("13"))
	if got, _ := v.Peek(); &got[0] != &before[0] {
		t.Fatal("an update of a value allocated after the snapshot allocated")
	}

	held, _ := v.Value()
	v.Update([]byte("14"))
	if string(held) != "13" {
		t.Fatalf("a value Value returned became %q, want 13", held)
	}

	// A value longer than the old one's room, and nil, as before.
	v.Update([]byte("a longer value than the room the old one had"))
	if got, _ := v.Value(); string(got) != "a longer value than the room the old one had" {
		t.Fatalf("got %q", got)
	}
	v.Update(nil)
	if got, ok := v.Value(); !ok || got != nil {
		t.Fatalf("after Update(nil): %q, %v", got, ok)
	}

	// Reducing state peeks, so its accumulator is updated in place too,
	// and never in a snapshot's bytes.
	r := h.ReducingState("max", func(acc, b []byte) []byte {
		if string(b) > string(acc) {
			return append(acc[:0], b...)
		}
		return acc
	})
	r.Add([]byte("3"))
	snap = h.Snapshot()
	r.Add([]byte("5"))
	r.Add([]byte("7"))
	if got := string(snap.values["max"]["k"]); got != "3" {
		t.Fatalf("snapshot of the reducing state holds %q, want 3", got)
	}
	if got, _ := r.Get(); string(got) != "7" {
		t.Fatalf("reduced to %q, want 7", got)
	}
}

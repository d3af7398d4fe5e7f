package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
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

// A key's map entries are shared with a snapshot and with a running
// iteration, and copied by the first change after either: the snapshot
// and the iteration see the entries as they were, the next iteration as
// they are, in order.
func TestHeapMapCopiesOnWrite(t *testing.T) {
	h := NewHeap(16, keygroup.RangeFor(16, 1, 0))
	m := h.MapState("m")
	h.SetCurrentKey([]byte("k"))
	entries := func() string {
		var b strings.Builder
		for k, v := range m.All() {
			fmt.Fprintf(&b, "%s=%s ", k, v)
		}
		return b.String()
	}
	for _, k := range []string{"c", "a", "b"} {
		m.Put([]byte(k), []byte(k+"1"))
	}
	if got := entries(); got != "a=a1 b=b1 c=c1 " {
		t.Fatalf("entries %q", got)
	}
	snap := h.Snapshot()
	m.Put([]byte("b"), []byte("b2"))
	m.Remove([]byte("c"))
	m.Put([]byte("aa"), []byte("aa2"))
	if got := fmt.Sprint(snap.maps["m"]["k"]); got != "map[a:[97 49] b:[98 49] c:[99 49]]" {
		t.Fatalf("the snapshot holds %s after changes", got)
	}
	if got := entries(); got != "a=a1 aa=aa2 b=b2 " {
		t.Fatalf("entries after changes %q", got)
	}

	// Changes in the loop are not seen by it, and are there after it.
	var seen []string
	for k, v := range m.All() {
		seen = append(seen, string(k)+"="+string(v))
		if string(k) == "a" {
			m.Put([]byte("b"), []byte("b3"))
			m.Remove([]byte("aa"))
			m.Put([]byte("ab"), []byte("ab3"))
		}
	}
	if got := strings.Join(seen, " "); got != "a=a1 aa=aa2 b=b2" {
		t.Fatalf("the loop saw %q", got)
	}
	if got := entries(); got != "a=a1 ab=ab3 b=b3 " {
		t.Fatalf("entries after the loop %q", got)
	}

	// Random changes keep the order All gives that of a fresh sort.
	rng := rand.New(rand.NewPCG(1, 2))
	model := map[string]string{"a": "a1", "ab": "ab3", "b": "b3"}
	for i := range 2000 {
		k := fmt.Sprintf("%03d", rng.IntN(200))
		switch rng.IntN(3) {
		case 0:
			m.Remove([]byte(k))
			delete(model, k)
		default:
			v := fmt.Sprint(i)
			m.Put([]byte(k), []byte(v))
			model[k] = v
		}
		if i%97 == 0 {
			h.Snapshot()
		}
		if i%13 == 0 {
			var want strings.Builder
			for _, k := range slices.Sorted(maps.Keys(model)) {
				fmt.Fprintf(&want, "%s=%s ", k, model[k])
			}
			if got := entries(); got != want.String() {
				t.Fatalf("step %d: entries\n%s\nwant\n%s", i, got, want.String())
			}
		}
	}
}

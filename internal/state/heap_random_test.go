package state

import (
	"bytes"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// reviewModel is the expected content of one map state: key → user key → value.
type reviewModel map[string]map[string]string

func (m reviewModel) clone() reviewModel {
	c := reviewModel{}
	for k, um := range m {
		c[k] = maps.Clone(um)
	}
	return c
}

func (m reviewModel) String() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		um := m[k]
		if len(um) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s{", k)
		for _, uk := range slices.Sorted(maps.Keys(um)) {
			fmt.Fprintf(&b, "%q=%q ", uk, um[uk])
		}
		b.WriteString("} ")
	}
	return b.String()
}

// TestHeapMapRandomized drives the heap map state with random Puts,
// Removes, Clears, nested and abandoned iterations (All, Ascend, Descend)
// with writes inside them, and snapshots written out on another goroutine
// while the changes go on; every iteration must see the entries as they
// were when it began, lent slices must never change, and every snapshot
// must hold exactly the state at the time it was taken. Run with -race.
func TestHeapMapRandomized(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { reviewHeapRun(t, seed) })
	}
}

type reviewLent struct {
	k, v         []byte
	wantK, wantV string
}

func reviewHeapRun(t *testing.T, seed uint64) {
	const maxP = 16
	rng := rand.New(rand.NewPCG(seed, 99))
	h := NewHeap(maxP, keygroup.RangeFor(maxP, 1, 0))
	m := h.MapState("m").(*mapState)
	model := reviewModel{}
	keys := []string{"k0", "k1", "k2"}
	uks := []string{"", "a", "b", "bb", "c", "d", "e", "f", "g", "\xff"}
	cur := "k0"
	setKey := func(k string) { cur = k; h.SetCurrentKey([]byte(k)) }
	setKey("k0")
	var lent []reviewLent
	step := 0

	type pending struct {
		snap *Snapshot
		want reviewModel
		done chan *weirv1.SubtaskState
		errc chan error
	}
	var snaps []pending
	var wg sync.WaitGroup
	dir := t.TempDir()

	// op does one random change (or a nested iteration, up to depth 2).
	var op func(depth int)
	var iterate func(depth int)
	op = func(depth int) {
		step++
		switch r := rng.IntN(20); {
		case r < 8:
			uk, v := uks[rng.IntN(len(uks))], fmt.Sprint("v", step)
			m.Put([]byte(uk), []byte(v))
			if model[cur] == nil {
				model[cur] = map[string]string{}
			}
			model[cur][uk] = v
		case r < 13:
			uk := uks[rng.IntN(len(uks))]
			m.Remove([]byte(uk))
			delete(model[cur], uk)
		case r < 14:
			m.Clear()
			delete(model, cur)
		case r < 16:
			setKey(keys[rng.IntN(len(keys))])
		case r < 18:
			if depth < 2 {
				iterate(depth + 1)
			}
		default:
			if depth == 0 {
				p := pending{snap: h.Snapshot(), want: model.clone(), done: make(chan *weirv1.SubtaskState, 1), errc: make(chan error, 1)}
				n := len(snaps)
				wg.Add(1)
				go func() {
					defer wg.Done()
					st, err := p.snap.Write(dir, fmt.Sprint("v", seed, "-", n), 0, 1)
					p.errc <- err
					p.done <- st
				}()
				snaps = append(snaps, p)
			}
		}
	}
	iterate = func(depth int) {
		kind := rng.IntN(3)
		from := uks[rng.IntN(len(uks))]
		if rng.IntN(4) == 0 {
			from = "b0" // between keys
		}
		var want []string
		um := model[cur]
		for _, uk := range slices.Sorted(maps.Keys(um)) {
			switch {
			case kind == 0,
				kind == 1 && uk >= from,
				kind == 2 && uk < from:
				want = append(want, uk)
			}
		}
		var seq iter.Seq2[[]byte, []byte]
		switch kind {
		case 0:
			seq = m.All()
		case 1:
			seq = m.Ascend([]byte(from))
		case 2:
			seq = m.Descend([]byte(from))
			slices.Reverse(want)
		}
		wantV := maps.Clone(um)
		startKey := cur
		i := 0
		for k, v := range seq {
			if i >= len(want) {
				t.Fatalf("step %d: iteration %d from %q of %s yields %q beyond %q", step, kind, from, startKey, k, want)
			}
			if string(k) != want[i] || string(v) != wantV[want[i]] {
				t.Fatalf("step %d: iteration %d from %q of %s: entry %d is %q=%q, want %q=%q", step, kind, from, startKey, i, k, v, want[i], wantV[want[i]])
			}
			if kind != 0 {
				lent = append(lent, reviewLent{k: k, v: v, wantK: string(k), wantV: string(v)})
			}
			i++
			if rng.IntN(6) == 0 {
				break
			}
			for range rng.IntN(3) {
				op(depth)
			}
		}
		_ = i
	}

	for range 400 {
		op(0)
		// Now and then, the whole state against the model.
		if rng.IntN(10) == 0 {
			got := reviewModel{}
			for k, c := range h.maps["m"] {
				got[k] = map[string]string{}
				for uk, v := range c.m {
					got[k][uk] = string(v)
				}
				if c.iterating != 0 {
					t.Fatalf("step %d: key %s: %d iterations still counted", step, k, c.iterating)
				}
				if c.sorted != nil && !slices.Equal(c.sorted, slices.Sorted(maps.Keys(c.m))) {
					t.Fatalf("step %d: key %s: sorted %q, keys %q", step, k, c.sorted, slices.Sorted(maps.Keys(c.m)))
				}
			}
			if got.String() != model.String() {
				t.Fatalf("step %d: state\n%s\nwant\n%s", step, got, model)
			}
		}
	}
	wg.Wait()
	for _, l := range lent {
		if string(l.k) != l.wantK || string(l.v) != l.wantV {
			t.Fatalf("a lent slice changed: %q=%q, was %q=%q", l.k, l.v, l.wantK, l.wantV)
		}
	}
	for i, p := range snaps {
		if err := <-p.errc; err != nil {
			t.Fatal(err)
		}
		st := <-p.done
		got := reviewModel{}
		for k, um := range p.snap.maps["m"] {
			got[k] = map[string]string{}
			for uk, v := range um {
				got[k][uk] = string(v)
			}
		}
		if got.String() != p.want.String() {
			t.Fatalf("snapshot %d holds\n%s\nwant\n%s", i, got, p.want)
		}
		r := NewHeap(maxP, keygroup.RangeFor(maxP, 1, 0))
		if err := r.Restore([]*weirv1.SubtaskState{st}, 0, 1); err != nil {
			t.Fatal(err)
		}
		got = reviewModel{}
		for k, c := range r.maps["m"] {
			got[k] = map[string]string{}
			for uk, v := range c.m {
				got[k][uk] = string(v)
			}
		}
		if got.String() != p.want.String() {
			t.Fatalf("snapshot %d restores\n%s\nwant\n%s", i, got, p.want)
		}
	}
}

// TestHeapRestoreSnapshotWrite: a heap restored, snapshotted, then
// changed while the snapshot is written on another goroutine (run with
// -race), and changed again during an iteration.
func TestHeapRestoreSnapshotWrite(t *testing.T) {
	const maxP = 16
	dir := t.TempDir()
	h := NewHeap(maxP, keygroup.RangeFor(maxP, 1, 0))
	m := h.MapState("m")
	for k := range 50 {
		h.SetCurrentKey([]byte(fmt.Sprint("k", k)))
		for u := range 20 {
			m.Put([]byte(fmt.Sprint("u", u)), []byte(fmt.Sprint(k, "/", u)))
		}
	}
	st, err := h.Snapshot().Write(dir, "a", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := NewHeap(maxP, keygroup.RangeFor(maxP, 1, 0))
	if err := r.Restore([]*weirv1.SubtaskState{st}, 0, 1); err != nil {
		t.Fatal(err)
	}
	rm := r.MapState("m")
	snap := r.Snapshot()
	done := make(chan *weirv1.SubtaskState)
	go func() {
		st, err := snap.Write(dir, "b", 0, 1)
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	for k := range 50 {
		r.SetCurrentKey([]byte(fmt.Sprint("k", k)))
		for uk := range rm.(*mapState).Ascend(nil) {
			rm.Put(uk, []byte("changed"))
			rm.Remove([]byte("u3"))
			rm.Put([]byte("new"), []byte("x"))
		}
		if k%2 == 0 {
			rm.Clear()
		}
	}
	st2 := <-done
	again := NewHeap(maxP, keygroup.RangeFor(maxP, 1, 0))
	if err := again.Restore([]*weirv1.SubtaskState{st2}, 0, 1); err != nil {
		t.Fatal(err)
	}
	am := again.MapState("m")
	for k := range 50 {
		again.SetCurrentKey([]byte(fmt.Sprint("k", k)))
		n := 0
		for uk, v := range am.All() {
			if !bytes.HasPrefix(v, []byte(fmt.Sprint(k, "/"))) || !bytes.HasPrefix(uk, []byte("u")) {
				t.Fatalf("key k%d: the snapshot holds %q=%q", k, uk, v)
			}
			n++
		}
		if n != 20 {
			t.Fatalf("key k%d: %d entries in the snapshot, want 20", k, n)
		}
	}
}

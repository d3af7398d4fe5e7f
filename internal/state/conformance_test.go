package state

import (
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

const confMaxP = 16

type backendKind struct {
	name        string
	kind        weirv1.StateBackendConfig_Backend
	incremental bool
	// inline is Config.InlineThreshold: the suite's state is small, so
	// with the default every exclusive handle is inline, with 0 a file.
	inline int
	// cache is Config.CacheBytes: 1 writes back and evicts at every
	// write, -1 turns the cache off.
	cache int
}

// The first three write files (tests pick kinds[2] for incremental).
var kinds = []backendKind{
	{"heap", weirv1.StateBackendConfig_BACKEND_HEAP, false, 0, 0},
	{"pebble", weirv1.StateBackendConfig_BACKEND_PEBBLE, false, 0, 0},
	{"pebble-incremental", weirv1.StateBackendConfig_BACKEND_PEBBLE, true, 0, 0},
	{"heap-inline", weirv1.StateBackendConfig_BACKEND_HEAP, false, storage.DefaultInlineThreshold, 0},
	{"pebble-inline", weirv1.StateBackendConfig_BACKEND_PEBBLE, false, storage.DefaultInlineThreshold, 0},
	{"pebble-incremental-inline", weirv1.StateBackendConfig_BACKEND_PEBBLE, true, storage.DefaultInlineThreshold, 0},
	{"pebble-tiny-cache", weirv1.StateBackendConfig_BACKEND_PEBBLE, false, 0, 1},
	{"pebble-incremental-tiny-cache", weirv1.StateBackendConfig_BACKEND_PEBBLE, true, 0, 1},
	{"pebble-uncached", weirv1.StateBackendConfig_BACKEND_PEBBLE, false, 0, -1},
}

func newBackend(t *testing.T, k backendKind, shared string, parallelism, subtask int) Backend {
	t.Helper()
	b, err := New(Config{
		Kind: k.kind, Incremental: k.incremental, MaxParallelism: confMaxP,
		KeyGroups: keygroup.RangeFor(confMaxP, parallelism, subtask),
		LocalDir:  t.TempDir(), SharedDir: shared, InlineThreshold: k.inline,
		CacheBytes: k.cache,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// forEachBackend runs the same test against every backend.
func forEachBackend(t *testing.T, f func(t *testing.T, k backendKind)) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { f(t, k) })
	}
}

func owned(key string, parallelism, subtask int) bool {
	return keygroup.OperatorIndex(keygroup.Of([]byte(key), confMaxP), confMaxP, parallelism) == subtask
}

func TestConformanceValueAndList(t *testing.T) {
	forEachBackend(t, func(t *testing.T, k backendKind) {
		b := newBackend(t, k, t.TempDir(), 1, 0)
		v := b.ValueState("v")
		w := b.ValueState("w")
		b.SetCurrentKey([]byte("a"))
		if _, ok := v.Value(); ok {
			t.Fatal("value before update")
		}
		v.Update([]byte("1"))
		w.Update([]byte("other"))
		b.SetCurrentKey([]byte("b"))
		if _, ok := v.Value(); ok {
			t.Fatal("value leaked across keys")
		}
		v.Update([]byte{})
		if got, ok := v.Value(); !ok || len(got) != 0 {
			t.Fatalf("empty value: %q %v", got, ok)
		}
		b.SetCurrentKey([]byte("a"))
		if got, _ := v.Value(); string(got) != "1" {
			t.Fatalf("a = %q", got)
		}
		if got, _ := w.Value(); string(got) != "other" {
			t.Fatalf("states not separate: %q", got)
		}
		buf := []byte("2")
		v.Update(buf)
		buf[0] = 'x' // the backend keeps its own copy
		if got, _ := b.ValueState("v").Value(); string(got) != "2" {
			t.Fatalf("a = %q", got)
		}
		v.Clear()
		if _, ok := v.Value(); ok {
			t.Fatal("value after clear")
		}
		l := b.ListState("l", false)
		l.Add([]byte("x"))
		l.Add([]byte("y"))
		if got := fmt.Sprintf("%s", b.ListState("l", false).Get()); got != "[x y]" {
			t.Fatalf("list %s", got)
		}
		l.Update([][]byte{[]byte("z")})
		if got := fmt.Sprintf("%s", l.Get()); got != "[z]" {
			t.Fatalf("list %s", got)
		}
		l.Clear()
		if len(l.Get()) != 0 {
			t.Fatal("list after clear")
		}
	})
}

// concat is a reduce function that builds a new slice, as users should.
func concat(acc, v []byte) []byte { return append(append([]byte(nil), acc...), v...) }

// fill writes, for the keys 0..n-1 subtask owns, sum=k*10 (value state),
// a map state of k%4+1 entries, and a reducing state fed twice (every
// third key leaves the map empty and the reducing state unset); and one
// operator list entry. It returns what it wrote, as read renders it.
func fill(b Backend, n, parallelism, subtask int, round int) map[string]string {
	want := map[string]string{}
	v := b.ValueState("sum")
	m := b.MapState("m")
	r := b.ReducingState("r", concat)
	for k := 0; k < n; k++ {
		key := fmt.Sprint(k)
		if !owned(key, parallelism, subtask) {
			continue
		}
		b.SetCurrentKey([]byte(key))
		val := fmt.Sprint(k*10 + round)
		v.Update([]byte(val))
		want[key] = val
		if k%3 == 0 {
			continue
		}
		var entries []string
		for i := k%4 + 1; i > 0; i-- { // out of order: All sorts
			uk := fmt.Sprintf("u%d", i)
			m.Put([]byte(uk), []byte(fmt.Sprint(k*i)))
			entries = append([]string{uk + "=" + fmt.Sprint(k*i)}, entries...)
		}
		if k%5 == 0 {
			m.Put([]byte{}, []byte("empty user key"))
			entries = append([]string{"=empty user key"}, entries...)
		}
		want["m/"+key] = strings.Join(entries, ",")
		r.Add([]byte(key))
		r.Add([]byte("+"))
		want["r/"+key] = key + "+"
	}
	b.ListState("offsets", false).Update([][]byte{[]byte(fmt.Sprint("off", subtask))})
	b.ListState("all", true).Update([][]byte{[]byte(fmt.Sprint("u", subtask))})
	return want
}

func read(t *testing.T, b Backend, n, parallelism, subtask int, got map[string]string) {
	t.Helper()
	v := b.ValueState("sum")
	m := b.MapState("m")
	r := b.ReducingState("r", concat)
	for k := 0; k < n; k++ {
		key := fmt.Sprint(k)
		b.SetCurrentKey([]byte(key))
		val, ok := v.Value()
		var entries []string
		for uk, uv := range m.All() {
			entries = append(entries, string(uk)+"="+string(uv))
		}
		if m.IsEmpty() != (len(entries) == 0) {
			t.Fatalf("key %s: IsEmpty %v with %d entries", key, m.IsEmpty(), len(entries))
		}
		agg, rok := r.Get()
		if !ok && len(entries) == 0 && !rok {
			continue
		}
		if !owned(key, parallelism, subtask) {
			t.Fatalf("subtask %d/%d restored key %q it does not own", subtask, parallelism, key)
		}
		if ok {
			got[key] = string(val)
		}
		if len(entries) > 0 {
			got["m/"+key] = strings.Join(entries, ",")
		}
		if rok {
			got["r/"+key] = string(agg)
		}
	}
}

// snapshotAll takes a snapshot of each backend, then changes them, then
// writes the snapshots: later changes must not be in them.
func snapshotAll(t *testing.T, bs []Backend, dir string, opts SnapshotOptions) []*weirv1.SubtaskState {
	t.Helper()
	var snaps []StateSnapshot
	for _, b := range bs {
		s, err := b.TakeSnapshot(opts)
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, s)
		b.SetCurrentKey([]byte("late"))
		b.ValueState("sum").Update([]byte("x"))
		b.MapState("m").Put([]byte("late"), []byte("x"))
		b.SetCurrentKey([]byte("0"))
		b.ValueState("sum").Update([]byte("changed"))
		b.ReducingState("r", concat).Add([]byte("late"))
		for _, k := range []string{"1", "2"} {
			b.SetCurrentKey([]byte(k))
			b.MapState("m").Put([]byte("u1"), []byte("changed"))
			b.MapState("m").Remove([]byte("u2"))
			b.ReducingState("r", concat).Add([]byte("late"))
		}
		b.ListState("offsets", false).Add([]byte("late"))
	}
	var out []*weirv1.SubtaskState
	for i, s := range snaps {
		st, err := s.Write(dir, "sum", i, len(bs))
		if err != nil {
			t.Fatal(err)
		}
		if st.GetStateSize() <= 0 || st.GetCheckpointedSize() <= 0 || st.GetCheckpointedSize() > st.GetStateSize() {
			t.Fatalf("sizes: state %d checkpointed %d", st.GetStateSize(), st.GetCheckpointedSize())
		}
		out = append(out, st)
	}
	return out
}

func restoreAll(t *testing.T, k backendKind, prev []*weirv1.SubtaskState, shared string, parallelism, n int) (map[string]string, []string, []string) {
	t.Helper()
	got := map[string]string{}
	var offsets, unions []string
	for i := 0; i < parallelism; i++ {
		b := newBackend(t, k, shared, parallelism, i)
		if err := b.Restore(prev, i, parallelism); err != nil {
			t.Fatal(err)
		}
		read(t, b, n, parallelism, i, got)
		for _, it := range b.ListState("offsets", false).Get() {
			offsets = append(offsets, string(it))
		}
		u := b.ListState("all", true).Get()
		if len(u) != len(prev) {
			t.Fatalf("union state %s", u)
		}
		unions = append(unions, fmt.Sprintf("%s", u))
	}
	sort.Strings(offsets)
	return got, offsets, unions
}

func checkpointDir(t *testing.T) (dir, shared string) {
	root := t.TempDir()
	dir, shared = filepath.Join(root, "chk-1"), filepath.Join(root, "shared")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, shared
}

// Snapshots are isolated from later writes, and restore at the same, a
// higher and a lower parallelism gives each key to its owner.
func TestConformanceSnapshotRestoreRescale(t *testing.T) {
	const n = 200
	forEachBackend(t, func(t *testing.T, k backendKind) {
		for _, savepoint := range []bool{false, true} {
			for _, newP := range []int{2, 3, 1} {
				t.Run(fmt.Sprintf("savepoint=%v/2to%d", savepoint, newP), func(t *testing.T) {
					dir, shared := checkpointDir(t)
					want := map[string]string{}
					var bs []Backend
					for i := 0; i < 2; i++ {
						b := newBackend(t, k, shared, 2, i)
						for key, v := range fill(b, n, 2, i, 0) {
							want[key] = v
						}
						bs = append(bs, b)
					}
					prev := snapshotAll(t, bs, dir, SnapshotOptions{CheckpointID: 1, Canonical: savepoint})
					if savepoint || !k.incremental {
						for _, st := range prev {
							if len(st.GetSharedFiles()) > 0 || st.GetKeyedState() == nil {
								t.Fatalf("not canonical: %v", st)
							}
						}
					} else if len(prev[0].GetSharedFiles()) == 0 {
						t.Fatal("incremental snapshot has no files")
					}
					for _, st := range prev {
						for _, h := range []*weirv1.StateHandle{st.GetKeyedState(), st.GetOperatorState()} {
							if h != nil && (h.GetPath() == "") != (k.inline > 0) {
								t.Fatalf("inline threshold %d, handle %v", k.inline, h)
							}
						}
						// Later checkpoints reference these by path.
						for _, h := range st.GetSharedFiles() {
							if h.GetPath() == "" || len(h.GetInlineData()) > 0 {
								t.Fatalf("native file inlined: %v", h)
							}
						}
					}
					got, offsets, _ := restoreAll(t, k, prev, shared, newP, n)
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("restored %v\nwant %v", got, want)
					}
					if fmt.Sprint(offsets) != "[off0 off1]" {
						t.Fatalf("offsets %v", offsets)
					}
				})
			}
		}
	})
}

// A savepoint or checkpoint written by one backend restores into every
// other (heap to Pebble, Pebble to heap, native incremental to either), at
// the same and at another parallelism.
func TestConformanceRestoreAcrossBackends(t *testing.T) {
	const n = 150
	for _, from := range kinds {
		for _, to := range kinds {
			for _, savepoint := range []bool{true, false} {
				for _, newP := range []int{3, 2} {
					t.Run(fmt.Sprintf("%s->%s/savepoint=%v/3to%d", from.name, to.name, savepoint, newP), func(t *testing.T) {
						dir, shared := checkpointDir(t)
						want := map[string]string{}
						var bs []Backend
						for i := 0; i < 3; i++ {
							b := newBackend(t, from, shared, 3, i)
							for key, v := range fill(b, n, 3, i, 0) {
								want[key] = v
							}
							bs = append(bs, b)
						}
						prev := snapshotAll(t, bs, dir, SnapshotOptions{CheckpointID: 1, Canonical: savepoint})
						got, offsets, _ := restoreAll(t, to, prev, shared, newP, n)
						if fmt.Sprint(got) != fmt.Sprint(want) {
							t.Fatalf("restored %v\nwant %v", got, want)
						}
						if fmt.Sprint(offsets) != "[off0 off1 off2]" {
							t.Fatalf("offsets %v", offsets)
						}
					})
				}
			}
		}
	}
}

// Incremental checkpoints upload an SST once and reference it while a
// confirmed checkpoint still holds it.
func TestPebbleIncrementalReferencesConfirmedFiles(t *testing.T) {
	root := t.TempDir()
	shared := filepath.Join(root, "shared")
	k := kinds[2]
	b := newBackend(t, k, shared, 1, 0)
	p := b.(*Pebble)
	var states []*weirv1.SubtaskState
	for id := int64(1); id <= 4; id++ {
		// Enough data to flush SSTs: a new batch of keys each round.
		v := b.ValueState("sum")
		for i := 0; i < 5000; i++ {
			b.SetCurrentKey([]byte(fmt.Sprintf("k%d-%d", id, i)))
			v.Update([]byte(strings.Repeat("v", 100)))
		}
		p.writeBack()
		if err := p.db.Flush(); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, fmt.Sprintf("chk-%d", id))
		os.MkdirAll(dir, 0o755)
		s, err := b.TakeSnapshot(SnapshotOptions{CheckpointID: id})
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Write(dir, "sum", 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, st)
		b.NotifyCheckpointComplete(id)
		t.Logf("checkpoint %d: state %d checkpointed %d files %d", id, st.GetStateSize(), st.GetCheckpointedSize(), len(st.GetSharedFiles()))
	}
	last := states[len(states)-1]
	var full, incr int64
	for _, st := range states {
		full += st.GetStateSize()
		incr += st.GetCheckpointedSize()
	}
	if incr >= full {
		t.Fatalf("uploaded %d of %d bytes: not incremental", incr, full)
	}
	reused := 0
	for i := 1; i < len(states); i++ {
		before := map[string]bool{}
		for _, o := range states[i-1].GetSharedFiles() {
			before[o.GetPath()] = true
		}
		for _, h := range states[i].GetSharedFiles() {
			if h.GetShared() && before[h.GetPath()] {
				reused++
			}
		}
	}
	if reused == 0 {
		t.Fatal("no checkpoint references a file of the one before")
	}
	// The last checkpoint restores every key.
	r := newBackend(t, k, shared, 1, 0)
	if err := r.Restore([]*weirv1.SubtaskState{last}, 0, 1); err != nil {
		t.Fatal(err)
	}
	r.SetCurrentKey([]byte("k1-5"))
	if _, ok := r.ValueState("sum").Value(); !ok {
		t.Fatal("k1-5 lost")
	}
	r.SetCurrentKey([]byte("k4-4999"))
	if _, ok := r.ValueState("sum").Value(); !ok {
		t.Fatal("k4-19999 lost")
	}
}

// Ascend and Descend iterate a key's map entries from a user key on, in
// order or backwards, on every backend alike, seeing neither another
// key's entries nor writes made during the loop.
func TestConformanceMapSeek(t *testing.T) {
	type seeker interface {
		Ascend(from []byte) iter.Seq2[[]byte, []byte]
		Descend(below []byte) iter.Seq2[[]byte, []byte]
	}
	forEachBackend(t, func(t *testing.T, k backendKind) {
		b := newBackend(t, k, t.TempDir(), 1, 0)
		m := b.MapState("m")
		b.SetCurrentKey([]byte("other"))
		m.Put([]byte("b"), []byte("x"))
		b.SetCurrentKey([]byte("k"))
		for _, uk := range []string{"d", "b", "f", "bb"} {
			m.Put([]byte(uk), []byte(uk+"!"))
		}
		s, ok := m.(seeker)
		if !ok {
			t.Fatalf("%T has no Ascend and Descend", m)
		}
		list := func(seq iter.Seq2[[]byte, []byte]) string {
			var parts []string
			for k, v := range seq {
				parts = append(parts, string(k)+"="+string(v))
				m.Put([]byte("c"), []byte("new")) // not seen by this loop
			}
			m.Remove([]byte("c"))
			return strings.Join(parts, " ")
		}
		for _, c := range []struct {
			from      string
			backwards bool
			want      string
		}{
			{"", false, "b=b! bb=bb! d=d! f=f!"},
			{"bb", false, "bb=bb! d=d! f=f!"},
			{"c", false, "d=d! f=f!"},
			{"g", false, ""},
			{"d", true, "bb=bb! b=b!"},
			{"e", true, "d=d! bb=bb! b=b!"},
			{"b", true, ""},
			{"z", true, "f=f! d=d! bb=bb! b=b!"},
		} {
			seq := s.Ascend([]byte(c.from))
			if c.backwards {
				seq = s.Descend([]byte(c.from))
			}
			if got := list(seq); got != c.want {
				t.Errorf("from %q (backwards %v): %q, want %q", c.from, c.backwards, got, c.want)
			}
		}
	})
}

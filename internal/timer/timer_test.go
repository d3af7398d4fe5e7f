package timer

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/state"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

const testMaxP = 16

var all = keygroup.RangeFor(testMaxP, 1, 0)

func newBackend(t testing.TB, k backendKind) state.Backend {
	b, err := state.New(state.Config{
		Kind: k.kind, Incremental: k.incremental, MaxParallelism: testMaxP, KeyGroups: all,
		LocalDir: t.TempDir(), SharedDir: filepath.Join(t.TempDir(), "shared"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func compareTimers(a, b Timer) int {
	return cmp.Or(cmp.Compare(a.Domain, b.Domain), cmp.Compare(a.Timestamp, b.Timestamp),
		bytes.Compare(a.Key, b.Key), bytes.Compare(a.Namespace, b.Namespace))
}

// model is what the service must hold: the pending timers, by id.
type model map[string]Timer

func (m model) sorted() []Timer {
	var out []Timer
	for _, tm := range m {
		out = append(out, tm)
	}
	slices.SortFunc(out, compareTimers)
	return out
}

// Random registrations, deletions, pops and checkpoints, on every backend,
// against a model: every answer is the model's, and the invariants hold
// throughout.
func TestAgainstModel(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(k.name))))
			b := newBackend(t, k)
			s := New(b)
			m := model{}
			random := func() Timer {
				return Timer{
					Domain:    Domain(rng.IntN(2)),
					Timestamp: int64(rng.IntN(60) - 10),
					Key:       []byte(fmt.Sprint("k", rng.IntN(12))),
					Namespace: []byte(strings.Repeat("w", rng.IntN(3))),
				}
			}
			steps := 3000
			if testing.Short() {
				steps = 500
			}
			for step := 0; step < steps; step++ {
				switch op := rng.IntN(100); {
				case op < 50:
					tm := random()
					b.SetCurrentKey(tm.Key)
					id := string(appendID(nil, tm.Domain, tm.Key, tm.Namespace, tm.Timestamp))
					_, had := m[id]
					if got := s.Register(tm.Domain, tm.Key, tm.Namespace, tm.Timestamp); got == had {
						t.Fatalf("step %d: Register(%s) = %v with the timer pending: %v", step, render(tm), got, had)
					}
					m[id] = tm
				case op < 65:
					tm := random()
					b.SetCurrentKey(tm.Key)
					id := string(appendID(nil, tm.Domain, tm.Key, tm.Namespace, tm.Timestamp))
					_, had := m[id]
					if got := s.Delete(tm.Domain, tm.Key, tm.Namespace, tm.Timestamp); got != had {
						t.Fatalf("step %d: Delete(%s) = %v with the timer pending: %v", step, render(tm), got, had)
					}
					delete(m, id)
				case op < 99:
					d := Domain(rng.IntN(2))
					upTo := int64(rng.IntN(60) - 10)
					var want *Timer
					for _, tm := range m {
						if tm.Domain == d && (want == nil || compareTimers(tm, *want) < 0) {
							want = &tm
						}
					}
					if want != nil && want.Timestamp > upTo {
						want = nil
					}
					got, ok := s.Pop(d, upTo)
					if ok != (want != nil) || ok && compareTimers(got, *want) != 0 {
						t.Fatalf("step %d: Pop(%s, %d) = %s %v, want %v", step, d, upTo, render(got), ok, want)
					}
					if ok {
						delete(m, string(appendID(nil, d, got.Key, got.Namespace, got.Timestamp)))
					}
				default:
					// A checkpoint, restored into a new backend.
					dir := t.TempDir()
					snap, err := b.TakeSnapshot(state.SnapshotOptions{CheckpointID: int64(step + 1), Canonical: rng.IntN(2) == 0})
					if err != nil {
						t.Fatal(err)
					}
					st, err := snap.Write(dir, "timers", 0, 1)
					if err != nil {
						t.Fatal(err)
					}
					b.NotifyCheckpointComplete(int64(step + 1))
					b = newBackend(t, k)
					if err := b.Restore([]*weirv1.SubtaskState{st}, 0, 1); err != nil {
						t.Fatal(err)
					}
					s = New(b)
					if err := s.Restore(); err != nil {
						t.Fatal(err)
					}
				}
				if s.Len() != len(m) {
					t.Fatalf("step %d: Len %d, want %d", step, s.Len(), len(m))
				}
				if step%20 == 0 {
					if err := verify(b, s, all, testMaxP); err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					var got []string
					for _, tm := range pending(s) {
						got = append(got, render(tm))
					}
					var want []string
					for _, tm := range m.sorted() {
						want = append(want, render(tm))
					}
					if !slices.Equal(got, want) {
						t.Fatalf("step %d: pending %v\nwant %v", step, got, want)
					}
				}
			}
		})
	}
}

// Many timers fire in order, and a queue that emptied gives its memory
// back.
func TestManyTimers(t *testing.T) {
	b := state.NewHeap(testMaxP, all)
	s := New(b)
	const n = 20000
	rng := rand.New(rand.NewPCG(2, 2))
	for i := 0; i < n; i++ {
		key := []byte(fmt.Sprint(i))
		b.SetCurrentKey(key)
		if !s.Register(EventTime, key, nil, int64(rng.IntN(1000))) {
			t.Fatal("duplicate")
		}
	}
	// Deleting half of them really takes them out.
	for i := 0; i < n; i += 2 {
		key := []byte(fmt.Sprint(i))
		b.SetCurrentKey(key)
		for ts := int64(0); ts < 1000; ts++ {
			if s.Delete(EventTime, key, nil, ts) {
				break
			}
		}
	}
	if s.Len() != n/2 || len(s.queues[EventTime]) != n/2 {
		t.Fatalf("Len %d, queued %d after deleting half", s.Len(), len(s.queues[EventTime]))
	}
	if err := verify(b, s, all, testMaxP); err != nil {
		t.Fatal(err)
	}
	var prev Timer
	for i := 0; ; i++ {
		tm, ok := s.Pop(EventTime, 1<<62)
		if !ok {
			if i != n/2 {
				t.Fatalf("popped %d", i)
			}
			break
		}
		if i > 0 && compareTimers(prev, tm) >= 0 {
			t.Fatalf("%s after %s", render(tm), render(prev))
		}
		prev = tm
	}
	if c := cap(s.queues[EventTime]); c > 2048 {
		t.Fatalf("empty queue keeps a capacity of %d", c)
	}
	if s.peak > 1024 {
		t.Fatalf("the index was not rebuilt: peak %d", s.peak)
	}
	if s.Len() != 0 {
		t.Fatalf("Len %d", s.Len())
	}
}

// What Pop returns is the caller's; the timer's key stays current.
func TestPopReturnsOwnedSlices(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			b := newBackend(t, k)
			s := New(b)
			for _, key := range []string{"a", "b"} {
				b.SetCurrentKey([]byte(key))
				b.ValueState("v").Update([]byte(key))
				s.Register(ProcessingTime, []byte(key), []byte("ns"), 5)
				s.Register(ProcessingTime, []byte(key), []byte("ns"), 6)
			}
			b.SetCurrentKey([]byte("other"))
			tm, ok := s.Pop(ProcessingTime, 5)
			if !ok || string(tm.Key) != "a" || string(tm.Namespace) != "ns" || tm.Timestamp != 5 || tm.Domain != ProcessingTime {
				t.Fatalf("popped %+v %v", tm, ok)
			}
			if v, _ := b.ValueState("v").Value(); string(v) != "a" {
				t.Fatalf("current key's state %q after Pop", v)
			}
			// Appending to the key must not reach the namespace.
			tm.Key = append(tm.Key, 'x')
			if string(tm.Namespace) != "ns" {
				t.Fatalf("namespace %q", tm.Namespace)
			}
			tm.Key[0], tm.Namespace[0] = 'z', 'z'
			if err := verify(b, s, all, testMaxP); err != nil {
				t.Fatal(err)
			}
			var got []string
			for {
				tm, ok := s.Pop(ProcessingTime, 10)
				if !ok {
					break
				}
				got = append(got, render(tm))
			}
			if fmt.Sprint(got) != "[proc b:ns@5 proc a:ns@6 proc b:ns@6]" {
				t.Fatalf("popped %v", got)
			}
		})
	}
}

// Restore refuses state that is not a timer's, rather than firing garbage.
func TestRestoreRejectsForeignEntries(t *testing.T) {
	for _, uk := range [][]byte{{}, {0, 1, 2}, append([]byte{7}, make([]byte, 8)...)} {
		b := state.NewHeap(testMaxP, all)
		s := New(b)
		b.SetCurrentKey([]byte("k"))
		s.Register(EventTime, []byte("k"), nil, 1)
		b.MapState(StateName).Put(uk, nil)
		if err := s.Restore(); err == nil {
			t.Fatalf("user key %x restored", uk)
		}
		if s.Len() != 0 {
			t.Fatalf("Len %d after a failed restore", s.Len())
		}
	}
}

// The mirrored user keys sort in time order, whatever the sign.
func TestUserKeyOrder(t *testing.T) {
	ts := []int64{-1 << 63, -1000, -1, 0, 1, 1000, 1<<63 - 1}
	for i := 1; i < len(ts); i++ {
		a, b := appendUserKey(nil, EventTime, nil, ts[i-1]), appendUserKey(nil, EventTime, nil, ts[i])
		if bytes.Compare(a, b) >= 0 {
			t.Fatalf("%d encodes after %d", ts[i-1], ts[i])
		}
		d, got, ns, err := decodeUserKey(append(b, "ns"...))
		if err != nil || d != EventTime || got != ts[i] || string(ns) != "ns" {
			t.Fatalf("%d decodes as %v %d %q %v", ts[i], d, got, ns, err)
		}
	}
}

// A duplicate registration touches neither the backend nor the Go heap.
func TestRegisterDuplicateDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	b := &countingKeyed{Heap: state.NewHeap(testMaxP, all)}
	s := New(b)
	key, ns := []byte("some-key"), []byte("window-0-1000")
	b.SetCurrentKey(key)
	s.Register(EventTime, key, ns, 999)
	if b.calls < 2 {
		t.Fatalf("registering went by the backend %d times", b.calls)
	}
	b.calls = 0
	if n := testing.AllocsPerRun(1000, func() {
		if s.Register(EventTime, key, ns, 999) {
			t.Fatal("not a duplicate")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per duplicate registration", n)
	}
	if b.calls != 0 {
		t.Fatalf("%d backend calls for duplicates", b.calls)
	}
}

// countingKeyed counts the calls into the backend and its map state.
type countingKeyed struct {
	*state.Heap
	calls int
}

func (c *countingKeyed) SetCurrentKey(key []byte) { c.calls++; c.Heap.SetCurrentKey(key) }

func (c *countingKeyed) MapState(name string) sdk.MapState {
	c.calls++
	return &countingMap{MapState: c.Heap.MapState(name), calls: &c.calls}
}

type countingMap struct {
	sdk.MapState
	calls *int
}

func (m *countingMap) Get(uk []byte) ([]byte, bool) { *m.calls++; return m.MapState.Get(uk) }
func (m *countingMap) Put(uk, v []byte)             { *m.calls++; m.MapState.Put(uk, v) }
func (m *countingMap) Remove(uk []byte)             { *m.calls++; m.MapState.Remove(uk) }
func (m *countingMap) Contains(uk []byte) bool      { *m.calls++; return m.MapState.Contains(uk) }

func BenchmarkRegisterDuplicate(b *testing.B) {
	for _, k := range kinds[:2] {
		b.Run(k.name, func(b *testing.B) {
			be := newBackend(b, k)
			s := New(be)
			keys := make([][]byte, 1000)
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("user-%06d", i))
				be.SetCurrentKey(keys[i])
				s.Register(EventTime, keys[i], []byte("window-0-60000"), 59999)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				key := keys[i%len(keys)]
				if s.Register(EventTime, key, []byte("window-0-60000"), 59999) {
					b.Fatal("not a duplicate")
				}
			}
		})
	}
}

func BenchmarkRegisterPop(b *testing.B) {
	for _, k := range kinds[:2] {
		b.Run(k.name, func(b *testing.B) {
			be := newBackend(b, k)
			s := New(be)
			const pending = 10000
			keys := make([][]byte, pending)
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("user-%06d", i))
			}
			// A steady state: pending timers, one registered and the
			// earliest fired per iteration.
			ts := int64(0)
			for i := range keys {
				be.SetCurrentKey(keys[i])
				s.Register(EventTime, keys[i], []byte("window"), ts)
				ts++
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				key := keys[i%len(keys)]
				be.SetCurrentKey(key)
				s.Register(EventTime, key, []byte("window"), ts)
				ts++
				if _, ok := s.Pop(EventTime, ts); !ok {
					b.Fatal("nothing due")
				}
			}
		})
	}
}

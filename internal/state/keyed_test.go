package state

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

func TestConformanceMapState(t *testing.T) {
	forEachBackend(t, func(t *testing.T, k backendKind) {
		b := newBackend(t, k, t.TempDir(), 1, 0)
		m := b.MapState("m")
		all := func() string {
			var out []string
			for k, v := range m.All() {
				out = append(out, string(k)+"="+string(v))
			}
			return strings.Join(out, ",")
		}
		b.SetCurrentKey([]byte("a"))
		if !m.IsEmpty() || m.Contains([]byte("x")) || all() != "" {
			t.Fatal("new map not empty")
		}
		if _, ok := m.Get([]byte("x")); ok {
			t.Fatal("get on empty map")
		}
		buf := []byte("1")
		m.Put([]byte("y"), buf)
		buf[0] = '9' // the state keeps its own copy
		m.Put([]byte("x"), []byte("2"))
		m.Put([]byte("xy"), []byte{})
		m.Put([]byte{}, []byte("e"))
		if got := all(); got != "=e,x=2,xy=,y=1" {
			t.Fatalf("entries %q", got)
		}
		if v, ok := m.Get([]byte("xy")); !ok || len(v) != 0 {
			t.Fatalf("empty value: %q %v", v, ok)
		}
		// Record keys that extend one another keep separate maps.
		b.SetCurrentKey([]byte("ab"))
		if !m.IsEmpty() {
			t.Fatalf("key ab sees %q", all())
		}
		m.Put([]byte("z"), []byte("3"))
		// A value state of the same name is another state.
		b.ValueState("m").Update([]byte("value"))
		b.SetCurrentKey([]byte("a"))
		if got := all(); got != "=e,x=2,xy=,y=1" {
			t.Fatalf("entries after other keys %q", got)
		}
		if _, ok := b.ValueState("m").Value(); ok {
			t.Fatal("value state sees the map")
		}
		// The loop sees the entries as they were when it started.
		var seen []string
		for k, v := range m.All() {
			seen = append(seen, string(k))
			m.Remove(k)
			m.Put([]byte("zz"), v)
		}
		if fmt.Sprint(seen) != "[ x xy y]" {
			t.Fatalf("iterated %v", seen)
		}
		if got := all(); got != "zz=1" {
			t.Fatalf("after loop %q", got)
		}
		// Breaking out of the loop is fine.
		m.Put([]byte("a"), []byte("4"))
		for range m.All() {
			break
		}
		m.Remove([]byte("a"))
		m.Remove([]byte("absent"))
		if !m.Contains([]byte("zz")) || m.Contains([]byte("a")) {
			t.Fatal("contains")
		}
		m.Clear()
		if !m.IsEmpty() || all() != "" {
			t.Fatalf("after clear %q", all())
		}
		b.SetCurrentKey([]byte("ab"))
		if got := all(); got != "z=3" {
			t.Fatalf("clear reached another key: %q", got)
		}
	})
}

func TestConformanceReducingState(t *testing.T) {
	forEachBackend(t, func(t *testing.T, k backendKind) {
		b := newBackend(t, k, t.TempDir(), 1, 0)
		// A reduce function that changes acc in place, against the
		// advice: a snapshot taken before must not change.
		inPlace := func(acc, v []byte) []byte {
			for i := range acc {
				acc[i] += v[0]
			}
			return acc
		}
		r := b.ReducingState("r", inPlace)
		b.SetCurrentKey([]byte("a"))
		if _, ok := r.Get(); ok {
			t.Fatal("aggregate before add")
		}
		first := []byte{1, 1}
		r.Add(first)
		first[0] = 100 // kept as a copy
		r.Add([]byte{2})
		if got, _ := r.Get(); !bytes.Equal(got, []byte{3, 3}) {
			t.Fatalf("aggregate %v", got)
		}
		b.SetCurrentKey([]byte("b"))
		if _, ok := r.Get(); ok {
			t.Fatal("aggregate leaked across keys")
		}
		b.SetCurrentKey([]byte("a"))
		dir, shared := checkpointDir(t)
		snap, err := b.TakeSnapshot(SnapshotOptions{CheckpointID: 1, Canonical: true})
		if err != nil {
			t.Fatal(err)
		}
		r.Add([]byte{10})
		st, err := snap.Write(dir, "r", 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		r.Clear()
		if _, ok := r.Get(); ok {
			t.Fatal("aggregate after clear")
		}
		restored := newBackend(t, k, shared, 1, 0)
		if err := restored.Restore([]*weirv1.SubtaskState{st}, 0, 1); err != nil {
			t.Fatal(err)
		}
		restored.SetCurrentKey([]byte("a"))
		if got, _ := restored.ReducingState("r", inPlace).Get(); !bytes.Equal(got, []byte{3, 3}) {
			t.Fatalf("snapshot changed after it was taken: %v", got)
		}
	})
}

// Map-state store keys decode to what was encoded, whatever the bytes.
func TestPebbleKeyEncoding(t *testing.T) {
	for _, e := range []entry{
		{state: "v", key: []byte("k")},
		{state: "", key: []byte{}},
		{kind: weirv1.KeyedStateEntry_KIND_MAP, state: "m", key: []byte("k\x00\xff"), userKey: []byte("u")},
		{kind: weirv1.KeyedStateEntry_KIND_MAP, state: "m", key: []byte{}, userKey: []byte{}},
		{kind: weirv1.KeyedStateEntry_KIND_MAP, state: strings.Repeat("n", maxNameLen), key: []byte("k"), userKey: []byte("\xff\xff")},
	} {
		enc := encodeEntry(nil, 7, e)
		kg, got, ok := decodeKey(enc)
		if !ok || kg != 7 || got.kind != e.kind || got.state != e.state || !bytes.Equal(got.key, e.key) || !bytes.Equal(got.userKey, e.userKey) {
			t.Fatalf("%+v decoded as %d %+v %v", e, kg, got, ok)
		}
	}
	p := encodeMapPrefix(nil, 3, "m", []byte("\xff"))
	if end := prefixEnd(p); bytes.Compare(end, encodeMapKey(nil, 3, "m", []byte("\xff"), []byte("\xff\xff\xff"))) <= 0 {
		t.Fatalf("prefix end %x inside the prefix", end)
	}
}

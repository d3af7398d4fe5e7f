package state

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// ReadEntries reads back what every backend wrote, in the canonical
// format and as an incremental Pebble snapshot alike, with each entry's
// key group; ReadOperatorLists reads the lists.
func TestReadEntries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, k backendKind) {
		for _, canonical := range []bool{false, true} {
			dir, shared := checkpointDir(t)
			b := newBackend(t, k, shared, 1, 0)
			want := map[string]bool{}
			for i := range 20 {
				key := fmt.Sprint("k", i)
				b.SetCurrentKey([]byte(key))
				b.ValueState("v").Update([]byte(fmt.Sprint("value-", i)))
				want[fmt.Sprintf("v value %s  value-%d", key, i)] = true
				if i%2 == 0 {
					b.MapState("m").Put([]byte("u"), []byte{0xff, byte(i)})
					want[fmt.Sprintf("m map %s u %x", key, []byte{0xff, byte(i)})] = true
				}
			}
			b.ListState("offsets", false).Add([]byte("o1"))
			b.ListState("all", true).Add([]byte("a1"))
			s, err := b.TakeSnapshot(SnapshotOptions{CheckpointID: 1, Canonical: canonical})
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.Write(dir, "sum", 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			err = ReadEntries(st, confMaxP, t.TempDir(), func(e Entry) error {
				kind, v := "value", string(e.Value)
				if e.Map {
					kind, v = "map", fmt.Sprintf("%x", e.Value)
				}
				got[fmt.Sprintf("%s %s %s %s %s", e.State, kind, e.Key, e.UserKey, v)] = true
				if kg := keygroup.Of(e.Key, confMaxP); e.KeyGroup != kg {
					t.Errorf("%s: key group %d, want %d", e.Key, e.KeyGroup, kg)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("canonical %v: read\n%v\nwant\n%v", canonical, got, want)
			}
			lists, err := ReadOperatorLists(st)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, l := range lists {
				names = append(names, fmt.Sprintf("%s %v %q", l.GetName(), l.GetUnion(), l.GetItems()))
			}
			if !slices.Equal(names, []string{`all true ["a1"]`, `offsets false ["o1"]`}) {
				t.Errorf("lists %v", names)
			}
		}
	})
	if err := ReadEntries(&weirv1.SubtaskState{KeyedState: &weirv1.StateHandle{InlineData: []byte("not a snapshot")}}, confMaxP, t.TempDir(), func(Entry) error { return nil }); err == nil {
		t.Error("garbage read as keyed state")
	}
}

// ReadKey finds exactly what ReadEntries has for one key, in both formats,
// of every backend, and leaves a local native snapshot's files as they
// were.
func TestReadKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, k backendKind) {
		for _, canonical := range []bool{false, true} {
			dir, shared := checkpointDir(t)
			b := newBackend(t, k, shared, 1, 0)
			for i := range 50 {
				b.SetCurrentKey([]byte(fmt.Sprint("k", i)))
				b.ValueState("v").Update([]byte(fmt.Sprint("value-", i)))
				b.ValueState("w").Update([]byte("other state"))
				if i%2 == 0 {
					b.MapState("v").Put([]byte("u1"), []byte{byte(i)})
					b.MapState("v").Put([]byte("u2"), []byte{})
				}
			}
			s, err := b.TakeSnapshot(SnapshotOptions{CheckpointID: 1, Canonical: canonical})
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.Write(dir, "sum", 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			b.NotifyCheckpointComplete(1)
			for _, key := range []string{"k4", "k7", "absent"} {
				var all, one []string
				show := func(out *[]string) func(e Entry) error {
					return func(e Entry) error {
						if e.State == "v" && string(e.Key) == key {
							*out = append(*out, fmt.Sprintf("%v %q %x %d", e.Map, e.UserKey, e.Value, e.KeyGroup))
						}
						return nil
					}
				}
				if err := ReadEntries(st, confMaxP, t.TempDir(), show(&all)); err != nil {
					t.Fatal(err)
				}
				if err := ReadKey(st, confMaxP, t.TempDir(), "v", []byte(key), show(&one)); err != nil {
					t.Fatal(err)
				}
				slices.Sort(all)
				slices.Sort(one)
				if !slices.Equal(all, one) || (key != "absent" && len(one) == 0) {
					t.Fatalf("canonical %v, key %s: ReadKey found %v, ReadEntries %v", canonical, key, one, all)
				}
			}
		}
	})
}

// BenchmarkReadKey reads one key of a native Pebble snapshot of
// WEIR_READKEY_MB megabytes (64 by default; the size `weir state get` is
// measured at is 1024) from a local checkpoint.
func BenchmarkReadKey(b *testing.B) {
	mb := 64
	if v := os.Getenv("WEIR_READKEY_MB"); v != "" {
		fmt.Sscan(v, &mb)
	}
	root := b.TempDir()
	dir, shared := filepath.Join(root, "chk-1"), filepath.Join(root, "shared")
	os.MkdirAll(dir, 0o755)
	be, err := New(Config{Kind: weirv1.StateBackendConfig_BACKEND_PEBBLE, Incremental: true, MaxParallelism: 128,
		KeyGroups: keygroup.Range{Start: 0, End: 127}, LocalDir: root, SharedDir: shared})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	// Random values: Pebble compresses its blocks, and state of zeros
	// would be no size on disk.
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 1000)
	v := be.ValueState("v")
	n := mb << 10 // entries of about 1 KiB
	for i := range n {
		be.SetCurrentKey(fmt.Appendf(nil, "key-%09d", i))
		for j := 0; j < len(value); j += 8 {
			binary.LittleEndian.PutUint64(value[j:], rng.Uint64())
		}
		v.Update(value)
	}
	s, err := be.TakeSnapshot(SnapshotOptions{CheckpointID: 1})
	if err != nil {
		b.Fatal(err)
	}
	st, err := s.Write(dir, "v", 0, 1)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		key := fmt.Appendf(nil, "key-%09d", (i*7919)%n)
		found := false
		err := ReadKey(st, 128, root, "v", key, func(Entry) error { found = true; return nil })
		if err != nil || !found {
			b.Fatalf("key %s: %v, found %v", key, err, found)
		}
	}
	b.ReportMetric(float64(st.GetStateSize())/(1<<20), "state-MB")
}

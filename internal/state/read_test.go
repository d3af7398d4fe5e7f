package state

import (
	"fmt"
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

package state

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
)

// scanned renders ScanMap("m") as fill and read do: "m/<key>" → the
// entries sorted by user key. It checks every key is owned by the subtask
// and that no entry comes twice.
func scanned(t *testing.T, b Backend, name string, parallelism, subtask int, into map[string]string) {
	t.Helper()
	byKey := map[string][]string{}
	seen := map[string]bool{}
	err := b.ScanMap(name, func(key, userKey, value []byte) error {
		if !owned(string(key), parallelism, subtask) {
			t.Fatalf("subtask %d/%d scanned key %q it does not own", subtask, parallelism, key)
		}
		id := fmt.Sprintf("%q/%q", key, userKey)
		if seen[id] {
			t.Fatalf("entry %s scanned twice", id)
		}
		seen[id] = true
		byKey[string(key)] = append(byKey[string(key)], string(userKey)+"="+string(value))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, entries := range byKey {
		sort.Strings(entries)
		if _, dup := into["m/"+k]; dup {
			t.Fatalf("key %q scanned by two subtasks", k)
		}
		into["m/"+k] = strings.Join(entries, ",")
	}
}

// mapsOf keeps the map-state entries of what fill returned.
func mapsOf(want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if strings.HasPrefix(k, "m/") {
			out[k] = v
		}
	}
	return out
}

// ScanMap finds exactly the entries of the named map state: not those of a
// value state of the same name, of a map whose name extends it, nor of the
// key groups of other subtasks. Its slices are the caller's; an error of
// the callback stops it.
func TestConformanceScanMap(t *testing.T) {
	const n = 120
	forEachBackend(t, func(t *testing.T, k backendKind) {
		b := newBackend(t, k, t.TempDir(), 2, 1)
		want := mapsOf(fill(b, n, 2, 1, 0))
		// Neighbours in the store's key order that must not be scanned.
		for _, key := range []string{"1", "2", "4", "x"} {
			b.SetCurrentKey([]byte(key))
			b.MapState("mm").Put([]byte("u1"), []byte("other map"))
			b.MapState("").Put([]byte("u1"), []byte("unnamed map"))
			b.ValueState("m").Update([]byte("value state"))
		}
		b.SetCurrentKey([]byte("4"))
		got := map[string]string{}
		scanned(t, b, "m", 2, 1, got)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("scanned %v\nwant %v", got, want)
		}
		if len(got) == 0 {
			t.Fatal("nothing to scan")
		}
		// The current key is left alone.
		if v, _ := b.ValueState("m").Value(); string(v) != "value state" {
			t.Fatalf("current key moved: %q", v)
		}
		if err := b.ScanMap("absent", func(key, _, _ []byte) error {
			return fmt.Errorf("absent state has key %q", key)
		}); err != nil {
			t.Fatal(err)
		}
		// The slices are the caller's to keep and change.
		var kept [][]byte
		if err := b.ScanMap("m", func(key, userKey, value []byte) error {
			kept = append(kept, key, userKey, value)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for _, s := range kept {
			for i := range s {
				s[i] = '!'
			}
		}
		again := map[string]string{}
		scanned(t, b, "m", 2, 1, again)
		if fmt.Sprint(again) != fmt.Sprint(want) {
			t.Fatalf("changing the scanned slices changed the state: %v", again)
		}
		// The callback reads state while it scans.
		if err := b.ScanMap("m", func(key, userKey, value []byte) error {
			b.SetCurrentKey(key)
			if v, ok := b.MapState("m").Get(userKey); !ok || string(v) != string(value) {
				return fmt.Errorf("key %q: %q is %q %v, scanned %q", key, userKey, v, ok, value)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		stop := errors.New("stop")
		calls := 0
		err := b.ScanMap("m", func(_, _, _ []byte) error { calls++; return stop })
		if err != stop || calls != 1 {
			t.Fatalf("callback error: %v after %d calls", err, calls)
		}
	})
}

// After a restore at another parallelism, each subtask scans exactly the
// entries of the key groups it owns: together, every entry the snapshot
// holds, once, and nothing written after it.
func TestConformanceScanMapAfterRescale(t *testing.T) {
	const n = 200
	forEachBackend(t, func(t *testing.T, k backendKind) {
		for _, tc := range []struct{ from, to int }{{2, 3}, {3, 2}, {2, 1}, {1, 3}} {
			for _, savepoint := range []bool{false, true} {
				t.Run(fmt.Sprintf("savepoint=%v/%dto%d", savepoint, tc.from, tc.to), func(t *testing.T) {
					dir, shared := checkpointDir(t)
					want := map[string]string{}
					var bs []Backend
					for i := 0; i < tc.from; i++ {
						b := newBackend(t, k, shared, tc.from, i)
						for key, v := range mapsOf(fill(b, n, tc.from, i, 0)) {
							want[key] = v
						}
						bs = append(bs, b)
					}
					prev := snapshotAll(t, bs, dir, SnapshotOptions{CheckpointID: 1, Canonical: savepoint})
					got := map[string]string{}
					for i := 0; i < tc.to; i++ {
						b := newBackend(t, k, shared, tc.to, i)
						if err := b.Restore(prev, i, tc.to); err != nil {
							t.Fatal(err)
						}
						mine := map[string]string{}
						scanned(t, b, "m", tc.to, i, mine)
						// What the subtask scans is what it reads key by key.
						read := map[string]string{}
						for key := range mine {
							b.SetCurrentKey([]byte(strings.TrimPrefix(key, "m/")))
							var entries []string
							for uk, v := range b.MapState("m").All() {
								entries = append(entries, string(uk)+"="+string(v))
							}
							read[key] = strings.Join(entries, ",")
						}
						if fmt.Sprint(read) != fmt.Sprint(mine) {
							t.Fatalf("subtask %d scanned %v\nreads %v", i, mine, read)
						}
						r := keygroup.RangeFor(confMaxP, tc.to, i)
						for key := range mine {
							if kg := keygroup.Of([]byte(strings.TrimPrefix(key, "m/")), confMaxP); !r.Contains(kg) {
								t.Fatalf("subtask %d owns %v, scanned %s of key group %d", i, r, key, kg)
							}
							if _, dup := got[key]; dup {
								t.Fatalf("%s scanned by two subtasks", key)
							}
							got[key] = mine[key]
						}
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("scanned %v\nwant %v", got, want)
					}
				})
			}
		}
	})
}

// The scan stays within the backend's key groups, whatever else its store
// holds.
func TestScanMapStaysInOwnKeyGroups(t *testing.T) {
	forEachBackend(t, func(t *testing.T, k backendKind) {
		b := newBackend(t, k, t.TempDir(), 1, 0)
		want := mapsOf(fill(b, 100, 1, 0, 0))
		got := map[string]string{}
		scanned(t, b, "m", 1, 0, got)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("scanned %v\nwant %v", got, want)
		}
		// The same store, seen as subtask 0 of 2.
		var half Backend
		switch be := b.(type) {
		case *Heap:
			be.keyGroups = keygroup.RangeFor(confMaxP, 2, 0)
			half = be
		case *Pebble:
			be.cfg.KeyGroups = keygroup.RangeFor(confMaxP, 2, 0)
			half = be
		}
		mine := map[string]string{}
		scanned(t, half, "m", 2, 0, mine)
		for key, v := range want {
			if owned(strings.TrimPrefix(key, "m/"), 2, 0) != (mine[key] == v) {
				t.Fatalf("%s: scanned %q, want %q", key, mine[key], v)
			}
		}
	})
}

// A store holding a few keys among many key groups: the scan skips the
// empty ones, up to the last key group there is.
func TestScanMapSparse(t *testing.T) {
	const maxP = 1 << 15
	forEachBackend(t, func(t *testing.T, k backendKind) {
		b, err := New(Config{
			Kind: k.kind, Incremental: k.incremental, MaxParallelism: maxP,
			KeyGroups: keygroup.RangeFor(maxP, 1, 0), LocalDir: t.TempDir(), SharedDir: t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		want := map[string]bool{}
		for _, key := range []string{"a", "zz", "", "last"} {
			b.SetCurrentKey([]byte(key))
			b.MapState("m").Put([]byte("u"), []byte(key))
			b.ValueState("m").Update([]byte("v"))
			want[fmt.Sprintf("%q/u=%s (%d)", key, key, keygroup.Of([]byte(key), maxP))] = true
		}
		got := map[string]bool{}
		if err := b.ScanMap("m", func(key, userKey, value []byte) error {
			got[fmt.Sprintf("%q/%s=%s (%d)", key, userKey, value, keygroup.Of(key, maxP))] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("scanned %v\nwant %v", got, want)
		}
	})
}

package state

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestPebbleCacheRandomized drives the heap backend and Pebble backends
// with caches of several sizes (none, one that evicts at every write, a
// small one and the default) through the same random value and map
// operations, iterations with writes inside them, map clears, scans, and
// snapshots restored into fresh backends, and fails on the first read
// that differs from the heap's. A failing seed replays exactly.
func TestPebbleCacheRandomized(t *testing.T) {
	caches := []int{-1, 1, 2 << 10, 0}
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			root := t.TempDir()
			shared := filepath.Join(root, "shared")
			open := func(kind weirv1.StateBackendConfig_Backend, cache int, incremental bool) Backend {
				b, err := New(Config{
					Kind: kind, Incremental: incremental, MaxParallelism: confMaxP,
					KeyGroups: keygroup.RangeFor(confMaxP, 1, 0), LocalDir: t.TempDir(),
					SharedDir: shared, CacheBytes: cache,
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.Close() })
				return b
			}
			incremental := seed%2 == 1
			heap := open(weirv1.StateBackendConfig_BACKEND_HEAP, 0, false)
			var pebbles []Backend
			for _, c := range caches {
				pebbles = append(pebbles, open(weirv1.StateBackendConfig_BACKEND_PEBBLE, c, incremental))
			}
			var log []string
			check := func(what string, want, got any, i int) {
				t.Helper()
				if fmt.Sprint(want) != fmt.Sprint(got) {
					t.Fatalf("seed %d, cache %d: %s: heap %v, pebble %v\nafter %s", seed, caches[i], what, want, got, strings.Join(log, "\n"))
				}
			}
			all := func(b Backend) []Backend { return append([]Backend{b}, pebbles...) }
			checkpoint := int64(0)
			for step := 0; step < 250; step++ {
				key := []byte(fmt.Sprint("k", rng.IntN(12)))
				uk := []byte(fmt.Sprint("u", rng.IntN(5)))
				val := []byte(strings.Repeat(fmt.Sprint(step), 1+rng.IntN(40)))
				op := rng.IntN(100)
				log = append(log, fmt.Sprintf("%d: op %d key %s uk %s", step, op, key, uk))
				for _, b := range all(heap) {
					b.SetCurrentKey(key)
				}
				switch {
				case op < 20:
					for _, b := range all(heap) {
						b.ValueState("v").Update(val)
					}
				case op < 30:
					for _, b := range all(heap) {
						b.ValueState("v").Clear()
					}
				case op < 45:
					want, wok := heap.ValueState("v").Value()
					for i, b := range pebbles {
						got, ok := b.ValueState("v").Value()
						check("value", fmt.Sprint(wok, string(want)), fmt.Sprint(ok, string(got)), i)
					}
				case op < 60:
					for _, b := range all(heap) {
						b.MapState("m").Put(uk, val)
					}
				case op < 67:
					for _, b := range all(heap) {
						b.MapState("m").Remove(uk)
					}
				case op < 72:
					for _, b := range all(heap) {
						b.MapState("m").Clear()
					}
				case op < 80:
					want, wok := heap.MapState("m").Get(uk)
					for i, b := range pebbles {
						got, ok := b.MapState("m").Get(uk)
						check("map get", fmt.Sprint(wok, string(want)), fmt.Sprint(ok, string(got)), i)
					}
				case op < 88:
					// An iteration that writes inside the loop sees the
					// map as it was when it began.
					iterate := func(b Backend) string {
						var sb strings.Builder
						m := b.MapState("m")
						for k, v := range m.All() {
							fmt.Fprintf(&sb, "%s=%s ", k, v)
							m.Put(append(bytes.Clone(k), 'x'), v)
						}
						return fmt.Sprint(sb.String(), m.IsEmpty())
					}
					want := iterate(heap)
					for i, b := range pebbles {
						check("iteration", want, iterate(b), i)
					}
				case op < 92:
					scan := func(b Backend) string {
						var sb strings.Builder
						if err := b.ScanMap("m", func(k, uk, v []byte) error {
							fmt.Fprintf(&sb, "%s/%s=%s ", k, uk, v)
							return nil
						}); err != nil {
							t.Fatal(err)
						}
						return sb.String()
					}
					want := sortedFields(scan(heap))
					for i, b := range pebbles {
						check("scan", want, sortedFields(scan(b)), i)
					}
				default:
					// A checkpoint, restored into fresh backends that go
					// on in place of the old ones.
					checkpoint++
					savepoint := rng.IntN(3) == 0
					restore := func(b Backend, kind weirv1.StateBackendConfig_Backend, cache int, name string) Backend {
						dir := filepath.Join(root, fmt.Sprintf("chk-%d-%s", checkpoint, name))
						if err := os.MkdirAll(dir, 0o755); err != nil {
							t.Fatal(err)
						}
						s, err := b.TakeSnapshot(SnapshotOptions{CheckpointID: checkpoint, Canonical: savepoint})
						if err != nil {
							t.Fatal(err)
						}
						// Written after the snapshot: not in it.
						b.ValueState("v").Update([]byte("after the snapshot"))
						st, err := s.Write(dir, "v", 0, 1)
						if err != nil {
							t.Fatal(err)
						}
						s.Release()
						r := open(kind, cache, incremental && kind == weirv1.StateBackendConfig_BACKEND_PEBBLE)
						if err := r.Restore([]*weirv1.SubtaskState{st}, 0, 1); err != nil {
							t.Fatal(err)
						}
						return r
					}
					heap = restore(heap, weirv1.StateBackendConfig_BACKEND_HEAP, 0, "heap")
					for i, b := range pebbles {
						pebbles[i] = restore(b, weirv1.StateBackendConfig_BACKEND_PEBBLE, caches[i], fmt.Sprint("pebble", i))
					}
				}
			}
		})
	}
}

func sortedFields(s string) string {
	f := strings.Fields(s)
	slices.Sort(f)
	return strings.Join(f, " ")
}

// A key the cache does not hold may be in the store: a write to it and a
// delete before the next write-back must still delete it there.
func TestPebbleCacheBlindWriteThenDelete(t *testing.T) {
	p, err := OpenPebble(Config{
		Kind: weirv1.StateBackendConfig_BACKEND_PEBBLE, MaxParallelism: confMaxP,
		KeyGroups: keygroup.RangeFor(confMaxP, 1, 0), LocalDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	v := p.ValueState("v")
	p.SetCurrentKey([]byte("k"))
	v.Update([]byte("stored"))
	p.dropCache() // written back and forgotten
	v.Update([]byte("blind"))
	v.Clear()
	p.dropCache()
	if got, ok := v.Value(); ok {
		t.Fatalf("deleted key reads %q", got)
	}
	// A key read absent, written and deleted never reaches the store.
	p.SetCurrentKey([]byte("new"))
	if _, ok := v.Value(); ok {
		t.Fatal("new key has a value")
	}
	v.Update([]byte("x"))
	v.Clear()
	n := 0
	for _, e := range p.cache.m {
		if e.dirty {
			n++
		}
	}
	if n != 0 {
		t.Fatalf("%d dirty entries for a key the store never held", n)
	}
	// Written and deleted again and again, it is queued for write-back
	// once at most.
	for range 100 {
		v.Update([]byte("x"))
		v.Clear()
	}
	if n := len(p.cache.dirty); n > 1 {
		t.Fatalf("%d keys queued for write-back, want at most 1", n)
	}
}

// BenchmarkPebbleReadModifyWrite is a window operator's access pattern:
// read, change and write an accumulator per record, over 20,000 keys,
// with and without the write-back cache.
func BenchmarkPebbleReadModifyWrite(b *testing.B) {
	for _, cache := range []int{-1, 0} {
		b.Run(fmt.Sprintf("cache=%d", cache), func(b *testing.B) {
			p, err := OpenPebble(Config{
				Kind: weirv1.StateBackendConfig_BACKEND_PEBBLE, MaxParallelism: confMaxP,
				KeyGroups: keygroup.RangeFor(confMaxP, 1, 0), LocalDir: b.TempDir(), CacheBytes: cache,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			keys := make([][]byte, 20000)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "auction-%d", i)
			}
			v := p.ValueState("acc")
			rng := rand.New(rand.NewPCG(1, 2))
			b.ResetTimer()
			for i := range b.N {
				p.SetCurrentKey(keys[rng.IntN(len(keys))])
				acc, _ := v.Value()
				acc = append(acc[:0], byte(i), byte(i>>8), byte(i>>16), byte(i>>24))
				v.Update(acc)
			}
		})
	}
}

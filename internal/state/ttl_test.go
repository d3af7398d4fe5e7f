package state

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

const t0 = int64(1_700_000_000_000)

var (
	ttl1s    = sdk.StateTTL{TTL: time.Second}
	ttl1sR   = sdk.StateTTL{TTL: time.Second, RefreshOnRead: true}
	ttl1sGap = int64(1000 / 16) // the bucket width of a 1 s TTL
)

// sweep advances b's clock to now and sweeps until nothing is due.
func sweep(t *testing.T, b Backend, now int64) {
	t.Helper()
	for i := 0; ; i++ {
		next := b.AdvanceTime(now)
		if next == 0 || next > now {
			return
		}
		if i > 10_000 {
			t.Fatalf("the sweep at %d never ends (next %d)", now, next)
		}
	}
}

// stored counts what the backend holds, expired or not: keyed entries (of
// the heap's maps, or Pebble keys other than its index markers) and the
// Pebble index entries.
func stored(t *testing.T, b Backend) (entries, index int) {
	t.Helper()
	switch b := b.(type) {
	case *Heap:
		for _, m := range b.values {
			entries += len(m)
		}
		for _, m := range b.maps {
			for _, c := range m {
				entries += len(c.m)
			}
		}
		for _, bk := range b.ttl.buckets {
			index += len(bk)
		}
	case *Pebble:
		b.writeBack()
		it, err := b.db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		for it.First(); it.Valid(); it.Next() {
			k := it.Key()
			if bytes.Contains(k, []byte(ttlIndexPrefix)) {
				if !isMarker(k) {
					index++
				}
				continue
			}
			entries++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return entries, index
}

// isMarker: an index name with no deadline after it.
func isMarker(k []byte) bool {
	n := int(k[2])<<8 | int(k[3])
	return len(k) == 4+n
}

func TestTTLNeverReturnsExpired(t *testing.T) {
	forEachBackend(t, func(t *testing.T, k backendKind) {
		b := newBackend(t, k, t.TempDir(), 1, 0)
		b.AdvanceTime(t0)
		v, m := b.ValueStateTTL("v", ttl1s), b.MapStateTTL("m", ttl1s)
		r := b.ValueStateTTL("r", ttl1sR)
		b.SetCurrentKey([]byte("k"))
		v.Update([]byte("value"))
		r.Update([]byte("read"))
		m.Put([]byte("a"), []byte("1"))
		m.Put([]byte("b"), []byte("2"))

		b.AdvanceTime(t0 + 500)
		b.SetCurrentKey([]byte("k"))
		m.Put([]byte("b"), []byte("3")) // b's TTL restarts
		if got, ok := r.Value(); !ok || string(got) != "read" {
			t.Fatalf("r at 500 ms = %q, %v", got, ok)
		}
		b.AdvanceTime(t0 + 999)
		b.SetCurrentKey([]byte("k"))
		if got, ok := v.Value(); !ok || string(got) != "value" {
			t.Fatalf("v at 999 ms = %q, %v", got, ok)
		}
		b.AdvanceTime(t0 + 1000)
		b.SetCurrentKey([]byte("k"))
		if got, ok := v.Value(); ok {
			t.Fatalf("v expired at 1000 ms, read %q", got)
		}
		if _, ok := m.Get([]byte("a")); ok || m.Contains([]byte("a")) {
			t.Fatal("m[a] expired at 1000 ms, read")
		}
		if got, ok := r.Value(); !ok || string(got) != "read" {
			t.Fatalf("r, read at 500 ms, at 1000 ms = %q, %v", got, ok)
		}
		var seen []string
		for uk, val := range m.All() {
			seen = append(seen, string(uk)+"="+string(val))
		}
		if strings.Join(seen, ",") != "b=3" || m.IsEmpty() {
			t.Fatalf("m at 1000 ms iterates %v", seen)
		}
		b.AdvanceTime(t0 + 1500)
		b.SetCurrentKey([]byte("k"))
		if !m.IsEmpty() {
			t.Fatal("m not empty at 1500 ms")
		}
		// r was read at 1000 ms: it lives until 2000 ms.
		b.AdvanceTime(t0 + 1999)
		if _, ok := r.Value(); !ok {
			t.Fatal("r, read at 1000 ms, gone at 1999 ms")
		}
		b.AdvanceTime(t0 + 2999)
		if _, ok := r.Value(); ok {
			t.Fatal("r, last read at 1999 ms, alive at 2999 ms")
		}
	})
}

// The sweep deletes what expired, and only that: an entry written again
// since it was filed under an earlier bucket stays. Nothing is left, the
// Pebble index included, once every entry expired.
func TestTTLSweepFreesSpace(t *testing.T) {
	const n = 3*ttlSweepBatch + 17 // more than one sweep's batch at once
	forEachBackend(t, func(t *testing.T, k backendKind) {
		b := newBackend(t, k, t.TempDir(), 1, 0)
		b.AdvanceTime(t0)
		v, m := b.ValueStateTTL("v", ttl1s), b.MapStateTTL("m", ttl1s)
		for i := range n {
			b.SetCurrentKey(fmt.Appendf(nil, "k%d", i))
			v.Update([]byte("x"))
			m.Put([]byte("u"), []byte("y"))
		}
		b.AdvanceTime(t0 + 600)
		for i := range 10 {
			b.SetCurrentKey(fmt.Appendf(nil, "k%d", i))
			v.Update([]byte("again"))
		}
		if e, _ := stored(t, b); e != 2*n {
			t.Fatalf("%d entries stored before expiry, want %d", e, 2*n)
		}
		// One call sweeps one batch, and says more is due.
		if next := b.AdvanceTime(t0 + 1000 + ttl1sGap); next == 0 || next > t0+1000+ttl1sGap {
			t.Fatalf("after one batch, next sweep at %d, want now", next)
		}
		sweep(t, b, t0+1000+ttl1sGap)
		if e, _ := stored(t, b); e != 10 {
			t.Fatalf("%d entries stored after the first expiry, want the 10 written again", e)
		}
		for i := range 10 {
			b.SetCurrentKey(fmt.Appendf(nil, "k%d", i))
			if got, ok := v.Value(); !ok || string(got) != "again" {
				t.Fatalf("k%d = %q, %v", i, got, ok)
			}
		}
		next := b.AdvanceTime(t0 + 1000 + ttl1sGap)
		if next <= t0+1600 || next > t0+1600+ttl1sGap {
			t.Fatalf("next sweep at %d, want the bucket of %d", next-t0, 1600)
		}
		sweep(t, b, next)
		if e, ix := stored(t, b); e != 0 || ix != 0 {
			t.Fatalf("after every entry expired: %d entries, %d index entries", e, ix)
		}
		if next := b.AdvanceTime(next + 1); next != 0 {
			t.Fatalf("nothing left to sweep, next at %d", next)
		}
	})
}

// A snapshot taken after entries expired leaves them out (the heap's,
// before the sweep reached them; Pebble's once swept); a restore, at
// another parallelism and from either format, keeps every entry's expiry
// and rebuilds what the sweep needs.
func TestTTLSnapshotRestore(t *testing.T) {
	const n = 300
	forEachBackend(t, func(t *testing.T, k backendKind) {
		for _, savepoint := range []bool{false, true} {
			t.Run(fmt.Sprintf("savepoint=%v", savepoint), func(t *testing.T) {
				dir, shared := checkpointDir(t)
				var bs []Backend
				for i := range 2 {
					b := newBackend(t, k, shared, 2, i)
					b.AdvanceTime(t0)
					v, m := b.ValueStateTTL("v", ttl1s), b.MapStateTTL("m", ttl1s)
					// write writes every step-th key this subtask owns.
					write := func(step int) {
						for j := 0; j < n; j += step {
							key := fmt.Sprintf("k%d", j)
							if !owned(key, 2, i) {
								continue
							}
							b.SetCurrentKey([]byte(key))
							v.Update([]byte(key))
							m.Put([]byte("u"), []byte(key))
						}
					}
					write(1)
					b.AdvanceTime(t0 + 500)
					write(2) // the even keys live until 1500 ms
					b.AdvanceTime(t0 + 1200)
					bs = append(bs, b)
				}
				var prev []*weirv1.SubtaskState
				for i, b := range bs {
					s, err := b.TakeSnapshot(SnapshotOptions{CheckpointID: 1, Canonical: savepoint})
					if err != nil {
						t.Fatal(err)
					}
					st, err := s.Write(dir, "v", i, 2)
					if err != nil {
						t.Fatal(err)
					}
					prev = append(prev, st)
				}
				for _, p := range []int{1, 2, 3} {
					live := 0
					for i := range p {
						b := newBackend(t, k, shared, p, i)
						if err := b.Restore(prev, i, p); err != nil {
							t.Fatal(err)
						}
						b.AdvanceTime(t0 + 1200)
						v, m := b.ValueStateTTL("v", ttl1s), b.MapStateTTL("m", ttl1s)
						sweep(t, b, t0+1200)
						for j := range n {
							key := fmt.Sprintf("k%d", j)
							if !owned(key, p, i) {
								continue
							}
							b.SetCurrentKey([]byte(key))
							got, ok := v.Value()
							mv, mok := m.Get([]byte("u"))
							if ok != (j%2 == 0) || mok != ok || (ok && (string(got) != key || string(mv) != key)) {
								t.Fatalf("p=%d: %s = %q, %v; m = %q, %v", p, key, got, ok, mv, mok)
							}
							if ok {
								live++
							}
						}
						if e, _ := stored(t, b); !(e == 0 && live == 0) && e%2 != 0 {
							t.Fatalf("p=%d subtask %d stores %d entries, want a value and a map entry per live key", p, i, e)
						}
						sweep(t, b, t0+1500+ttl1sGap)
						if e, ix := stored(t, b); e != 0 || ix != 0 {
							t.Fatalf("p=%d subtask %d after every entry expired: %d entries, %d index entries", p, i, e, ix)
						}
					}
					if live != n/2 {
						t.Fatalf("p=%d: %d live keys, want %d", p, live, n/2)
					}
				}
			})
		}
	})
}

// A state written without a TTL and declared with one fails clearly.
func TestTTLOnStateWithoutOne(t *testing.T) {
	forEachBackend(t, func(t *testing.T, k backendKind) {
		b := newBackend(t, k, t.TempDir(), 1, 0)
		b.SetCurrentKey([]byte("k"))
		b.ValueState("v").Update([]byte("x"))
		defer func() {
			r := recover()
			se, ok := r.(*StoreError)
			if !ok || !strings.Contains(se.Error(), `state "v": an entry of 1 bytes has no expiry header`) {
				t.Fatalf("recovered %v", r)
			}
		}()
		v := b.ValueStateTTL("v", ttl1s)
		b.SetCurrentKey([]byte("k"))
		v.Value()
	})
}

// The Pebble index is not state: canonical snapshots and scans leave it
// out.
func TestTTLIndexNotInSnapshots(t *testing.T) {
	b := newBackend(t, kinds[1], t.TempDir(), 1, 0)
	b.AdvanceTime(t0)
	m := b.MapStateTTL("m", ttl1s)
	b.SetCurrentKey([]byte("k"))
	m.Put([]byte("u"), []byte("v"))
	s, err := b.TakeSnapshot(SnapshotOptions{CheckpointID: 1, Canonical: true})
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := checkpointDir(t)
	st, err := s.Write(dir, "v", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	err = ReadEntries(st, confMaxP, t.TempDir(), func(e Entry) error { states = append(states, e.State); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(states, ",") != "m" {
		t.Fatalf("the snapshot holds states %q", states)
	}
	p := b.(*Pebble)
	p.writeBack()
	it, _ := p.db.NewIter(&pebble.IterOptions{})
	defer it.Close()
	index := 0
	for it.First(); it.Valid(); it.Next() {
		if bytes.Contains(it.Key(), []byte(ttlIndexPrefix)) {
			index++
		}
	}
	if index == 0 {
		t.Fatal("the store holds no expiry index")
	}
}

// A key written over and over has one reference in the expiry index, not
// one per bucket it was written in.
func TestTTLIndexOneReferencePerEntry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, k backendKind) {
		b := newBackend(t, k, t.TempDir(), 1, 0)
		hour := sdk.StateTTL{TTL: time.Hour}
		v, m := b.ValueStateTTL("v", hour), b.MapStateTTL("m", hour)
		for i := range int64(600) {
			b.AdvanceTime(t0 + i*1000) // ten minutes, a write a second
			b.SetCurrentKey([]byte("hot"))
			v.Update([]byte("x"))
			m.Put([]byte("u"), []byte("y"))
		}
		if e, ix := stored(t, b); e != 2 || ix != 2 {
			t.Fatalf("%d entries, %d index entries; want 2 and 2", e, ix)
		}
		// Its first reference comes due and is filed again, under the
		// expiry of the last write.
		sweep(t, b, t0+3600_000+ttlGap(hour))
		if e, ix := stored(t, b); e != 2 || ix != 2 {
			t.Fatalf("after the first reference came due: %d entries, %d index entries", e, ix)
		}
		if next := b.NextExpiry(); next <= t0+599_000+3600_000 {
			t.Fatalf("next sweep at %d, before the last write's expiry", next-t0)
		}
		sweep(t, b, t0+599_000+3600_000+ttlGap(hour))
		if e, ix := stored(t, b); e != 0 || ix != 0 {
			t.Fatalf("after it expired: %d entries, %d index entries", e, ix)
		}
	})
}

func ttlGap(cfg sdk.StateTTL) int64 { return newTTLState("x", cfg).gran }

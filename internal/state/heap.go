// Package state holds subtask state backends: keyed state scoped by the
// current record's key, and operator list state, both snapshotted into
// checkpoint storage and restored by key-group range.
package state

import (
	"bytes"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// Heap keeps state in Go maps. A snapshot is a shallow copy of the maps
// taken on the mailbox goroutine and written out on another, so a value a
// snapshot holds is never written again: Update writes a value in place
// only when it was allocated since the last snapshot and no caller of
// Value holds it (valueCell).
type Heap struct {
	maxParallelism int
	keyGroups      keygroup.Range
	currentKey     string
	// keys interns the keys SetCurrentKey has seen, so the string every
	// state access needs costs a lookup instead of an allocation per
	// record. It is dropped when it outgrows maxInternedKeys: a subtask
	// that sees unbounded keys pays the allocations again, nothing more.
	keys   map[string]string
	values map[string]map[string]*valueCell // state name → key → value
	// gen counts snapshots, from 1: a value allocated in this generation
	// is in no snapshot.
	gen uint64
	// maps holds map state: state name → key → its entries (mapCell).
	// A snapshot shares the per-key maps; the first change of one after
	// it copies it (copy on write, by generation, as values do).
	maps  map[string]map[string]*mapCell
	lists operatorLists
	// ttl is the expiry index of the states declared with a TTL.
	ttl heapTTL
	// inline is Config.InlineThreshold.
	inline int
	// fs and log are Config.FS and Config.Logger.
	fs  vfs.FS
	log *slog.Logger
}

var _ Backend = (*Heap)(nil)

// NewHeap returns an empty heap backend for a subtask owning keyGroups.
func NewHeap(maxParallelism int, keyGroups keygroup.Range) *Heap {
	return &Heap{
		maxParallelism: maxParallelism,
		keyGroups:      keyGroups,
		values:         map[string]map[string]*valueCell{},
		gen:            1,
		maps:           map[string]map[string]*mapCell{},
		lists:          operatorLists{},
	}
}

// TakeSnapshot implements Backend; heap snapshots are always canonical.
func (h *Heap) TakeSnapshot(SnapshotOptions) (StateSnapshot, error) { return h.Snapshot(), nil }

// NotifyCheckpointComplete implements Backend.
func (h *Heap) NotifyCheckpointComplete(int64) {}

// NotifyCheckpointAborted implements Backend.
func (h *Heap) NotifyCheckpointAborted(int64) {}

// Close implements Backend.
func (h *Heap) Close() error { return nil }

// Release implements StateSnapshot.
func (s *Snapshot) Release() {}

// maxInternedKeys bounds Heap.keys.
const maxInternedKeys = 1 << 16

// SetCurrentKey scopes keyed state to key until the next call.
func (h *Heap) SetCurrentKey(key []byte) {
	if k, ok := h.keys[string(key)]; ok {
		h.currentKey = k
		return
	}
	if h.keys == nil || len(h.keys) >= maxInternedKeys {
		h.keys = make(map[string]string)
	}
	k := string(key)
	h.keys[k] = k
	h.currentKey = k
}

// ValueState returns the named keyed state.
func (h *Heap) ValueState(name string) sdk.ValueState {
	m, ok := h.values[name]
	if !ok {
		m = map[string]*valueCell{}
		h.values[name] = m
	}
	return &valueState{h: h, m: m}
}

// MapState returns the named keyed map state.
func (h *Heap) MapState(name string) sdk.MapState {
	m, ok := h.maps[name]
	if !ok {
		m = map[string]*mapCell{}
		h.maps[name] = m
	}
	return &mapState{h: h, m: m}
}

// ReducingState returns the named keyed state folded by reduce.
func (h *Heap) ReducingState(name string, reduce func(acc, v []byte) []byte) sdk.ReducingState {
	v := h.ValueState(name).(*valueState)
	return &reducingState{v: v, peek: v.Peek, reduce: reduce, copyAcc: true}
}

// ListState returns the named operator list state.
func (h *Heap) ListState(name string, union bool) sdk.ListState {
	return h.lists.get(name, union)
}

// ScanMap implements Backend. Entries of keys outside the backend's key
// groups, which it never holds after a Restore, are skipped all the same.
func (h *Heap) ScanMap(name string, fn func(key, userKey, value []byte) error) error {
	for k, c := range h.maps[name] {
		if !h.keyGroups.Contains(keygroup.Of([]byte(k), h.maxParallelism)) {
			continue
		}
		for uk, v := range c.m {
			if err := fn([]byte(k), []byte(uk), bytes.Clone(v)); err != nil {
				return err
			}
		}
	}
	return nil
}

// valueCell holds one key's value. Update copies into b in place, saving
// an allocation per update, only while gen is the heap's: b was allocated
// after the last snapshot (which shares the bytes it copied) and no caller
// of Value got it (Value sets gen to 0; Peek leaves it).
type valueCell struct {
	b   []byte
	gen uint64
}

type valueState struct {
	h *Heap
	m map[string]*valueCell
}

func (v *valueState) Value() ([]byte, bool) {
	c, ok := v.m[v.h.currentKey]
	if !ok {
		return nil, false
	}
	c.gen = 0 // the caller may keep b: it is never written again
	return c.b, true
}

// Peek is Value for a caller that is done with the bytes before its next
// Update or Clear of the key, which may overwrite them.
func (v *valueState) Peek() ([]byte, bool) {
	c, ok := v.m[v.h.currentKey]
	if !ok {
		return nil, false
	}
	return c.b, true
}

func (v *valueState) Update(b []byte) {
	c, ok := v.m[v.h.currentKey]
	switch {
	case !ok:
		v.m[v.h.currentKey] = &valueCell{b: bytes.Clone(b), gen: v.h.gen}
	case c.gen == v.h.gen && cap(c.b) >= len(b) && b != nil:
		c.b = c.b[:len(b)]
		copy(c.b, b)
	default:
		c.b, c.gen = bytes.Clone(b), v.h.gen
	}
}

func (v *valueState) Clear() { delete(v.m, v.h.currentKey) }

type mapState struct {
	h *Heap
	m map[string]*mapCell
}

// mapCell is one key's map state: its entries, and what makes
// snapshotting and iterating them cheap.
type mapCell struct {
	m map[string][]byte
	// gen is the snapshot generation m belongs to: a snapshot of an
	// earlier one shares m, so a change copies m first.
	gen uint64
	// sorted are m's user keys in order, once All needed them, kept in
	// order by Put and Remove so that the next All need not sort them.
	sorted []string
	// iterating counts the iterations running over m and sorted, which a
	// change copies first (once: copied says it was) so that they see
	// the entries as they were when they began.
	iterating int
	copied    bool
}

// cell is the current key's cell; with create, a new empty one if none.
func (s *mapState) cell(create bool) *mapCell {
	c := s.m[s.h.currentKey]
	if c == nil && create {
		c = &mapCell{m: map[string][]byte{}, gen: s.h.gen}
		s.m[s.h.currentKey] = c
	}
	return c
}

// writable makes c's entries its own to change: not shared with a
// snapshot or a running iteration.
func (c *mapCell) writable(gen uint64) {
	if c.iterating > 0 && !c.copied {
		c.m, c.sorted, c.gen, c.copied = maps.Clone(c.m), slices.Clone(c.sorted), gen, true
		return
	}
	if c.gen != gen {
		c.m, c.gen = maps.Clone(c.m), gen
	}
}

func (s *mapState) Get(uk []byte) ([]byte, bool) {
	c := s.m[s.h.currentKey]
	if c == nil {
		return nil, false
	}
	v, ok := c.m[string(uk)]
	return v, ok
}

func (s *mapState) Put(uk, v []byte) {
	c := s.cell(true)
	c.writable(s.h.gen)
	k := string(uk)
	if _, had := c.m[k]; !had && c.sorted != nil {
		i, _ := slices.BinarySearch(c.sorted, k)
		c.sorted = slices.Insert(c.sorted, i, k)
	}
	c.m[k] = bytes.Clone(v)
}

func (s *mapState) Remove(uk []byte) {
	c := s.m[s.h.currentKey]
	if c == nil {
		return
	}
	k := string(uk)
	if _, had := c.m[k]; !had {
		return
	}
	if len(c.m) == 1 {
		delete(s.m, s.h.currentKey)
		return
	}
	c.writable(s.h.gen)
	delete(c.m, k)
	if c.sorted != nil {
		if i, found := slices.BinarySearch(c.sorted, k); found {
			c.sorted = slices.Delete(c.sorted, i, i+1)
		}
	}
}

func (s *mapState) Contains(uk []byte) bool {
	_, ok := s.Get(uk)
	return ok
}
func (s *mapState) IsEmpty() bool { c := s.m[s.h.currentKey]; return c == nil || len(c.m) == 0 }
func (s *mapState) Clear()        { delete(s.m, s.h.currentKey) }

// All iterates in the order of the user keys, so both backends iterate in
// the same order: the keys sorted once, then kept in order.
func (s *mapState) All() iter.Seq2[[]byte, []byte] { return s.iterate(nil, false, true) }

// Ascend iterates the entries from user key from on, in order; Descend
// those before below, backwards. Their slices are the state's, to read
// and keep but not to change (entries are never written in place), which
// spares an ordered scan of a long map copies and a pass from its start.
func (s *mapState) Ascend(from []byte) iter.Seq2[[]byte, []byte] {
	return s.iterate(from, false, false)
}

func (s *mapState) Descend(below []byte) iter.Seq2[[]byte, []byte] {
	return s.iterate(below, true, false)
}

// iterate yields the current key's entries from key from on (backwards:
// those before it), copies of them when copies is set.
func (s *mapState) iterate(from []byte, backwards, copies bool) iter.Seq2[[]byte, []byte] {
	// The key is the one current now, its entries those there when the
	// loop begins (as Pebble's iterator reads them).
	key, from := s.h.currentKey, bytes.Clone(from)
	return func(yield func([]byte, []byte) bool) {
		c := s.m[key]
		if c == nil || len(c.m) == 0 {
			return
		}
		if c.sorted == nil {
			c.sorted = sortedKeys(c.m)
		}
		keys, um := c.sorted, c.m
		// A change from now on copies the entries away from this
		// iteration (even when an outer one had them copied already).
		c.iterating++
		c.copied = false
		defer func() {
			if c.iterating--; c.iterating == 0 {
				c.copied = false
			}
		}()
		i, _ := slices.BinarySearch(keys, string(from))
		if backwards {
			for i--; i >= 0; i-- {
				k := keys[i]
				if !yield(lend(k), um[k]) {
					return
				}
			}
			return
		}
		for _, k := range keys[i:] {
			kb, v := lend(k), um[k]
			if copies {
				kb, v = []byte(k), bytes.Clone(v)
			}
			if !yield(kb, v) {
				return
			}
		}
	}
}

// lend is k's bytes, not copied: strings do not change.
func lend(k string) []byte {
	if k == "" {
		return []byte{}
	}
	return unsafe.Slice(unsafe.StringData(k), len(k))
}

type listState struct {
	union bool
	items [][]byte
}

func (l *listState) Get() [][]byte { return l.items }
func (l *listState) Update(items [][]byte) {
	l.items = make([][]byte, len(items))
	for i, it := range items {
		l.items[i] = bytes.Clone(it)
	}
}
func (l *listState) Add(b []byte) { l.items = append(l.items, bytes.Clone(b)) }
func (l *listState) Clear()       { l.items = nil }

// Snapshot is a consistent view of a Heap's state, safe to write from another
// goroutine while the mailbox goes on changing the Heap.
type Snapshot struct {
	maxParallelism int
	keyGroups      keygroup.Range
	values         map[string]map[string][]byte
	maps           map[string]map[string]map[string][]byte
	lists          map[string]listState
	inline         int
	files          storage.Files
	// ttlValues and ttlMaps name the TTL states, whose entries expired at
	// now the snapshot leaves out: the sweep may not have reached them.
	ttlValues, ttlMaps map[string]bool
	now                int64
}

// expired says whether the stored b of a TTL state is expired.
func (s *Snapshot) expired(ttl map[string]bool, name string, b []byte) bool {
	if !ttl[name] {
		return false
	}
	exp, _ := expiryOf(name, b)
	return exp <= s.now
}

// Snapshot takes the synchronous part of a checkpoint.
func (h *Heap) Snapshot() *Snapshot {
	s := &Snapshot{
		maxParallelism: h.maxParallelism,
		keyGroups:      h.keyGroups,
		values:         make(map[string]map[string][]byte, len(h.values)),
		maps:           make(map[string]map[string]map[string][]byte, len(h.maps)),
		lists:          h.lists.copy(),
		inline:         h.inline,
		files:          storage.Files{FS: h.fs},
		now:            h.ttl.ttlNow(),
	}
	s.ttlValues, s.ttlMaps = h.ttlNames()
	for name, m := range h.values {
		c := make(map[string][]byte, len(m))
		for k, v := range m {
			c[k] = v.b
		}
		s.values[name] = c
	}
	// The snapshot shares every value: none is written in place again.
	h.gen++
	for name, m := range h.maps {
		c := make(map[string]map[string][]byte, len(m))
		for k, cell := range m {
			c[k] = cell.m
		}
		s.maps[name] = c
	}
	return s
}

// Write is the asynchronous part: it writes the snapshot's files into dir,
// named after the subtask, and returns the subtask state to acknowledge.
func (s *Snapshot) Write(dir, vertex string, subtask, parallelism int) (*weirv1.SubtaskState, error) {
	st := &weirv1.SubtaskState{
		Vertex:       vertex,
		SubtaskIndex: int32(subtask),
		Parallelism:  int32(parallelism),
		KeyGroups:    &weirv1.KeyGroupRange{Start: int32(s.keyGroups.Start), End: int32(s.keyGroups.End)},
	}
	prefix := filePrefix(dir, vertex, subtask)
	if keyed := s.keyedSnapshot(); len(keyed.KeyGroups) > 0 {
		h, err := s.files.WriteHandle(prefix+".keyed", keyed, s.inline)
		if err != nil {
			return nil, fmt.Errorf("state: write keyed state: %w", err)
		}
		st.KeyedState = h
		st.StateSize += h.GetSize()
	}
	st.CheckpointedSize = st.StateSize
	if err := writeOperator(s.files, st, prefix, s.lists, s.inline); err != nil {
		return nil, err
	}
	return st, nil
}

// keyedSnapshot groups entries by key group, sorted, so restore can take
// exactly the key groups a new subtask owns.
func (s *Snapshot) keyedSnapshot() *weirv1.KeyedStateSnapshot {
	groups := map[int32]*weirv1.KeyGroupSnapshot{}
	group := func(k string) *weirv1.KeyGroupSnapshot {
		kg := int32(keygroup.Of([]byte(k), s.maxParallelism))
		g, ok := groups[kg]
		if !ok {
			g = &weirv1.KeyGroupSnapshot{KeyGroup: kg}
			groups[kg] = g
		}
		return g
	}
	for _, name := range sortedKeys(s.values) {
		m := s.values[name]
		for _, k := range sortedKeys(m) {
			if s.expired(s.ttlValues, name, m[k]) {
				continue
			}
			g := group(k)
			g.Entries = append(g.Entries, &weirv1.KeyedStateEntry{State: name, Key: []byte(k), Value: m[k]})
		}
	}
	for _, name := range sortedKeys(s.maps) {
		m := s.maps[name]
		for _, k := range sortedKeys(m) {
			var g *weirv1.KeyGroupSnapshot
			um := m[k]
			for _, uk := range sortedKeys(um) {
				if s.expired(s.ttlMaps, name, um[uk]) {
					continue
				}
				if g == nil {
					g = group(k)
				}
				g.Entries = append(g.Entries, &weirv1.KeyedStateEntry{
					Kind: weirv1.KeyedStateEntry_KIND_MAP, State: name, Key: []byte(k), UserKey: []byte(uk), Value: um[uk],
				})
			}
		}
	}
	out := &weirv1.KeyedStateSnapshot{MaxParallelism: int32(s.maxParallelism)}
	for _, g := range groups {
		out.KeyGroups = append(out.KeyGroups, g)
	}
	sort.Slice(out.KeyGroups, func(i, j int) bool { return out.KeyGroups[i].KeyGroup < out.KeyGroups[j].KeyGroup })
	return out
}

// Restore loads the state of a previous run. prev lists every subtask state
// of the vertex in the restored checkpoint; keyed state is filtered to the
// key groups this subtask owns and list state is redistributed round-robin
// (union state is given whole).
func (h *Heap) Restore(prev []*weirv1.SubtaskState, subtask, parallelism int) error {
	r := newRestorer(h.fs)
	log := h.log
	if log == nil {
		log = slog.Default()
	}
	for _, st := range prev {
		err := readKeyed(r, log, st, h.maxParallelism, "", h.keyGroups.Contains, func(e entry) error {
			if !e.owned {
				e.value = bytes.Clone(e.value)
			}
			if e.kind == weirv1.KeyedStateEntry_KIND_MAP {
				m, ok := h.maps[e.state]
				if !ok {
					m = map[string]*mapCell{}
					h.maps[e.state] = m
				}
				c, ok := m[string(e.key)]
				if !ok {
					c = &mapCell{m: map[string][]byte{}, gen: h.gen}
					m[string(e.key)] = c
				}
				c.m[string(e.userKey)] = e.value
				return nil
			}
			m, ok := h.values[e.state]
			if !ok {
				m = map[string]*valueCell{}
				h.values[e.state] = m
			}
			m[string(e.key)] = &valueCell{b: e.value}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return restoreOperator(r, h.lists, prev, subtask, parallelism)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

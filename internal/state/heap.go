// Package state holds subtask state backends: keyed state scoped by the
// current record's key, and operator list state, both snapshotted into
// checkpoint storage and restored by key-group range.
package state

import (
	"bytes"
	"fmt"
	"iter"
	"log/slog"
	"sort"

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
	// maps holds map state: state name → key → user key → value. A
	// snapshot copies the per-key maps, as Put changes them in place.
	maps  map[string]map[string]map[string][]byte
	lists operatorLists
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
		maps:           map[string]map[string]map[string][]byte{},
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
		m = map[string]map[string][]byte{}
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
	for k, um := range h.maps[name] {
		if !h.keyGroups.Contains(keygroup.Of([]byte(k), h.maxParallelism)) {
			continue
		}
		for uk, v := range um {
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
	m map[string]map[string][]byte
}

func (s *mapState) Get(uk []byte) ([]byte, bool) {
	v, ok := s.m[s.h.currentKey][string(uk)]
	return v, ok
}

func (s *mapState) Put(uk, v []byte) {
	um, ok := s.m[s.h.currentKey]
	if !ok {
		um = map[string][]byte{}
		s.m[s.h.currentKey] = um
	}
	um[string(uk)] = bytes.Clone(v)
}

func (s *mapState) Remove(uk []byte) {
	um, ok := s.m[s.h.currentKey]
	if !ok {
		return
	}
	delete(um, string(uk))
	if len(um) == 0 {
		delete(s.m, s.h.currentKey)
	}
}

func (s *mapState) Contains(uk []byte) bool { _, ok := s.m[s.h.currentKey][string(uk)]; return ok }
func (s *mapState) IsEmpty() bool           { return len(s.m[s.h.currentKey]) == 0 }
func (s *mapState) Clear()                  { delete(s.m, s.h.currentKey) }

// All sorts the user keys, so both backends iterate in the same order.
func (s *mapState) All() iter.Seq2[[]byte, []byte] {
	um := s.m[s.h.currentKey]
	keys := sortedKeys(um)
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		vals[i] = um[k]
	}
	return func(yield func([]byte, []byte) bool) {
		for i, k := range keys {
			if !yield([]byte(k), bytes.Clone(vals[i])) {
				return
			}
		}
	}
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
	}
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
		for k, um := range m {
			cu := make(map[string][]byte, len(um))
			for uk, v := range um {
				cu[uk] = v
			}
			c[k] = cu
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
			g := group(k)
			g.Entries = append(g.Entries, &weirv1.KeyedStateEntry{State: name, Key: []byte(k), Value: m[k]})
		}
	}
	for _, name := range sortedKeys(s.maps) {
		m := s.maps[name]
		for _, k := range sortedKeys(m) {
			g := group(k)
			um := m[k]
			for _, uk := range sortedKeys(um) {
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
					m = map[string]map[string][]byte{}
					h.maps[e.state] = m
				}
				um, ok := m[string(e.key)]
				if !ok {
					um = map[string][]byte{}
					m[string(e.key)] = um
				}
				um[string(e.userKey)] = e.value
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

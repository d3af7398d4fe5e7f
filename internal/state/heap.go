// Package state holds subtask state backends: keyed state scoped by the
// current record's key, and operator list state, both snapshotted into
// checkpoint storage and restored by key-group range.
package state

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// Heap keeps state in Go maps. Values are never mutated in place (Update
// replaces the slice), so a snapshot is a shallow copy of the maps taken on
// the mailbox goroutine and written out on another.
type Heap struct {
	maxParallelism int
	keyGroups      keygroup.Range
	currentKey     string
	values         map[string]map[string][]byte // state name → key → value
	lists          operatorLists
}

var _ Backend = (*Heap)(nil)

// NewHeap returns an empty heap backend for a subtask owning keyGroups.
func NewHeap(maxParallelism int, keyGroups keygroup.Range) *Heap {
	return &Heap{
		maxParallelism: maxParallelism,
		keyGroups:      keyGroups,
		values:         map[string]map[string][]byte{},
		lists:          operatorLists{},
	}
}

// TakeSnapshot implements Backend; heap snapshots are always canonical.
func (h *Heap) TakeSnapshot(SnapshotOptions) (StateSnapshot, error) { return h.Snapshot(), nil }

// NotifyCheckpointComplete implements Backend.
func (h *Heap) NotifyCheckpointComplete(int64) {}

// Close implements Backend.
func (h *Heap) Close() error { return nil }

// Release implements StateSnapshot.
func (s *Snapshot) Release() {}

// SetCurrentKey scopes keyed state to key until the next call.
func (h *Heap) SetCurrentKey(key []byte) { h.currentKey = string(key) }

// ValueState returns the named keyed state.
func (h *Heap) ValueState(name string) sdk.ValueState {
	m, ok := h.values[name]
	if !ok {
		m = map[string][]byte{}
		h.values[name] = m
	}
	return &valueState{h: h, m: m}
}

// ListState returns the named operator list state.
func (h *Heap) ListState(name string, union bool) sdk.ListState {
	return h.lists.get(name, union)
}

type valueState struct {
	h *Heap
	m map[string][]byte
}

func (v *valueState) Value() ([]byte, bool) { b, ok := v.m[v.h.currentKey]; return b, ok }
func (v *valueState) Update(b []byte)       { v.m[v.h.currentKey] = bytes.Clone(b) }
func (v *valueState) Clear()                { delete(v.m, v.h.currentKey) }

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
	lists          map[string]listState
}

// Snapshot takes the synchronous part of a checkpoint.
func (h *Heap) Snapshot() *Snapshot {
	s := &Snapshot{
		maxParallelism: h.maxParallelism,
		keyGroups:      h.keyGroups,
		values:         make(map[string]map[string][]byte, len(h.values)),
		lists:          h.lists.copy(),
	}
	for name, m := range h.values {
		c := make(map[string][]byte, len(m))
		for k, v := range m {
			c[k] = v
		}
		s.values[name] = c
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
		n, err := storage.WriteProto(prefix+".keyed", keyed)
		if err != nil {
			return nil, fmt.Errorf("state: write keyed state: %w", err)
		}
		st.KeyedState = &weirv1.StateHandle{Path: prefix + ".keyed", Size: n}
		st.StateSize += n
	}
	st.CheckpointedSize = st.StateSize
	if err := writeOperator(st, prefix, s.lists); err != nil {
		return nil, err
	}
	return st, nil
}

// keyedSnapshot groups entries by key group, sorted, so restore can take
// exactly the key groups a new subtask owns.
func (s *Snapshot) keyedSnapshot() *weirv1.KeyedStateSnapshot {
	groups := map[int32]*weirv1.KeyGroupSnapshot{}
	for _, name := range sortedKeys(s.values) {
		m := s.values[name]
		for _, k := range sortedKeys(m) {
			kg := int32(keygroup.Of([]byte(k), s.maxParallelism))
			g, ok := groups[kg]
			if !ok {
				g = &weirv1.KeyGroupSnapshot{KeyGroup: kg}
				groups[kg] = g
			}
			g.Entries = append(g.Entries, &weirv1.KeyedStateEntry{State: name, Key: []byte(k), Value: m[k]})
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
	for _, st := range prev {
		err := readKeyed(st, h.maxParallelism, h.keyGroups.Contains, func(state string, key, value []byte) error {
			m, ok := h.values[state]
			if !ok {
				m = map[string][]byte{}
				h.values[state] = m
			}
			m[string(key)] = value
			return nil
		})
		if err != nil {
			return err
		}
	}
	return restoreOperator(h.lists, prev, subtask, parallelism)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

package state

import (
	"bytes"
	"encoding/binary"
	"iter"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/sdk"
)

// SetCurrentKey implements Backend.
func (p *Pebble) SetCurrentKey(key []byte) {
	p.key = append(p.key[:0], key...)
	p.kg = keygroup.Of(key, p.cfg.MaxParallelism)
}

// ValueState implements Backend.
func (p *Pebble) ValueState(name string) sdk.ValueState {
	checkName(name)
	return &pebbleValue{p: p, name: name}
}

// MapState implements Backend.
func (p *Pebble) MapState(name string) sdk.MapState {
	checkName(name)
	return &pebbleMap{p: p, name: name}
}

// ReducingState implements Backend.
func (p *Pebble) ReducingState(name string, reduce func(acc, v []byte) []byte) sdk.ReducingState {
	// Value already returns a copy reduce may change.
	v := p.ValueState(name)
	return &reducingState{v: v, peek: v.Value, reduce: reduce}
}

// ListState implements Backend.
func (p *Pebble) ListState(name string, union bool) sdk.ListState { return p.lists.get(name, union) }

type pebbleValue struct {
	p    *Pebble
	name string
}

func (v *pebbleValue) k() []byte {
	v.p.buf = encodeKey(v.p.buf, v.p.kg, v.name, v.p.key)
	return v.p.buf
}

func (v *pebbleValue) Value() ([]byte, bool) { return v.p.get(v.k()) }

func (v *pebbleValue) Update(b []byte) { v.p.set(v.k(), b) }

func (v *pebbleValue) Clear() { v.p.del(v.k()) }

type pebbleMap struct {
	p    *Pebble
	name string
}

func (m *pebbleMap) k(userKey []byte) []byte {
	m.p.buf = encodeMapKey(m.p.buf, m.p.kg, m.name, m.p.key, userKey)
	return m.p.buf
}

func (m *pebbleMap) Get(userKey []byte) ([]byte, bool) { return m.p.get(m.k(userKey)) }

func (m *pebbleMap) Contains(userKey []byte) bool {
	_, ok := m.Get(userKey)
	return ok
}

func (m *pebbleMap) Put(userKey, value []byte) { m.p.set(m.k(userKey), value) }

func (m *pebbleMap) Remove(userKey []byte) { m.p.del(m.k(userKey)) }

func (m *pebbleMap) bounds() *pebble.IterOptions {
	lower := encodeMapPrefix(nil, m.p.kg, m.name, m.p.key)
	return &pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)}
}

func (m *pebbleMap) IsEmpty() bool {
	it := m.p.iter(m.bounds())
	empty := !it.First()
	m.p.closeIter(it)
	return empty
}

// All implements sdk.MapState: a Pebble iterator reads the store as it
// was when it was opened, so writes during the loop are not seen. The key
// is the one current when All was called.
func (m *pebbleMap) All() iter.Seq2[[]byte, []byte] {
	bounds := m.bounds()
	n := len(bounds.LowerBound)
	return func(yield func([]byte, []byte) bool) {
		it := m.p.iter(bounds)
		defer m.p.closeIter(it)
		for valid := it.First(); valid; valid = it.Next() {
			if !yield(bytes.Clone(it.Key()[n:]), bytes.Clone(it.Value())) {
				return
			}
		}
	}
}

// Ascend iterates the entries from user key from on, in order; Descend
// those before below, backwards (the heap's, with copies: a Pebble
// iterator's slices live until it moves).
func (m *pebbleMap) Ascend(from []byte) iter.Seq2[[]byte, []byte] {
	return m.seek(from, false)
}

func (m *pebbleMap) Descend(below []byte) iter.Seq2[[]byte, []byte] {
	return m.seek(below, true)
}

func (m *pebbleMap) seek(from []byte, backwards bool) iter.Seq2[[]byte, []byte] {
	bounds := m.bounds()
	n := len(bounds.LowerBound)
	start := append(slices.Clone(bounds.LowerBound), from...)
	return func(yield func([]byte, []byte) bool) {
		it := m.p.iter(bounds)
		defer m.p.closeIter(it)
		valid, next := it.SeekGE(start), it.Next
		if backwards {
			valid, next = it.SeekLT(start), it.Prev
		}
		for ; valid; valid = next() {
			if !yield(bytes.Clone(it.Key()[n:]), bytes.Clone(it.Value())) {
				return
			}
		}
	}
}

// ScanMap implements Backend. The named map's entries of a key group are
// one contiguous span: one iterator over the backend's key groups seeks to
// each span in turn, skipping key groups that hold no state at all. The
// iterator reads the store as it was when the scan began.
func (p *Pebble) ScanMap(name string, fn func(key, userKey, value []byte) error) (err error) {
	checkName(name)
	// Store failures panic with a *StoreError (p.iter, p.closeIter): this
	// method has an error to return them as. A *StoreError fn panics with
	// (reading state of a failed store) is the same failure.
	defer storeErrorAs(&err)
	kgs := p.cfg.KeyGroups
	if kgs.End < kgs.Start {
		return nil
	}
	it := p.iter(p.ownedSpan())
	closed := false
	defer func() {
		if !closed {
			it.Close() // fn panicked
		}
	}()
	var prefix []byte
scan:
	for kg := kgs.Start; kg <= kgs.End; kg++ {
		prefix = encodeMapName(prefix, kg, name)
		valid := it.SeekGE(prefix)
		for ; valid && bytes.HasPrefix(it.Key(), prefix); valid = it.Next() {
			_, e, ok := decodeKey(it.Key())
			if !ok {
				continue
			}
			if err = fn(bytes.Clone(e.key), bytes.Clone(e.userKey), append([]byte{}, it.Value()...)); err != nil {
				break scan
			}
		}
		if !valid {
			break // nothing more in our key groups
		}
		// The next key group holding any state.
		if next := int(binary.BigEndian.Uint16(it.Key())); next > kg+1 {
			kg = next - 1
		}
	}
	closed = true
	p.closeIter(it)
	return err
}

// Clear deletes the entries one by one, through the cache: a range
// tombstone per call would pile up and slow reads down when maps are
// cleared per record.
func (m *pebbleMap) Clear() {
	var keys [][]byte
	it := m.p.iter(m.bounds())
	for valid := it.First(); valid; valid = it.Next() {
		keys = append(keys, bytes.Clone(it.Key()))
	}
	m.p.closeIter(it)
	for _, k := range keys {
		m.p.del(k)
	}
}

// ownedSpan bounds an iterator to the key groups the backend owns.
func (p *Pebble) ownedSpan() *pebble.IterOptions {
	kgs := p.cfg.KeyGroups
	opts := &pebble.IterOptions{LowerBound: binary.BigEndian.AppendUint16(nil, uint16(kgs.Start))}
	if kgs.End+1 <= 0xffff {
		opts.UpperBound = binary.BigEndian.AppendUint16(nil, uint16(kgs.End+1))
	}
	return opts
}

// storeErrorAs, deferred, returns a *StoreError a store access panicked
// with (p.iter, p.must and the rest) as *err; other panics go on.
func storeErrorAs(err *error) {
	if r := recover(); r != nil {
		se, ok := r.(*StoreError)
		if !ok {
			panic(r)
		}
		*err = se
	}
}

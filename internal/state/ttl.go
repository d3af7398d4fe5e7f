package state

import (
	"encoding/binary"
	"fmt"
	"iter"
	"time"

	"github.com/weirproject/weir/sdk"
)

// State with a time to live. Both backends store a TTL state's value (a
// map's: each entry) behind an 8-byte header, its expiry time in Unix
// milliseconds, big-endian, so the expiry travels with the value through
// checkpoints, savepoints and rescaling. Reads compare it with the
// subtask's clock and never return an expired value.
//
// What frees the space is an expiry index swept on the mailbox goroutine,
// a bounded batch at a time (Expire), never a pass over the whole state:
// the first write of an entry files it under its expiry time rounded up
// to the state's granularity (a bucket), and the sweep visits only the
// buckets whose time has passed: it deletes each entry whose stored expiry
// is due and files the others (written again since) under their expiry
// now. Each entry has one reference, so the index is as large as the
// state, however often entries are written. An entry is
// therefore gone from memory, from the local store and from the next
// checkpoint within TTL + granularity + the sweep's period of its last
// write. The heap keeps its index in memory and rebuilds it from the
// entries when a restored state is declared; Pebble keeps it in the store
// beside the entries, in the same key group, so a native checkpoint
// carries it and a rescale clips it with the entries (it is derived data:
// canonical snapshots leave it out and the declaration rebuilds it).
// Pebble has no compaction filter (RocksDB's, which Flink's TTL cleanup
// uses), and a range deletion per bucket would need the bucket in every
// entry's key, making each point read a search across buckets.

// ttlHeader is the size of a TTL state's expiry header.
const ttlHeader = 8

// ttlSweepBatch bounds the index entries one Expire visits, so that a
// burst of expiries is spread over steps instead of pausing processing.
const ttlSweepBatch = 4096

// ttlState is a declared TTL state.
type ttlState struct {
	name string
	cfg  sdk.StateTTL
	// gran is the bucket width in milliseconds: a sixteenth of the TTL,
	// between 10 ms and a second.
	gran int64
	// index is the name Pebble keeps the state's expiry index under.
	index string
}

func newTTLState(name string, cfg sdk.StateTTL) *ttlState {
	if cfg.TTL < time.Millisecond {
		panic(fmt.Sprintf("state: state %q: a TTL of %v; at least 1ms", name, cfg.TTL))
	}
	return &ttlState{name: name, cfg: cfg, gran: min(max(cfg.TTL.Milliseconds()/16, 10), 1000)}
}

// deadline is the end of exp's bucket: when the sweep visits it.
func (s *ttlState) deadline(exp int64) int64 { return (exp/s.gran + 1) * s.gran }

// sameTTL panics when a state is declared twice with different TTLs: one
// store layout per state.
func (s *ttlState) same(cfg sdk.StateTTL) {
	if s.cfg != cfg {
		panic(fmt.Sprintf("state: state %q declared with TTL %+v and %+v", s.name, s.cfg, cfg))
	}
}

// expiryOf splits a stored TTL value.
func expiryOf(state string, b []byte) (exp int64, v []byte) {
	if len(b) < ttlHeader {
		panic(&StoreError{Err: fmt.Errorf("state: state %q: an entry of %d bytes has no expiry header: was it written without a TTL?", state, len(b))})
	}
	return int64(binary.BigEndian.Uint64(b)), b[ttlHeader:]
}

// ttlIndexer is what a backend gives its TTL states: the subtask's clock
// and the expiry index of the current key's entries.
type ttlIndexer interface {
	ttlNow() int64
	// track files the current key's entry (userKey nil: a value state's)
	// under the bucket of exp, before it is written, when it is not
	// stored yet; the sweep files a stored one again when its reference
	// comes due and it has not expired.
	track(s *ttlState, isMap bool, userKey []byte, exp int64)
}

// ttlValue is a value state with a TTL over the backend's raw one.
type ttlValue struct {
	raw sdk.ValueState
	s   *ttlState
	ix  ttlIndexer
	buf []byte
}

func (v *ttlValue) Value() ([]byte, bool) {
	b, ok := v.raw.Value()
	if !ok {
		return nil, false
	}
	exp, val := expiryOf(v.s.name, b)
	now := v.ix.ttlNow()
	if exp <= now {
		v.raw.Clear()
		return nil, false
	}
	if v.s.cfg.RefreshOnRead {
		v.write(val, now)
	}
	return val, true
}

func (v *ttlValue) Update(b []byte) { v.write(b, v.ix.ttlNow()) }

func (v *ttlValue) write(b []byte, now int64) {
	exp := now + v.s.cfg.TTL.Milliseconds()
	v.buf = append(binary.BigEndian.AppendUint64(v.buf[:0], uint64(exp)), b...)
	v.ix.track(v.s, false, nil, exp) // before the write: it files new entries only
	v.raw.Update(v.buf)
}

func (v *ttlValue) Clear() { v.raw.Clear() }

// seeker is a map state read from a user key on, either way.
type seeker interface {
	Ascend(from []byte) iter.Seq2[[]byte, []byte]
	Descend(below []byte) iter.Seq2[[]byte, []byte]
}

// ttlMap is a map state with a TTL per entry over the backend's raw one.
type ttlMap struct {
	raw sdk.MapState
	s   *ttlState
	ix  ttlIndexer
	buf []byte
}

func (m *ttlMap) Get(uk []byte) ([]byte, bool) {
	b, ok := m.raw.Get(uk)
	if !ok {
		return nil, false
	}
	exp, val := expiryOf(m.s.name, b)
	now := m.ix.ttlNow()
	if exp <= now {
		m.raw.Remove(uk)
		return nil, false
	}
	if m.s.cfg.RefreshOnRead {
		m.put(uk, val, now)
	}
	return val, true
}

func (m *ttlMap) Put(uk, v []byte) { m.put(uk, v, m.ix.ttlNow()) }

func (m *ttlMap) put(uk, v []byte, now int64) {
	exp := now + m.s.cfg.TTL.Milliseconds()
	m.buf = append(binary.BigEndian.AppendUint64(m.buf[:0], uint64(exp)), v...)
	m.ix.track(m.s, true, uk, exp)
	m.raw.Put(uk, m.buf)
}

func (m *ttlMap) Remove(uk []byte) { m.raw.Remove(uk) }

func (m *ttlMap) Contains(uk []byte) bool {
	_, ok := m.Get(uk)
	return ok
}

func (m *ttlMap) IsEmpty() bool {
	for range m.All() {
		return false
	}
	return true
}

func (m *ttlMap) Clear() { m.raw.Clear() }

// All skips expired entries (the sweep deletes them); with RefreshOnRead
// it restarts the TTL of each entry it yields, as a read.
func (m *ttlMap) All() iter.Seq2[[]byte, []byte] { return m.live(m.raw.All()) }

// Ascend and Descend are the raw state's, without the expired entries.
func (m *ttlMap) Ascend(from []byte) iter.Seq2[[]byte, []byte] {
	return m.live(m.raw.(seeker).Ascend(from))
}

func (m *ttlMap) Descend(below []byte) iter.Seq2[[]byte, []byte] {
	return m.live(m.raw.(seeker).Descend(below))
}

func (m *ttlMap) live(entries iter.Seq2[[]byte, []byte]) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		now := m.ix.ttlNow()
		for uk, b := range entries {
			exp, val := expiryOf(m.s.name, b)
			if exp <= now {
				continue
			}
			if m.s.cfg.RefreshOnRead {
				// Both backends' iterations read the entries as they were
				// when they began: the write is not seen by this loop.
				m.put(uk, val, now)
			}
			if !yield(uk, val) {
				return
			}
		}
	}
}

// ttlIndexPrefix starts the names Pebble keeps its expiry index under:
// no state name a user declares starts with a NUL byte.
const ttlIndexPrefix = "\x00ttl\x00"

// ttlStates are a backend's declared TTL states: a value state and a map
// state of one name are two states.
type ttlStates struct {
	values map[string]*ttlState
	maps   map[string]*ttlState
	// now is the subtask's clock, in Unix milliseconds, as AdvanceTime
	// last set it; 0 until then (the wall clock is read instead).
	now int64
}

func (t *ttlStates) ttlNow() int64 {
	if t.now == 0 {
		return time.Now().UnixMilli()
	}
	return t.now
}

// declare returns the state of name, new tells it was not declared yet.
func (t *ttlStates) declare(isMap bool, name string, cfg sdk.StateTTL) (s *ttlState, isNew bool) {
	m := &t.values
	if isMap {
		m = &t.maps
	}
	if *m == nil {
		*m = map[string]*ttlState{}
	}
	if s := (*m)[name]; s != nil {
		s.same(cfg)
		return s, false
	}
	s = newTTLState(name, cfg)
	s.index = ttlIndexName(isMap, name)
	(*m)[name] = s
	return s, true
}

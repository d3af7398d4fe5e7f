package state

import (
	"bytes"
	"encoding/binary"
	"maps"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirproject/weir/sdk"
)

// pebbleTTL is the Pebble backend's TTL bookkeeping; the expiry index is
// in the store. Its keys are, in the entry's key group, under the state's
// index name (ttlIndexName), the bucket deadline (8 bytes, big endian),
// the record key's length (4 bytes), the record key and the map's user
// key: a key group's due entries are one span from its start. The index
// name with nothing after it is the key group's marker: the index of that
// state is complete there (a store rebuilt from a canonical snapshot has
// no index until a declaration rebuilds it).
type pebbleTTL struct {
	ttlStates
	// next is the earliest deadline the index may hold: no sweep before
	// it. Declaring a state sets it to 0, as the restored index's
	// deadlines are unknown until a sweep reads them.
	next int64
	buf  []byte
}

// ttlIndexName is the name state name's index is kept under.
func ttlIndexName(isMap bool, name string) string {
	if isMap {
		return ttlIndexPrefix + "m\x00" + name
	}
	return ttlIndexPrefix + "v\x00" + name
}

func encodeTTLIndex(dst []byte, kg int, index string, deadline int64, key, userKey []byte) []byte {
	dst = encodeKey(dst, kg, index, nil)
	dst = binary.BigEndian.AppendUint64(dst, uint64(deadline))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(key)))
	dst = append(dst, key...)
	return append(dst, userKey...)
}

// ValueStateTTL implements Backend.
func (p *Pebble) ValueStateTTL(name string, cfg sdk.StateTTL) sdk.ValueState {
	checkName(ttlIndexName(false, name))
	s, isNew := p.ttl.declare(false, name, cfg)
	if isNew {
		p.indexTTL(s, false)
	}
	return &ttlValue{raw: p.ValueState(name), s: s, ix: p}
}

// MapStateTTL implements Backend.
func (p *Pebble) MapStateTTL(name string, cfg sdk.StateTTL) sdk.MapState {
	checkName(ttlIndexName(true, name))
	s, isNew := p.ttl.declare(true, name, cfg)
	if isNew {
		p.indexTTL(s, true)
	}
	return &ttlMap{raw: p.MapState(name), s: s, ix: p}
}

func (p *Pebble) ttlNow() int64 { return p.ttl.ttlNow() }

func (p *Pebble) track(s *ttlState, isMap bool, userKey []byte, exp int64) {
	// An entry already stored is filed already: the sweep that reaches
	// its reference finds it alive and files it again under its expiry
	// then. So each entry has one reference, however often it is
	// written, and the index stays the size of the state.
	if isMap {
		p.ttl.buf = encodeMapKey(p.ttl.buf, p.kg, s.name, p.key, userKey)
	} else {
		p.ttl.buf = encodeKey(p.ttl.buf, p.kg, s.name, p.key)
	}
	if p.has(p.ttl.buf) {
		return
	}
	d := s.deadline(exp)
	p.ttl.buf = encodeTTLIndex(p.ttl.buf, p.kg, s.index, d, p.key, userKey)
	p.set(p.ttl.buf, nil)
	p.ttl.next = min(p.ttl.next, d)
}

// NextExpiry implements Backend.
func (p *Pebble) NextExpiry() int64 {
	if len(p.ttl.values)+len(p.ttl.maps) == 0 || p.ttl.next == math.MaxInt64 {
		return 0
	}
	return max(p.ttl.next, 1) // 0 after a declaration: a sweep is due
}

// indexTTL makes sure the index of a newly declared state is complete:
// a store restored from a canonical snapshot (or copied from another
// subtask's native one) has entries but no index, which one pass over the
// state's entries writes, once.
func (p *Pebble) indexTTL(s *ttlState, isMap bool) {
	p.ttl.next = 0
	kgs := p.cfg.KeyGroups
	if kgs.End < kgs.Start {
		return
	}
	index := s.index
	p.usable()
	defer p.catch("index TTL state")
	var prefix, ik []byte
	for kg := kgs.Start; kg <= kgs.End; kg++ {
		// Key groups restored from a native snapshot kept their index;
		// those copied from another state (after a rescale) have none.
		if _, ok := p.get(encodeKey(nil, kg, index, nil)); ok {
			continue
		}
		if isMap {
			prefix = encodeMapName(prefix, kg, s.name)
		} else {
			prefix = encodeKey(prefix, kg, s.name, nil)
		}
		p.indexSpan(prefix, s, kg, index, &ik)
		p.set(encodeKey(nil, kg, index, nil), nil)
	}
}

// indexSpan files every entry of one key group's span of state s.
func (p *Pebble) indexSpan(prefix []byte, s *ttlState, kg int, index string, ik *[]byte) {
	it := p.iter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	closed := false
	defer func() {
		if !closed {
			it.Close() // an entry without an expiry header panicked
		}
	}()
	for valid := it.First(); valid; valid = it.Next() {
		_, e, ok := decodeKey(it.Key())
		if !ok || e.state != s.name {
			continue
		}
		exp, _ := expiryOf(s.name, it.Value())
		*ik = encodeTTLIndex(*ik, kg, index, s.deadline(exp), e.key, e.userKey)
		p.set(*ik, nil)
	}
	closed = true
	p.closeIter(it)
}

// AdvanceTime implements Backend: it sets the clock TTL states read and,
// once the earliest deadline passed, deletes up to ttlSweepBatch due
// entries, seeking to each owned key group's due span of each TTL state.
func (p *Pebble) AdvanceTime(now int64) (next int64) {
	p.ttl.now = now
	if len(p.ttl.values)+len(p.ttl.maps) == 0 {
		return 0
	}
	if p.ttl.next > now {
		if p.ttl.next == math.MaxInt64 {
			return 0
		}
		return p.ttl.next
	}
	p.usable()
	defer p.catch("expire TTL state")
	kgs := p.cfg.KeyGroups
	budget := ttlSweepBatch
	next = math.MaxInt64
	it := p.iter(p.ownedSpan())
	closed := false
	defer func() {
		if !closed {
			it.Close() // a store failure panicked
		}
	}()
	var marker, lower, upper, pk, ik []byte
	sweep := func(isMap bool, s *ttlState) {
		index := s.index
		for kg := kgs.Start; kg <= kgs.End; kg++ {
			marker = encodeKey(marker, kg, index, nil)
			lower = append(append(lower[:0], marker...), 0)
			upper = binary.BigEndian.AppendUint64(append(upper[:0], marker...), uint64(now)+1)
			valid := it.SeekGE(lower)
			for ; valid && bytes.Compare(it.Key(), upper) < 0; valid = it.Next() {
				if budget == 0 {
					break
				}
				budget--
				k := it.Key()[len(marker):]
				if len(k) < 12 {
					continue
				}
				kl := int(binary.BigEndian.Uint32(k[8:12]))
				if len(k) < 12+kl {
					continue
				}
				key, uk := k[12:12+kl], k[12+kl:]
				if isMap {
					pk = encodeMapKey(pk, kg, s.name, key, uk)
				} else {
					pk = encodeKey(pk, kg, s.name, key)
				}
				if v, ok := p.get(pk); ok {
					exp, _ := expiryOf(s.name, v)
					if exp <= now {
						p.del(pk)
					} else {
						// Written again since it was filed: filed
						// again, under its expiry now.
						d := s.deadline(exp)
						ik = encodeTTLIndex(ik, kg, index, d, key, uk)
						p.set(ik, nil)
						next = min(next, d)
					}
				}
				p.del(it.Key())
			}
			// The first entry not swept: due now if the budget ran out,
			// else its deadline is still ahead.
			if valid && bytes.HasPrefix(it.Key(), marker) {
				if k := it.Key()[len(marker):]; len(k) >= 8 {
					next = min(next, int64(binary.BigEndian.Uint64(k)))
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.ttl.values)) {
		sweep(false, p.ttl.values[name])
	}
	for _, name := range slices.Sorted(maps.Keys(p.ttl.maps)) {
		sweep(true, p.ttl.maps[name])
	}
	closed = true
	p.closeIter(it)
	if budget == 0 {
		next = now
	}
	p.ttl.next = next
	if next == math.MaxInt64 {
		return 0
	}
	return next
}

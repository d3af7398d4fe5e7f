package state

import (
	"slices"

	"github.com/weirproject/weir/sdk"
)

// heapTTL is the heap's expiry index: for each bucket deadline, the
// entries written with an expiry in that bucket. A key written again in
// the same bucket is filed once; in a later bucket, it is filed there too,
// and the sweep of the earlier one finds it not expired and drops only
// the reference.
type heapTTL struct {
	ttlStates
	buckets   map[int64]map[ttlRef]struct{}
	deadlines []int64 // the buckets' deadlines, ascending
}

type ttlRef struct {
	s          *ttlState
	isMap      bool
	key, userK string
}

// ValueStateTTL implements Backend.
func (h *Heap) ValueStateTTL(name string, cfg sdk.StateTTL) sdk.ValueState {
	s, isNew := h.ttl.declare(false, name, cfg)
	raw := h.ValueState(name).(*valueState)
	if isNew {
		// Restored entries: filed under their expiry from the header
		// each carries.
		for k, c := range raw.m {
			exp, _ := expiryOf(name, c.b)
			h.file(ttlRef{s: s, key: k}, exp)
		}
	}
	return &ttlValue{raw: raw, s: s, ix: h}
}

// MapStateTTL implements Backend.
func (h *Heap) MapStateTTL(name string, cfg sdk.StateTTL) sdk.MapState {
	s, isNew := h.ttl.declare(true, name, cfg)
	raw := h.MapState(name).(*mapState)
	if isNew {
		for k, c := range raw.m {
			for uk, b := range c.m {
				exp, _ := expiryOf(name, b)
				h.file(ttlRef{s: s, isMap: true, key: k, userK: uk}, exp)
			}
		}
	}
	return &ttlMap{raw: raw, s: s, ix: h}
}

func (h *Heap) ttlNow() int64 { return h.ttl.ttlNow() }

func (h *Heap) track(s *ttlState, isMap bool, userKey []byte, exp int64) {
	if isMap {
		if c := h.maps[s.name][h.currentKey]; c != nil {
			if _, ok := c.m[string(userKey)]; ok {
				return // filed already
			}
		}
	} else if _, ok := h.values[s.name][h.currentKey]; ok {
		return
	}
	h.file(ttlRef{s: s, isMap: isMap, key: h.currentKey, userK: string(userKey)}, exp)
}

// NextExpiry implements Backend.
func (h *Heap) NextExpiry() int64 {
	if len(h.ttl.deadlines) == 0 {
		return 0
	}
	return h.ttl.deadlines[0]
}

func (h *Heap) file(r ttlRef, exp int64) {
	d := r.s.deadline(exp)
	b := h.ttl.buckets[d]
	if b == nil {
		if h.ttl.buckets == nil {
			h.ttl.buckets = map[int64]map[ttlRef]struct{}{}
		}
		b = map[ttlRef]struct{}{}
		h.ttl.buckets[d] = b
		i, _ := slices.BinarySearch(h.ttl.deadlines, d)
		h.ttl.deadlines = slices.Insert(h.ttl.deadlines, i, d)
	}
	b[r] = struct{}{}
}

// AdvanceTime implements Backend: it sets the clock TTL states read and
// deletes up to ttlSweepBatch entries of the buckets whose time passed.
func (h *Heap) AdvanceTime(now int64) (next int64) {
	h.ttl.now = now
	budget := ttlSweepBatch
	for len(h.ttl.deadlines) > 0 && h.ttl.deadlines[0] <= now && budget > 0 {
		d := h.ttl.deadlines[0]
		b := h.ttl.buckets[d]
		for r := range b {
			if budget == 0 {
				break
			}
			budget--
			delete(b, r)
			h.expire(r, now)
		}
		if len(b) == 0 {
			delete(h.ttl.buckets, d)
			h.ttl.deadlines = h.ttl.deadlines[1:]
		}
	}
	if len(h.ttl.deadlines) == 0 {
		return 0
	}
	return h.ttl.deadlines[0]
}

// expire deletes r's entry if it is due, and files it again under its
// expiry if a write since has moved that on.
func (h *Heap) expire(r ttlRef, now int64) {
	if !r.isMap {
		m := h.values[r.s.name]
		if c := m[r.key]; c != nil {
			if exp, _ := expiryOf(r.s.name, c.b); exp <= now {
				delete(m, r.key)
			} else {
				h.file(r, exp)
			}
		}
		return
	}
	c := h.maps[r.s.name][r.key]
	if c == nil {
		return
	}
	if b, ok := c.m[r.userK]; ok {
		exp, _ := expiryOf(r.s.name, b)
		if exp > now {
			h.file(r, exp)
			return
		}
		saved := h.currentKey
		h.currentKey = r.key
		(&mapState{h: h, m: h.maps[r.s.name]}).Remove([]byte(r.userK))
		h.currentKey = saved
	}
}

// ttlNames are the TTL states a snapshot leaves expired entries out of.
func (h *Heap) ttlNames() (values, maps map[string]bool) {
	if len(h.ttl.values)+len(h.ttl.maps) == 0 {
		return nil, nil
	}
	values, maps = map[string]bool{}, map[string]bool{}
	for n := range h.ttl.values {
		values[n] = true
	}
	for n := range h.ttl.maps {
		maps[n] = true
	}
	return values, maps
}

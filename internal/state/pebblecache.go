package state

// writeCache sits in front of the Pebble store and holds recently used
// entries in memory, writing changes back in batches. A window operator
// reads, changes and writes the same accumulator for every record: without
// the cache each of those is a Pebble get (a memtable and SST search) and
// a Pebble set (a memtable insert); with it they are map lookups, and the
// store sees one write per key per write-back instead of one per record.
// An entry created and deleted between write-backs (a window that fires
// before the next checkpoint) never reaches the store at all.
//
// Dirty entries are written back before anything reads the store past the
// cache: an iterator (iteration sees the store as it was when it began,
// which includes every write made before it), a snapshot, and when the
// cache outgrows its budget. Only the subtask's goroutine touches it, as
// with the rest of the backend.
type writeCache struct {
	budget int64
	bytes  int64
	m      map[string]cacheEntry
	// dirty are the keys of entries changed since the last write-back,
	// so a write-back costs what changed, not the cache's size. A key may
	// appear once only: it is added when its entry turns dirty.
	dirty []string
}

type cacheEntry struct {
	val []byte
	// present: the key has val; otherwise it is known to have no value.
	present bool
	// dirty: the store does not hold this entry yet.
	dirty bool
	// stored: the store may hold a value for the key, so a delete must
	// reach it. A key found absent and then written and deleted between
	// write-backs never touches the store.
	stored bool
}

// cacheEntryOverhead approximates the map's bookkeeping per entry.
const cacheEntryOverhead = 64

func (e cacheEntry) size(k string) int64 { return int64(len(k) + cap(e.val) + cacheEntryOverhead) }

// DefaultStateCacheBytes is the Pebble backend's write-back cache per
// subtask when Config.CacheBytes is 0.
const DefaultStateCacheBytes = 32 << 20

func newWriteCache(budget int) *writeCache {
	if budget < 0 {
		return nil
	}
	if budget == 0 {
		budget = DefaultStateCacheBytes
	}
	return &writeCache{budget: int64(budget), m: map[string]cacheEntry{}}
}

// lookup reads k through the cache; the value is the cache's (or the
// store's copy), not to be changed or kept by the caller.
func (p *Pebble) lookup(k []byte) ([]byte, bool) {
	p.usable()
	c := p.cache
	if c != nil {
		if e, ok := c.m[string(k)]; ok {
			return e.val, e.present
		}
	}
	v, ok := p.storeGet(k)
	if c != nil {
		p.cachePut(k, cacheEntry{val: v, present: ok, stored: ok})
	}
	return v, ok
}

// get reads a key; the value is the caller's.
func (p *Pebble) get(k []byte) ([]byte, bool) {
	v, ok := p.lookup(k)
	if !ok {
		return nil, false
	}
	out := make([]byte, len(v))
	copy(out, v)
	return out, true
}

// has says whether a key holds a value.
func (p *Pebble) has(k []byte) bool {
	_, ok := p.lookup(k)
	return ok
}

// set writes k = v; v stays the caller's.
func (p *Pebble) set(k, v []byte) {
	p.usable()
	c := p.cache
	if c == nil {
		p.storeSet(k, v)
		return
	}
	e, ok := c.m[string(k)]
	if !ok {
		// Unknown: the store may hold the key.
		e.stored = true
	}
	p.cacheWrite(k, e, ok, append(e.val[:0], v...), true)
}

// del deletes k.
func (p *Pebble) del(k []byte) {
	p.usable()
	c := p.cache
	if c == nil {
		p.storeDel(k)
		return
	}
	e, ok := c.m[string(k)]
	if !ok {
		e.stored = true
	}
	p.cacheWrite(k, e, ok, e.val[:0], false)
}

// cacheWrite gives k's entry e (found: it was cached) the value val
// (present) or none, dirty unless the store needs no change.
func (p *Pebble) cacheWrite(k []byte, e cacheEntry, found bool, val []byte, present bool) {
	c := p.cache
	if found {
		c.bytes -= e.size(string(k))
	}
	wasDirty := found && e.dirty
	e.val, e.present = val, present
	// A delete of a key the store cannot hold is nothing to write back.
	e.dirty = present || e.stored
	ks := string(k)
	c.m[ks] = e
	c.bytes += e.size(ks)
	if e.dirty && !wasDirty {
		c.dirty = append(c.dirty, ks)
	}
	if c.bytes > c.budget {
		p.evict()
	}
}

// cachePut caches an entry read from the store.
func (p *Pebble) cachePut(k []byte, e cacheEntry) {
	c := p.cache
	ks := string(k)
	c.m[ks] = e
	c.bytes += e.size(ks)
	if c.bytes > c.budget {
		p.evict()
	}
}

// writeBack writes every dirty entry to the store in one batch.
func (p *Pebble) writeBack() {
	c := p.cache
	if c == nil || len(c.dirty) == 0 {
		return
	}
	p.usable()
	defer p.catch("write back")
	b := p.db.NewBatch()
	defer b.Close()
	for _, ks := range c.dirty {
		e, ok := c.m[ks]
		if !ok || !e.dirty {
			continue
		}
		if e.present {
			p.must("write back", b.Set([]byte(ks), e.val, nil))
		} else {
			p.must("write back", b.Delete([]byte(ks), nil))
		}
		e.dirty, e.stored = false, e.present
		c.m[ks] = e
	}
	clear(c.dirty)
	c.dirty = c.dirty[:0]
	p.must("write back", b.Commit(p.wo))
}

// evict writes back and then drops entries until the cache is at half
// its budget. Map iteration starts at a random entry, which makes this a
// random eviction: hot keys are read back at once, cold ones are not.
func (p *Pebble) evict() {
	p.writeBack()
	c := p.cache
	for ks, e := range c.m {
		if c.bytes <= c.budget/2 {
			break
		}
		c.bytes -= e.size(ks)
		delete(c.m, ks)
	}
}

// dropCache forgets every cached entry: the store is about to change
// underneath it (a restore). Dirty entries are written back first.
func (p *Pebble) dropCache() {
	if p.cache == nil {
		return
	}
	p.writeBack()
	clear(p.cache.m)
	p.cache.bytes = 0
}

package state

// writeCache sits in front of the Pebble store and holds recently used
// entries in memory, writing changes back in batches. A window operator
// reads, changes and writes the same accumulator for every record: without
// the cache each of those is a Pebble get (a memtable and SST search) and
// a Pebble set (a memtable insert); with it they are map lookups, and the
// store sees one write per key per write-back instead of one per record.
// A key read as absent, then created and deleted between write-backs (a
// window that fires before the next checkpoint), never reaches the store.
//
// Dirty entries are written back before anything reads the store past the
// cache: an iterator (iteration sees the store as it was when it began,
// which includes every write made before it), a snapshot, and when the
// cache outgrows its budget. Only the subtask's goroutine touches it, as
// with the rest of the backend.
type writeCache struct {
	budget int64
	bytes  int64
	m      map[string]*cacheEntry
	// dirty are the keys of entries changed since the last write-back,
	// so a write-back costs what changed, not the cache's size; an entry
	// is queued at most once (cacheEntry.queued).
	dirty []string
}

type cacheEntry struct {
	val []byte
	// present: the key has val; otherwise it is known to have no value.
	present bool
	// dirty: the store does not hold this entry yet.
	dirty bool
	// queued: the key is in writeCache.dirty.
	queued bool
	// stored: the store may hold a value for the key, so a delete must
	// reach it. A key found absent and then written and deleted between
	// write-backs never touches the store.
	stored bool
}

// cacheEntryOverhead approximates the map's and the entry's bookkeeping.
const cacheEntryOverhead = 96

func (e *cacheEntry) size(k string) int64 { return int64(len(k) + cap(e.val) + cacheEntryOverhead) }

// DefaultStateCacheBytes is the Pebble backend's write-back cache per
// subtask when Config.CacheBytes is 0.
const DefaultStateCacheBytes = 32 << 20

// writeBackBatch bounds one batch of a write-back: a budget of any size
// writes back in batches Pebble takes.
const writeBackBatch = 4 << 20

func newWriteCache(budget int) *writeCache {
	if budget < 0 {
		return nil
	}
	if budget == 0 {
		budget = DefaultStateCacheBytes
	}
	return &writeCache{budget: int64(budget), m: map[string]*cacheEntry{}}
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
		ks := string(k)
		e := &cacheEntry{val: v, present: ok, stored: ok}
		c.m[ks] = e
		c.bytes += e.size(ks)
		p.maybeEvict()
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
	if p.cache == nil {
		p.storeSet(k, v)
		return
	}
	e := p.entry(k)
	p.write(k, e, append(e.val[:0], v...), true)
}

// del deletes k.
func (p *Pebble) del(k []byte) {
	p.usable()
	if p.cache == nil {
		p.storeDel(k)
		return
	}
	e := p.entry(k)
	p.write(k, e, e.val[:0], false)
}

// entry is k's cache entry, a new one if the cache does not hold k: the
// store may hold it, as far as the cache knows.
func (p *Pebble) entry(k []byte) *cacheEntry {
	c := p.cache
	if e, ok := c.m[string(k)]; ok {
		c.bytes -= e.size(string(k))
		return e
	}
	e := &cacheEntry{stored: true}
	c.m[string(k)] = e
	return e
}

// write gives e, k's entry (taken out of the byte count by entry), the
// value val (present) or none, dirty unless the store needs no change.
func (p *Pebble) write(k []byte, e *cacheEntry, val []byte, present bool) {
	c := p.cache
	e.val, e.present = val, present
	// A delete of a key the store cannot hold is nothing to write back.
	e.dirty = present || e.stored
	if e.dirty && !e.queued {
		e.queued = true
		c.dirty = append(c.dirty, string(k))
	}
	c.bytes += e.size(string(k))
	p.maybeEvict()
}

// writeBack writes every dirty entry to the store, in batches of at most
// writeBackBatch bytes. An entry is clean once its batch committed; a
// failed commit fails the store, so nothing reads a cached entry again.
func (p *Pebble) writeBack() {
	c := p.cache
	if c == nil || len(c.dirty) == 0 {
		return
	}
	p.usable()
	defer p.catch("write back")
	b := p.db.NewBatch()
	defer func() { b.Close() }()
	var pending []*cacheEntry
	commit := func() {
		p.must("write back", b.Commit(p.wo))
		for _, e := range pending {
			e.dirty, e.stored = false, e.present
		}
		pending = pending[:0]
		b.Close()
		b = p.db.NewBatch()
	}
	for _, ks := range c.dirty {
		e, ok := c.m[ks]
		if !ok {
			continue
		}
		e.queued = false
		if !e.dirty {
			continue
		}
		if e.present {
			p.must("write back", b.Set([]byte(ks), e.val, nil))
		} else {
			p.must("write back", b.Delete([]byte(ks), nil))
		}
		pending = append(pending, e)
		if b.Len() >= writeBackBatch {
			commit()
		}
	}
	commit()
	clear(c.dirty)
	c.dirty = c.dirty[:0]
}

// maybeEvict writes back and then keeps entries up to half the budget,
// once the cache is over budget. Map iteration starts at a random entry,
// which makes this a random eviction: hot keys are read back at once,
// cold ones are not. The kept entries go into a new map: deleting half of
// a map's entries leaves tombstones that lengthen every later lookup's
// probe.
func (p *Pebble) maybeEvict() {
	c := p.cache
	if c.bytes <= c.budget {
		return
	}
	p.writeBack()
	kept := make(map[string]*cacheEntry, len(c.m)/2)
	var bytes int64
	for ks, e := range c.m {
		n := e.size(ks)
		if bytes+n > c.budget/2 {
			break
		}
		kept[ks] = e
		bytes += n
	}
	c.m, c.bytes = kept, bytes
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

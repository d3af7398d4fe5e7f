package state

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// MigrateState implements Backend: every value of the named state, of
// every key, becomes f's result.
func (h *Heap) MigrateState(name string, isMap bool, f func([]byte) ([]byte, error)) error {
	if !isMap {
		for k, c := range h.values[name] {
			v, err := f(c.b)
			if err != nil {
				return fmt.Errorf("state: migrate %q, key %q: %w", name, k, err)
			}
			// A new slice: a snapshot being written may share the old.
			c.b, c.gen = v, 0
		}
		return nil
	}
	for k, c := range h.maps[name] {
		c.writable(h.gen)
		for uk, b := range c.m {
			v, err := f(b)
			if err != nil {
				return fmt.Errorf("state: migrate %q, key %q: %w", name, k, err)
			}
			c.m[uk] = v
		}
	}
	return nil
}

// MigrateState implements Backend, one key group's span at a time, in
// batches.
func (p *Pebble) MigrateState(name string, isMap bool, f func([]byte) ([]byte, error)) (err error) {
	checkName(name)
	defer storeErrorAs(&err)
	p.usable()
	kgs := p.cfg.KeyGroups
	var prefix []byte
	for kg := kgs.Start; kg <= kgs.End; kg++ {
		if isMap {
			prefix = encodeMapName(prefix, kg, name)
		} else {
			prefix = encodeKey(prefix, kg, name, nil)
		}
		// Written through the cache, which writes back in batches as
		// it fills; the iterator does not see the new values.
		it := p.iter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
		for valid := it.First(); valid; valid = it.Next() {
			v, ferr := f(it.Value())
			if ferr != nil {
				p.closeIter(it)
				return fmt.Errorf("state: migrate %q, key group %d: %w", name, kg, ferr)
			}
			p.set(it.Key(), v)
		}
		p.closeIter(it)
	}
	return nil
}

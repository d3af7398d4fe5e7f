// Command map-state is a taskmanager with an operator built on map and
// reducing keyed state: per key, it counts how often each distinct value
// was seen (a map from value to count) and keeps the largest value (a
// reducing state), and emits "<distinct>,<max>" for every record. Both
// states are checkpointed, restored and rescaled like value state, on the
// heap and the Pebble backend alike.
//
//	go build -o bin/map-state-taskmanager ./examples/map-state
package main

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/weirproject/weir/sdk"
	"github.com/weirproject/weir/worker"
)

// Distinct counts distinct values per key.
type Distinct struct {
	seen sdk.MapState      // value → times seen
	max  sdk.ReducingState // largest value, 8 bytes big endian
}

// maxOf keeps the larger of two big-endian int64s; it returns one of its
// arguments, never changing either.
func maxOf(acc, v []byte) []byte {
	if int64(binary.BigEndian.Uint64(v)) > int64(binary.BigEndian.Uint64(acc)) {
		return v
	}
	return acc
}

func (d *Distinct) Open(ctx sdk.Context) error {
	d.seen = ctx.MapState("seen")
	d.max = ctx.ReducingState("max", maxOf)
	return nil
}

func (d *Distinct) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	v, err := strconv.ParseInt(string(r.Value), 10, 64)
	if err != nil {
		return fmt.Errorf("distinct: value of key %q: %w", r.Key, err)
	}
	var n uint64
	if c, ok := d.seen.Get(r.Value); ok {
		n = binary.BigEndian.Uint64(c)
	}
	d.seen.Put(r.Value, binary.BigEndian.AppendUint64(nil, n+1))
	d.max.Add(binary.BigEndian.AppendUint64(nil, uint64(v)))
	distinct := 0
	for range d.seen.All() {
		distinct++
	}
	m, _ := d.max.Get()
	out.Collect(sdk.Record{Key: r.Key, Value: fmt.Appendf(nil, "%d,%d", distinct, int64(binary.BigEndian.Uint64(m))), Timestamp: r.Timestamp})
	return nil
}

func (d *Distinct) Close() error { return nil }

func main() {
	reg := sdk.NewRegistry()
	reg.RegisterOperator("distinct", func() sdk.Operator { return &Distinct{} })
	worker.Main(reg)
}

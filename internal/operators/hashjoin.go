package operators

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"

	"github.com/weirproject/weir/internal/window"
	"github.com/weirproject/weir/sdk"
)

// HashJoin is a regular join, SQL's inner equi-join without a time bound
// (Flink's streaming join of two append-only inputs): input 0 is the left
// side, input 1 the right, both keyed by the equality columns. A record is
// paired with every record of its key the other side has had so far, then
// kept: each pair is emitted once, when the later of its two records
// arrives, at max(l.ts, r.ts). No record is late: the join has no windows,
// so the watermark decides nothing.
//
// Nothing is ever removed, as the inputs retract nothing and any record
// may join one still to come: its state grows with its inputs, without
// bound, which the SQL planner says when it plans one.
type HashJoin struct {
	// Pair is set by the SQL operators; nil joins values as "l|r".
	Pair Pairer

	// sides are the left and right records of the key: window.TimeKey of
	// the timestamp then the value → how many such records came (a
	// uvarint), so that a record costs one entry whatever else arrived at
	// its timestamp, and the pairs come out in time order.
	sides [2]sdk.MapState
	buf   []byte
}

func (j *HashJoin) Open(ctx sdk.Context) error {
	if j.Pair == nil {
		j.Pair = joinValues
	}
	j.sides = [2]sdk.MapState{ctx.MapState("left"), ctx.MapState("right")}
	return nil
}

func (j *HashJoin) Close() error { return nil }

func (j *HashJoin) ProcessRecord(sdk.Record, sdk.Collector) error {
	return errors.New("hash-join: records must come through ProcessInput, which tells the left input from the right")
}

func (j *HashJoin) ProcessInput(input int, r sdk.Record, out sdk.Collector) error {
	if input != leftInput && input != rightInput {
		return fmt.Errorf("hash-join: record from input %d; a join reads input 0 (left) and 1 (right)", input)
	}
	for k, b := range entries(j.sides[1-input]) {
		ts, v, n, err := parseHashJoinEntry(k, b)
		if err != nil {
			return fmt.Errorf("hash-join: state of key %q: %w", r.Key, err)
		}
		lv, rv := r.Value, v
		if input == rightInput {
			lv, rv = v, r.Value
		}
		for range n {
			if err := emitPair(j.Pair, out, r.Key, lv, rv, max(r.Timestamp, ts)); err != nil {
				return fmt.Errorf("hash-join: %w", err)
			}
		}
	}
	j.buf = append(window.TimeKey(j.buf[:0], r.Timestamp), r.Value...)
	side := j.sides[input]
	var n uint64
	if b, ok := side.Get(j.buf); ok {
		var k int
		if n, k = binary.Uvarint(b); k <= 0 {
			return fmt.Errorf("hash-join: state of key %q: corrupt count", r.Key)
		}
	}
	// The count goes after the user key in the same buffer, which the
	// state copies.
	key := len(j.buf)
	j.buf = binary.AppendUvarint(j.buf, n+1)
	side.Put(j.buf[:key], j.buf[key:])
	return nil
}

// ascender is a map state that iterates from a user key on (both
// backends are), the heap's lending its slices instead of copying them.
type ascender interface {
	Ascend(from []byte) iter.Seq2[[]byte, []byte]
}

// entries iterates m's entries in order, as All does, without copies
// where m lends them: the join only reads a record while it pairs it.
func entries(m sdk.MapState) iter.Seq2[[]byte, []byte] {
	if a, ok := m.(ascender); ok {
		return a.Ascend(nil)
	}
	return m.All()
}

// parseHashJoinEntry reads one record of a side: its timestamp, its value
// (aliasing k) and how many times it came.
func parseHashJoinEntry(k, b []byte) (ts int64, v []byte, n uint64, err error) {
	if len(k) < 8 {
		return 0, nil, 0, fmt.Errorf("corrupt entry (%d bytes)", len(k))
	}
	if ts, err = window.ParseTimeKey(k[:8]); err != nil {
		return 0, nil, 0, err
	}
	n, c := binary.Uvarint(b)
	if c <= 0 {
		return 0, nil, 0, errors.New("corrupt count")
	}
	return ts, k[8:], n, nil
}

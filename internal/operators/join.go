package operators

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"

	"github.com/weirproject/weir/internal/window"
	"github.com/weirproject/weir/sdk"
)

// The inputs of a join, by their index in the vertex's inputs list.
const (
	leftInput  = 0
	rightInput = 1
)

// IntervalJoin is Flink's interval join (KeyedStream.intervalJoin()
// .between(lower, upper)) on event time: input 0 is the left side, input
// 1 the right, both keyed. A left record l and a right record r of the
// same key join when l.ts + lower <= r.ts <= l.ts + upper, both ends
// inclusive, and the pair is emitted once, when the later of the two
// arrives: key, value "<left value>|<right value>", timestamp
// max(l.ts, r.ts).
//
// Each side is buffered in keyed map state by timestamp until the
// watermark passes the last time a record of the other side could still
// join it: l.ts + upper for a left record, r.ts − lower for a right one.
// A record at or behind the watermark is late and goes to EmitLate, as
// Flink drops it.
type IntervalJoin struct {
	// Spec and Pair are set by the Go API; the built-in operator reads
	// its spec from its configuration and joins values as "l|r".
	Spec *window.IntervalJoinSpec
	Pair Pairer

	spec   window.IntervalJoinSpec
	ctx    sdk.Context
	timers sdk.TimerService
	// sides are the left and right buffers: window.TimeKey of a
	// timestamp → the values of the key's records at that timestamp.
	sides [2]sdk.MapState
	buf   []byte
}

// sideNS are the namespaces of the left and right buffers' clean-up
// timers.
var sideNS = [2][]byte{[]byte("l"), []byte("r")}

func (j *IntervalJoin) Open(ctx sdk.Context) error {
	if j.Spec != nil {
		j.spec = *j.Spec
	} else {
		spec, err := window.ParseIntervalJoin(ctx.Config())
		if err != nil {
			return fmt.Errorf("interval-join: %w", err)
		}
		j.spec = spec
	}
	j.ctx = ctx
	j.timers, j.sides = openJoin(ctx, &j.Pair)
	return nil
}

func (j *IntervalJoin) Close() error { return nil }

func (j *IntervalJoin) ProcessRecord(sdk.Record, sdk.Collector) error {
	return errors.New("interval-join: records must come through ProcessInput, which tells the left input from the right")
}

// reach is how far past a record's timestamp the records of the other
// side that join it go: ts + reach is the last of them, and so the
// watermark from which on no record to come joins it.
func (j *IntervalJoin) reach(input int) int64 {
	if input == leftInput {
		return j.spec.Upper
	}
	return -j.spec.Lower
}

func (j *IntervalJoin) ProcessInput(input int, r sdk.Record, out sdk.Collector) error {
	if input != leftInput && input != rightInput {
		return fmt.Errorf("interval-join: record from input %d; a join reads input 0 (left) and 1 (right)", input)
	}
	wm := j.timers.CurrentWatermark()
	if isLate(r.Timestamp, wm) {
		j.ctx.EmitLate(r)
		return nil
	}
	// The buffer iterates in time order.
	last := satAdd(r.Timestamp, j.reach(input))
	for k, b := range j.sides[1-input].All() {
		ts, err := window.ParseTimeKey(k)
		if err != nil {
			return fmt.Errorf("interval-join: state of key %q: %w", r.Key, err)
		}
		if ts > last {
			break
		}
		lts, rts := r.Timestamp, ts
		if input == rightInput {
			lts, rts = ts, r.Timestamp
		}
		if !j.spec.Joins(lts, rts) {
			continue
		}
		for v, err := range bufferedValues(b) {
			if err != nil {
				return fmt.Errorf("interval-join: state of key %q at %d: %w", r.Key, ts, err)
			}
			lv, rv := r.Value, v
			if input == rightInput {
				lv, rv = v, r.Value
			}
			if err := emitPair(j.Pair, out, r.Key, lv, rv, max(lts, rts)); err != nil {
				return fmt.Errorf("interval-join: %w", err)
			}
		}
	}
	if isLate(last, wm) {
		// Every record of the other side that could still join r would be
		// late: buffering r would only hold state until the next timer.
		return nil
	}
	j.buf = appendBuffered(j.buf, j.sides[input], r.Timestamp, r.Value)
	j.timers.RegisterEventTimeTimer(sideNS[input], last)
	return nil
}

// OnTimer drops the records of one side that nothing that follows joins.
// The watermark reached the timer: records of the other side up to it
// are late, so a left record at t.Timestamp − upper (a right one at
// t.Timestamp + lower) joins no record to come. (Flink counts a record
// at the watermark as on time, yet cleans up at that watermark too, so
// such a record can miss a pair; here it is late.)
func (j *IntervalJoin) OnTimer(t sdk.Timer, _ sdk.Collector) error {
	input := -1
	for i, ns := range sideNS {
		if bytes.Equal(t.Namespace, ns) {
			input = i
		}
	}
	if input < 0 {
		return fmt.Errorf("interval-join: timer of key %q has an unknown namespace %q", t.Key, t.Namespace)
	}
	reach, side := j.reach(input), j.sides[input]
	if t.Timestamp != math.MinInt64 && t.Timestamp != math.MaxInt64 {
		j.buf = window.TimeKey(j.buf[:0], t.Timestamp-reach)
		side.Remove(j.buf)
		return nil
	}
	// A clean-up time that saturated is shared by several timestamps.
	var drop [][]byte
	for k := range side.All() {
		ts, err := window.ParseTimeKey(k)
		if err != nil {
			return fmt.Errorf("interval-join: state of key %q: %w", t.Key, err)
		}
		if satAdd(ts, reach) > t.Timestamp {
			break
		}
		drop = append(drop, k)
	}
	for _, k := range drop {
		side.Remove(k)
	}
	return nil
}

// WindowJoin is Flink's window join over tumbling event-time windows
// (DataStream.join().where().equalTo().window(TumblingEventTimeWindows)):
// input 0 is the left side, input 1 the right, both keyed. When the
// watermark passes the end of a window [start, end), every pair of a left
// and a right record of a key in it is emitted once: key, value
// "<left value>|<right value>", timestamp end − 1. Then the window's
// records are dropped. A record whose window fired already is late and
// goes to EmitLate.
type WindowJoin struct {
	// Spec and Pair are set by the Go API, as IntervalJoin's.
	Spec *window.WindowJoinSpec
	Pair Pairer

	spec   window.WindowJoinSpec
	ctx    sdk.Context
	timers sdk.TimerService
	// sides are the left and right buffers: each record its own entry,
	// at its timestamp's time key followed by a sequence number, so that
	// a window's records (all at its last millisecond when they are
	// windows' results) are no one entry that every record copies.
	// Entries of a time key alone, as IntervalJoin lays them out, are
	// read too.
	sides [2]sdk.MapState
	buf   []byte
	// seq numbers the entries; it starts anywhere (a random 64-bit
	// number), so that entries written before a restore, by this subtask
	// or another, are not overwritten.
	seq uint64
}

func (j *WindowJoin) Open(ctx sdk.Context) error {
	if j.Spec != nil {
		j.spec = *j.Spec
	} else {
		spec, err := window.ParseWindowJoin(ctx.Config())
		if err != nil {
			return fmt.Errorf("window-join: %w", err)
		}
		j.spec = spec
	}
	j.ctx = ctx
	j.timers, j.sides = openJoin(ctx, &j.Pair)
	j.seq = rand.Uint64()
	return nil
}

func (j *WindowJoin) Close() error { return nil }

func (j *WindowJoin) ProcessRecord(sdk.Record, sdk.Collector) error {
	return errors.New("window-join: records must come through ProcessInput, which tells the left input from the right")
}

// maxTimestamp is the last instant of the window holding ts; it saturates
// where the window would end past the int64 range.
func (j *WindowJoin) maxTimestamp(ts int64) int64 {
	size := j.spec.Size
	return satAdd(ts, size-1-((ts%size)+size)%size)
}

func (j *WindowJoin) ProcessInput(input int, r sdk.Record, _ sdk.Collector) error {
	if input != leftInput && input != rightInput {
		return fmt.Errorf("window-join: record from input %d; a join reads input 0 (left) and 1 (right)", input)
	}
	end := j.maxTimestamp(r.Timestamp)
	if isLate(end, j.timers.CurrentWatermark()) {
		j.ctx.EmitLate(r)
		return nil
	}
	j.buf = binary.BigEndian.AppendUint64(window.TimeKey(j.buf[:0], r.Timestamp), j.seq)
	j.seq++
	k := len(j.buf)
	j.buf = binary.AppendUvarint(j.buf, uint64(len(r.Value)))
	j.buf = append(j.buf, r.Value...)
	j.sides[input].Put(j.buf[:k], j.buf[k:])
	j.timers.RegisterEventTimeTimer(nil, end)
	return nil
}

// OnTimer fires the window ending at t.Timestamp + 1. Every buffered
// record up to t.Timestamp is in it: the windows before it fired in
// timestamp order and took their records with them, and no record joins
// a window that fired (it is late), so state and timers agree in every
// checkpoint.
func (j *WindowJoin) OnTimer(t sdk.Timer, out sdk.Collector) error {
	var (
		right     [][]byte
		dropLeft  [][]byte
		dropRight [][]byte
	)
	for k, b := range j.sides[rightInput].All() {
		ts, err := window.ParseTimeKey(k[:min(len(k), 8)])
		if err != nil {
			return fmt.Errorf("window-join: state of key %q: %w", t.Key, err)
		}
		if ts > t.Timestamp {
			break
		}
		dropRight = append(dropRight, k)
		for v, err := range bufferedValues(b) {
			if err != nil {
				return fmt.Errorf("window-join: state of key %q at %d: %w", t.Key, ts, err)
			}
			right = append(right, v)
		}
	}
	for k, b := range j.sides[leftInput].All() {
		ts, err := window.ParseTimeKey(k[:min(len(k), 8)])
		if err != nil {
			return fmt.Errorf("window-join: state of key %q: %w", t.Key, err)
		}
		if ts > t.Timestamp {
			break
		}
		dropLeft = append(dropLeft, k)
		for lv, err := range bufferedValues(b) {
			if err != nil {
				return fmt.Errorf("window-join: state of key %q at %d: %w", t.Key, ts, err)
			}
			for _, rv := range right {
				if err := emitPair(j.Pair, out, t.Key, lv, rv, t.Timestamp); err != nil {
					return fmt.Errorf("window-join: %w", err)
				}
			}
		}
	}
	for _, k := range dropLeft {
		j.sides[leftInput].Remove(k)
	}
	for _, k := range dropRight {
		j.sides[rightInput].Remove(k)
	}
	return nil
}

// isLate reports whether ts is at or behind the watermark wm: no record
// there follows, so a record there may have missed state already
// dropped. Nothing is late before the first watermark.
func isLate(ts, wm int64) bool {
	return wm != sdk.MinWatermark && ts <= wm
}

// satAdd is a + b, clamped to the int64 range: a record's timestamp is
// anything, and a clean-up time past the end of time fires at the end of
// the input rather than wrapping around to the start.
func satAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// appendBuffered adds v to the records buffered at ts in side, using
// scratch for the encoding, which it returns. A timestamp's values are
// one entry, each value prefixed by its length, so that records with the
// same timestamp share it and a clean-up removes them at once.
func appendBuffered(scratch []byte, side sdk.MapState, ts int64, v []byte) []byte {
	scratch = window.TimeKey(scratch[:0], ts)
	if b, ok := side.Get(scratch); ok {
		scratch = append(scratch, b...)
	}
	scratch = binary.AppendUvarint(scratch, uint64(len(v)))
	scratch = append(scratch, v...)
	side.Put(scratch[:8], scratch[8:])
	return scratch
}

// bufferedValues iterates the values of a buffer entry; the slices alias
// b.
func bufferedValues(b []byte) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for len(b) > 0 {
			n, k := binary.Uvarint(b)
			if k <= 0 || n > uint64(len(b)-k) {
				yield(nil, errors.New("corrupt join buffer entry"))
				return
			}
			if !yield(b[k:k+int(n)], nil) {
				return
			}
			b = b[k+int(n):]
		}
	}
}

// openJoin is what both joins open with: the timer service, the two
// sides' buffers, and the built-in pair ("l|r") unless the Go API gave
// one.
func openJoin(ctx sdk.Context, pair *Pairer) (sdk.TimerService, [2]sdk.MapState) {
	if *pair == nil {
		*pair = joinValues
	}
	return ctx.TimerService(), [2]sdk.MapState{ctx.MapState("left"), ctx.MapState("right")}
}

// Pairer makes the record a joined pair of values emits. It returns
// SkipPair for a pair that emits none.
type Pairer func(key, left, right []byte, ts int64) (sdk.Record, error)

// SkipPair, returned by a Pairer, says the pair emits no record: the part
// of a SQL join's condition that the keys' equality does not cover
// rejected it. It is no failure, and the join goes on.
var SkipPair = errors.New("operators: pair skipped")

// joinValues is the built-in joins' pair: the key, "<left>|<right>".
func joinValues(key, lv, rv []byte, ts int64) (sdk.Record, error) {
	v := make([]byte, 0, len(lv)+1+len(rv))
	v = append(append(append(v, lv...), '|'), rv...)
	return sdk.Record{Key: bytes.Clone(key), Value: v, Timestamp: ts}, nil
}

// emitPair sends one joined pair downstream.
func emitPair(pair Pairer, out sdk.Collector, key, lv, rv []byte, ts int64) error {
	r, err := pair(key, lv, rv, ts)
	if errors.Is(err, SkipPair) {
		return nil
	}
	if err != nil {
		return err
	}
	out.Collect(r)
	return nil
}

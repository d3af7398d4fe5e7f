package ops

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

// regularJoin is sql-join's regular join (plan.RegularJoin) when it is
// more than operators.HashJoin's append-only inner join: an input is a
// retract stream, the join is LEFT, RIGHT or FULL, or a state TTL drops
// idle keys (Flink's StreamingJoinOperator). Both inputs are keyed
// upstream by the equality columns, so keyed state is a join key's.
//
// Every input row adds (+I, +U; an append-only input's rows all do) or
// retracts (-U, -D) one copy of itself, and the join emits the change of
// its result that makes: +I for every pair, or row padded with NULLs,
// that starts to exist, and -D for every one that stops (a retract stream
// without a unique key), at the input record's timestamp. A pair's row is
// the left row's columns then the right row's; a row of an outer side
// that has no match in the other side pairs with NULLs for the other
// side's columns. Filter (the rest of the ON condition) decides which
// pairs of a key match; a padded row is emitted because there is no
// match, so it is not filtered. The projection makes the output of both.
// A retraction of a row the state does not hold (its key expired, say)
// is dropped.
//
// State, per join key:
//
//   - MapState "regular-left" and "regular-right": a side's rows, the
//     user key a row's encoding as it came (the record value after its
//     kind byte), the value a uvarint the row's multiplicity (adds minus
//     retractions) then, on an outer side (left of a LEFT join, right of
//     a RIGHT, both of a FULL), a uvarint its associations: how many
//     rows of the other side (with their multiplicities) it matches, the
//     same for each of its copies. A row whose associations are 0 is out
//     as its NULL-padded row.
//   - With a TTL, ValueState "regular-ttl": the byte rjMetaFormat, a
//     varint the last access and a varint the time of the pending
//     cleanup timer (0: none), ms of processing time.
//
// With a TTL, a key no record touched for that long is dropped, both
// sides at once and without a change emitted (Flink's state TTL): each
// key has at most one processing-time timer pending, at its last access
// plus the TTL when it was registered; on firing it drops the key when
// that long passed since the last access, and registers the next one
// otherwise. A key whose rows are all retracted has no state and no
// timer.
type regularJoin struct {
	// j is the Join whose codecs, condition, projection, pair row and
	// encoder this one uses.
	j         *Join
	changelog [2]bool
	outer     [2]bool
	ttl       int64
	// nl is the left row's width, where the pair row's right part begins.
	nl int

	sides    [2]sdk.MapState
	meta     sdk.ValueState
	peekMeta func() ([]byte, bool)
	timers   sdk.TimerService

	// in is the decoded input row, other a stored row of the other side.
	in, other row.Row
	buf       []byte
}

var (
	_ joinOperator       = (*regularJoin)(nil)
	_ sdk.TimerHandler   = (*regularJoin)(nil)
	_ sdk.PreBarrierHook = (*regularJoin)(nil)
	_ sdk.InputEnder     = (*regularJoin)(nil)
)

// rjMetaFormat begins the TTL's state value, so that a layout to come can
// tell itself from this one.
const rjMetaFormat = 1

// rjEntry is a stored row's value: its copies, and its associations on an
// outer side.
type rjEntry struct {
	count, assoc uint64
}

// rjMeta is a key's TTL bookkeeping: the last access and the pending
// cleanup timer's time (0: none).
type rjMeta struct {
	access, timer int64
}

var errCorruptJoin = errors.New("corrupt state")

// usesRegularJoin says whether a regular join p runs on regularJoin
// rather than operators.HashJoin.
func usesRegularJoin(p *plan.Join) bool {
	return p.Type != plan.InnerJoin || p.LeftChangelog || p.RightChangelog || p.TTL > 0
}

// newRegularJoin checks p, a regular join for j.
func newRegularJoin(j *Join, p *plan.Join) (*regularJoin, error) {
	rj := &regularJoin{j: j, changelog: [2]bool{p.LeftChangelog, p.RightChangelog}, ttl: p.TTL, nl: len(p.Left)}
	switch p.Type {
	case plan.InnerJoin:
	case plan.LeftJoin:
		rj.outer[leftSide] = true
	case plan.RightJoin:
		rj.outer[rightSide] = true
	case plan.FullJoin:
		rj.outer = [2]bool{true, true}
	default:
		return nil, fmt.Errorf("unknown join type %q: want inner (empty), %s, %s or %s", p.Type, plan.LeftJoin, plan.RightJoin, plan.FullJoin)
	}
	if p.TTL < 0 {
		return nil, fmt.Errorf("TTL %dms: want 0 (none) or more", p.TTL)
	}
	retracts := p.Type != plan.InnerJoin || p.LeftChangelog || p.RightChangelog
	if retracts && !p.Enc.Changelog && p.Enc.Sink == "" {
		return nil, errors.New("an outer join, or a join of a changelog, emits a changelog: its output encoding must be one (or a sink's changelog mode)")
	}
	return rj, nil
}

const (
	leftSide  = 0
	rightSide = 1
)

func (rj *regularJoin) Open(ctx sdk.Context) error {
	rj.sides = [2]sdk.MapState{ctx.MapState("regular-left"), ctx.MapState("regular-right")}
	if rj.ttl > 0 {
		rj.timers = ctx.TimerService()
		rj.meta = ctx.ValueState("regular-ttl")
		rj.peekMeta = topNPeek(rj.meta)
	}
	return nil
}

func (rj *regularJoin) Close() error { return nil }

func (rj *regularJoin) ProcessRecord(sdk.Record, sdk.Collector) error {
	return errors.New("sql-join: records must come through ProcessInput, which tells the left input from the right")
}

func (rj *regularJoin) ProcessInput(input int, r sdk.Record, out sdk.Collector) error {
	if input != leftSide && input != rightSide {
		return fmt.Errorf("sql-join: record from input %d; a join reads input 0 (left) and 1 (right)", input)
	}
	if err := rj.process(input, r, out); err != nil {
		return fmt.Errorf("sql-join: %w", err)
	}
	return nil
}

var sideNames = [2]string{"left", "right"}

func (rj *regularJoin) process(s int, r sdk.Record, out sdk.Collector) error {
	o := 1 - s
	kind, v := row.Insert, r.Value
	if rj.changelog[s] {
		var err error
		if kind, v, err = row.SplitKind(v); err != nil {
			return fmt.Errorf("%s row: %w", sideNames[s], err)
		}
	}
	var err error
	if rj.in, err = rj.codecs(s).Decode(v, rj.in); err != nil {
		return fmt.Errorf("%s row: %w", sideNames[s], err)
	}
	adds := kind.Adds()
	self, present, err := rj.entry(s, v)
	if err != nil {
		return fmt.Errorf("%s state of key %x: %w", sideNames[s], r.Key, err)
	}
	if !adds && !present {
		return nil // nothing to take back from (the key expired, say)
	}

	// The other side's rows of the key: the pairs the row makes or
	// unmakes, and the padded rows of the other side that go or come.
	var matches uint64
	others := false
	for k, b := range rj.sides[o].All() {
		others = true
		e, err := rj.parseEntry(o, b)
		if err != nil {
			return fmt.Errorf("%s state of key %x: %w", sideNames[o], r.Key, err)
		}
		if rj.other, err = rj.codecs(o).Decode(k, rj.other); err != nil {
			return fmt.Errorf("%s state of key %x: %w: %w", sideNames[o], r.Key, errCorruptJoin, err)
		}
		ok, err := rj.match(s)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		matches += e.count
		if !rj.outer[o] {
			for range e.count {
				if err := rj.emitPair(out, rjKind(adds), s, rj.in, rj.other, r.Timestamp); err != nil {
					return err
				}
			}
			continue
		}
		for range e.count {
			switch {
			case adds && e.assoc == 0:
				if err := rj.emitPair(out, row.Delete, o, rj.other, nil, r.Timestamp); err != nil {
					return err
				}
				if err := rj.emitPair(out, row.Insert, s, rj.in, rj.other, r.Timestamp); err != nil {
					return err
				}
			case adds:
				if err := rj.emitPair(out, row.Insert, s, rj.in, rj.other, r.Timestamp); err != nil {
					return err
				}
			default:
				if err := rj.emitPair(out, row.Delete, s, rj.in, rj.other, r.Timestamp); err != nil {
					return err
				}
				if e.assoc == 1 {
					if err := rj.emitPair(out, row.Insert, o, rj.other, nil, r.Timestamp); err != nil {
						return err
					}
				}
			}
		}
		switch {
		case adds:
			e.assoc++
		case e.assoc > 0:
			e.assoc--
		}
		rj.putEntry(o, k, e)
	}
	if rj.outer[s] && matches == 0 {
		if err := rj.emitPair(out, rjKind(adds), s, rj.in, nil, r.Timestamp); err != nil {
			return err
		}
	}

	// The row's own entry.
	if adds {
		self.count++
		self.assoc = matches
		rj.putEntry(s, v, self)
	} else if self.count--; self.count > 0 {
		rj.putEntry(s, v, self)
	} else {
		rj.sides[s].Remove(v)
	}
	if rj.ttl <= 0 {
		return nil
	}
	if self.count == 0 && !others && rj.sides[s].IsEmpty() {
		return rj.dropMeta(r.Key)
	}
	return rj.touch(r.Key)
}

// rjKind is the kind a join emits for a change that adds (+I) or
// retracts (-D).
func rjKind(adds bool) row.Kind {
	if adds {
		return row.Insert
	}
	return row.Delete
}

func (rj *regularJoin) codecs(side int) *row.Codec {
	if side == leftSide {
		return rj.j.left
	}
	return rj.j.right
}

// match fills the pair row with the input row of side s and the stored
// row rj.other, and reports whether the join condition accepts it.
func (rj *regularJoin) match(s int) (bool, error) {
	if rj.j.filter == nil {
		return true, nil
	}
	rj.fill(s, rj.in, rj.other)
	keep, err := rj.j.filter(rj.j.pair)
	if err != nil {
		return false, fmt.Errorf("join condition: %w", err)
	}
	return keep, nil
}

// fill puts x, a row of side s, and y, one of the other side (nil: all
// NULL), in the pair row.
func (rj *regularJoin) fill(s int, x, y row.Row) {
	l, r := rj.j.pair[:rj.nl], rj.j.pair[rj.nl:]
	if s == rightSide {
		l, r = r, l
	}
	copy(l, x)
	if y == nil {
		clear(r)
	} else {
		copy(r, y)
	}
}

// emitPair emits kind of the projection of x, a row of side s, paired
// with y, of the other side (nil: NULLs).
func (rj *regularJoin) emitPair(out sdk.Collector, kind row.Kind, s int, x, y row.Row, ts int64) error {
	rj.fill(s, x, y)
	res, err := rj.j.project.apply(rj.j.pair)
	if err != nil {
		return err
	}
	rj.j.enc.emit(out, kind, res, ts)
	return nil
}

// entry is the stored entry of row v of side s.
func (rj *regularJoin) entry(s int, v []byte) (rjEntry, bool, error) {
	b, ok := rj.sides[s].Get(v)
	if !ok {
		return rjEntry{}, false, nil
	}
	e, err := rj.parseEntry(s, b)
	return e, err == nil, err
}

func (rj *regularJoin) parseEntry(s int, b []byte) (rjEntry, error) {
	var e rjEntry
	n, k := binary.Uvarint(b)
	if k <= 0 || n == 0 {
		return e, fmt.Errorf("%w: a row's count", errCorruptJoin)
	}
	e.count, b = n, b[k:]
	if rj.outer[s] {
		if e.assoc, k = binary.Uvarint(b); k <= 0 {
			return e, fmt.Errorf("%w: a row's associations", errCorruptJoin)
		}
		b = b[k:]
	}
	if len(b) != 0 {
		return e, fmt.Errorf("%w: %d bytes after a row's entry", errCorruptJoin, len(b))
	}
	return e, nil
}

func (rj *regularJoin) putEntry(s int, k []byte, e rjEntry) {
	rj.buf = binary.AppendUvarint(rj.buf[:0], e.count)
	if rj.outer[s] {
		rj.buf = binary.AppendUvarint(rj.buf, e.assoc)
	}
	rj.sides[s].Put(k, rj.buf)
}

// touch records an access to the key, and makes sure a cleanup timer is
// pending for it.
func (rj *regularJoin) touch(key []byte) error {
	var h rjMeta
	b, ok := rj.peekMeta()
	if ok {
		var err error
		if h, err = parseRJMeta(b); err != nil {
			return fmt.Errorf("TTL state of key %x: %w", key, err)
		}
	}
	now := rj.timers.CurrentProcessingTime()
	changed := !ok || h.access != now
	h.access = now
	if h.timer == 0 {
		h.timer = now + rj.ttl
		rj.timers.RegisterProcessingTimeTimer(nil, h.timer)
		changed = true
	}
	if changed {
		rj.buf = appendRJMeta(rj.buf[:0], h)
		rj.meta.Update(rj.buf)
	}
	return nil
}

// dropMeta drops the TTL's state of a key left without rows, and its
// timer.
func (rj *regularJoin) dropMeta(key []byte) error {
	b, ok := rj.peekMeta()
	if !ok {
		return nil
	}
	h, err := parseRJMeta(b)
	if err != nil {
		return fmt.Errorf("TTL state of key %x: %w", key, err)
	}
	if h.timer != 0 {
		rj.timers.DeleteProcessingTimeTimer(nil, h.timer)
	}
	rj.meta.Clear()
	return nil
}

func appendRJMeta(dst []byte, h rjMeta) []byte {
	dst = append(dst, rjMetaFormat)
	dst = binary.AppendVarint(dst, h.access)
	return binary.AppendVarint(dst, h.timer)
}

func parseRJMeta(b []byte) (rjMeta, error) {
	var h rjMeta
	if len(b) == 0 || b[0] != rjMetaFormat {
		return h, fmt.Errorf("%w: TTL format", errCorruptJoin)
	}
	b = b[1:]
	n, m := 0, 0
	h.access, n = binary.Varint(b)
	if n > 0 {
		h.timer, m = binary.Varint(b[n:])
	}
	if n <= 0 || m <= 0 || n+m != len(b) {
		return h, fmt.Errorf("%w: TTL bookkeeping", errCorruptJoin)
	}
	return h, nil
}

// OnTimer is a key's cleanup timer: both sides of the key go when no
// record touched it for the TTL, else the next timer is registered.
func (rj *regularJoin) OnTimer(tm sdk.Timer, _ sdk.Collector) error {
	if rj.ttl <= 0 || tm.Domain != sdk.ProcessingTime {
		return nil
	}
	b, ok := rj.peekMeta()
	if !ok {
		return nil
	}
	h, err := parseRJMeta(b)
	if err != nil {
		return fmt.Errorf("sql-join: TTL state of key %x: %w", tm.Key, err)
	}
	if h.timer != tm.Timestamp {
		return nil // not the key's pending timer
	}
	now := max(rj.timers.CurrentProcessingTime(), tm.Timestamp)
	if h.access+rj.ttl <= now {
		rj.sides[leftSide].Clear()
		rj.sides[rightSide].Clear()
		rj.meta.Clear()
		return nil
	}
	h.timer = h.access + rj.ttl
	rj.timers.RegisterProcessingTimeTimer(nil, h.timer)
	rj.buf = appendRJMeta(rj.buf[:0], h)
	rj.meta.Update(rj.buf)
	return nil
}

// PrepareSnapshotPreBarrier writes what the encoder holds back, so that
// no change straddles a checkpoint.
func (rj *regularJoin) PrepareSnapshotPreBarrier(_ int64, out sdk.Collector) error {
	rj.j.enc.flush(out)
	return nil
}

func (rj *regularJoin) EndInput(out sdk.Collector) error {
	rj.j.enc.flush(out)
	return nil
}

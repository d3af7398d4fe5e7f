package ops

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

// TopN is the operator sql-top-n (a plan.TopN): ROW_NUMBER() OVER
// (PARTITION BY … ORDER BY …) kept to the rows numbered up to Limit, a
// deduplication when Limit is 1. Its input is keyed by the partition
// columns upstream, so its keyed state is a partition's. It emits the
// changes of each partition's top rows as a changelog, at the timestamp
// of the record that made them: rows that enter and leave the top (+I,
// -D), and, when the row number is an output column, every row whose
// number changed (-U, +U). A deduplication without the number replaces
// its row with -U and +U, the partition being the result's unique key.
//
// Rows are ordered by a sort key: the ORDER BY values in an
// order-preserving byte encoding (appendSortKey), so that ordering two
// rows is comparing bytes. Rows of equal sort keys rank in arrival order.
//
// State, per partition:
//
//   - Append-only input: the ValueState "top", the partition's top rows
//     in order, the only ones that can ever rank again (a row out of the
//     top never comes back): the byte topNFormat, a varint the last
//     access (ms of processing time; 0 without a TTL), a varint the
//     pending cleanup timer's time (0: none), then per row a uvarint
//     length and its sort key, a uvarint length and the row's encoding.
//   - Changelog input: every row of the partition, as a retraction may
//     bring any back into the top. The MapState "rows" maps a row's sort
//     key and an 8-byte big-endian sequence number (arrival order) to the
//     row's encoding, so that the map's byte order is the rows' order;
//     the ValueState "meta" holds the byte topNFormat, the last access,
//     the pending timer's time (as "top" does), and a uvarint the next
//     sequence number. A partition's rows all gone, its meta goes too.
//
// With a TTL, a partition no record touched for TTL milliseconds of
// processing time is dropped without a word downstream: each partition
// has at most one processing-time timer pending, at its last access plus
// the TTL when it was registered; on firing it drops the partition when
// that long passed since the last access, and registers the next one
// otherwise.
type TopN struct {
	codec     *row.Codec
	enc       *encoder
	keys      []topNSortKey
	limit     int
	rank      bool
	changelog bool
	ttl       int64
	// allCols lists the input's columns, to compare rows by their keys'
	// encodings (which make SQL-equal floats equal).
	allCols []int

	timers   sdk.TimerService
	top      sdk.ValueState
	peekTop  func() ([]byte, bool)
	meta     sdk.ValueState
	peekMeta func() ([]byte, bool)
	rows     sdk.MapState

	// in is the decoded input row, key its sort key, ukey its map key.
	in   row.Row
	key  []byte
	ukey []byte
	// scratch are two rows to decode stored rows into; out the output
	// row (a row and its number).
	scratch [2]row.Row
	out     row.Row
	// ents are the partition's first rows, in order; buf the state
	// written; match and cand the encodings two rows are compared by.
	ents  []topNEntry
	buf   []byte
	match []byte
	cand  []byte
}

var (
	_ sdk.Operator       = (*TopN)(nil)
	_ sdk.TimerHandler   = (*TopN)(nil)
	_ sdk.PreBarrierHook = (*TopN)(nil)
	_ sdk.InputEnder     = (*TopN)(nil)
)

// topNFormat begins every state value of the operator, so that a layout
// to come can tell itself from this one.
const topNFormat = 1

// topNSortKey is one ORDER BY item, compiled.
type topNSortKey struct {
	col              int
	kind             plan.Kind
	desc, nullsFirst bool
}

// topNEntry is a stored row: its sort key (for the map, with its sequence
// number) and its encoding.
type topNEntry struct {
	key, row []byte
}

// topNHeader is what every partition's state begins with: the last access
// and the pending cleanup timer's time (0: none), ms of processing time.
type topNHeader struct {
	access, timer int64
}

var errCorruptTopN = errors.New("corrupt state")

// peeker is a ValueState that lends its value until the next Update (the
// heap backend's).
type peeker interface{ Peek() ([]byte, bool) }

func (t *TopN) Open(ctx sdk.Context) error {
	op, err := loadPlan(ctx, "sql-top-n")
	if err != nil {
		return err
	}
	if op.TopN == nil {
		return errors.New("sql-top-n: the plan is not a TopN's")
	}
	if err := t.open(op.TopN); err != nil {
		return fmt.Errorf("sql-top-n: %w", err)
	}
	if t.ttl > 0 {
		t.timers = ctx.TimerService()
	}
	if t.changelog {
		t.rows = ctx.MapState("rows")
		t.meta = ctx.ValueState("meta")
		t.peekMeta = topNPeek(t.meta)
	} else {
		t.top = ctx.ValueState("top")
		t.peekTop = topNPeek(t.top)
	}
	return nil
}

// topNPeek reads v without keeping the bytes past the next Update, which
// lets the heap backend write the next value over them.
func topNPeek(v sdk.ValueState) func() ([]byte, bool) {
	if p, ok := v.(peeker); ok {
		return p.Peek
	}
	return v.Value
}

// open checks and compiles p.
func (t *TopN) open(p *plan.TopN) error {
	if p.Limit < 1 || p.Limit > math.MaxInt32 {
		return fmt.Errorf("limit %d: want 1 to %d", p.Limit, math.MaxInt32)
	}
	t.limit, t.rank, t.changelog, t.ttl = int(p.Limit), p.Rank, p.InChangelog, p.TTL
	if t.ttl < 0 {
		return fmt.Errorf("TTL %dms: want 0 (none) or more", t.ttl)
	}
	n := len(p.In)
	for _, c := range p.Partition {
		if c < 0 || c >= n {
			return fmt.Errorf("partition column %d of an input of %d columns", c, n)
		}
	}
	t.keys = t.keys[:0]
	for _, k := range p.Order {
		if k.Col < 0 || k.Col >= n {
			return fmt.Errorf("ORDER BY column %d of an input of %d columns", k.Col, n)
		}
		t.keys = append(t.keys, topNSortKey{col: k.Col, kind: p.In[k.Col].Type.Kind, desc: k.Desc, nullsFirst: k.NullsFirst})
	}
	want := n
	if t.rank {
		want++
	}
	if len(p.Out) != want {
		return fmt.Errorf("the output has %d columns, want %d (the input's, then the row number when ranked)", len(p.Out), want)
	}
	for i, c := range p.In {
		if p.Out[i].Type != c.Type {
			return fmt.Errorf("output column %d is %s, the input's %s", i, p.Out[i].Type, c.Type)
		}
	}
	if t.rank && p.Out[n].Type.Kind != plan.Int64 {
		return fmt.Errorf("the row number column is %s, not BIGINT", p.Out[n].Type)
	}
	if !p.Enc.Changelog && p.Enc.Sink == "" {
		return errors.New("an append-only output: a TopN's rows change, its output is a changelog (or a sink's mode)")
	}
	var err error
	if t.enc, err = newEncoder(p.Out, p.Enc); err != nil {
		return err
	}
	t.codec = row.NewCodec(p.In)
	t.allCols = make([]int, n)
	for i := range t.allCols {
		t.allCols[i] = i
	}
	t.out = make(row.Row, 0, want)
	return nil
}

func (t *TopN) ProcessRecord(rec sdk.Record, out sdk.Collector) error {
	kind, v := row.Insert, rec.Value
	if t.changelog {
		var err error
		if kind, v, err = row.SplitKind(v); err != nil {
			return fmt.Errorf("sql-top-n: %w", err)
		}
	}
	r, err := t.codec.Decode(v, t.in)
	t.in = r
	if err != nil {
		return fmt.Errorf("sql-top-n: decode: %w", err)
	}
	t.key = t.appendSortKey(t.key[:0], r)
	if t.changelog {
		err = t.change(kind, r, v, rec.Timestamp, out)
	} else {
		err = t.insert(r, v, rec.Timestamp, out)
	}
	if err != nil {
		return fmt.Errorf("sql-top-n: partition %x: %w", rec.Key, err)
	}
	return nil
}

// insert adds row r (encoded v) of an append-only input.
func (t *TopN) insert(r row.Row, v []byte, ts int64, out sdk.Collector) error {
	var h topNHeader
	var body []byte
	if b, ok := t.peekTop(); ok {
		var err error
		if h, body, err = parseTopNHeader(b); err != nil {
			return err
		}
	}
	t.ents = t.ents[:0]
	pos := -1
	for len(body) > 0 && len(t.ents) < t.limit {
		var e topNEntry
		var err error
		if e, body, err = nextTopNEntry(body); err != nil {
			return err
		}
		if pos < 0 && bytes.Compare(t.key, e.key) < 0 {
			pos = len(t.ents)
		}
		t.ents = append(t.ents, e)
	}
	if pos < 0 {
		pos = len(t.ents)
	}
	touched := t.touch(&h)
	if pos >= t.limit {
		// Not in the top: it never will be.
		if touched {
			t.writeTop(h, -1, nil)
		}
		return nil
	}
	if err := t.emitInsert(out, r, pos, t.ents, ts); err != nil {
		return err
	}
	t.writeTop(h, pos, v)
	return nil
}

// writeTop writes the partition's top: t.ents with the input row (its
// sort key t.key, its encoding v) at pos (-1: not), cut to the limit.
func (t *TopN) writeTop(h topNHeader, pos int, v []byte) {
	b := appendTopNHeader(t.buf[:0], h)
	n := 0
	for i, e := range t.ents {
		if i == pos {
			b = appendTopNEntry(b, t.key, v)
			n++
		}
		if n == t.limit {
			break
		}
		b = appendTopNEntry(b, e.key, e.row)
		n++
	}
	if pos == len(t.ents) && n < t.limit {
		b = appendTopNEntry(b, t.key, v)
	}
	t.buf = b
	t.top.Update(b)
}

// change applies a row of a changelog input: r (encoded v) added or
// retracted.
func (t *TopN) change(kind row.Kind, r row.Row, v []byte, ts int64, out sdk.Collector) error {
	var h topNHeader
	var seq uint64
	b, exists := t.peekMeta()
	if exists {
		var err error
		if h, seq, err = parseTopNMeta(b); err != nil {
			return err
		}
	}
	adds := kind.Adds()
	if adds {
		t.ukey = binary.BigEndian.AppendUint64(append(t.ukey[:0], t.key...), seq)
		seq++
	} else {
		t.match = t.codec.AppendKey(t.match[:0], r, t.allCols)
	}
	// One pass over the partition's rows in order: the first Limit+1
	// (the top, and the row a retraction would bring in), and for a
	// retraction the first row equal to it, among those of its sort key.
	t.ents = t.ents[:0]
	found, i := -1, 0
	var foundKey []byte
	searching := !adds
	for k, val := range t.rows.All() {
		if searching {
			switch {
			case len(k) == len(t.key)+8 && bytes.HasPrefix(k, t.key):
				s, err := t.decodeStored(val, 0)
				if err != nil {
					return err
				}
				t.cand = t.codec.AppendKey(t.cand[:0], s, t.allCols)
				if bytes.Equal(t.cand, t.match) {
					found, foundKey, searching = i, k, false
				}
			case bytes.Compare(k, t.key) > 0:
				searching = false // past the rows of its sort key
			}
		}
		if len(t.ents) <= t.limit {
			t.ents = append(t.ents, topNEntry{key: k, row: val})
		}
		i++
		if !searching && len(t.ents) > t.limit {
			break
		}
	}
	switch {
	case adds:
		top := t.ents[:min(len(t.ents), t.limit)]
		pos := len(top)
		for j, e := range top {
			if bytes.Compare(t.ukey, e.key) < 0 {
				pos = j
				break
			}
		}
		if pos < t.limit {
			if err := t.emitInsert(out, r, pos, top, ts); err != nil {
				return err
			}
		}
		t.rows.Put(t.ukey, v)
	case found >= 0:
		if found < t.limit {
			if err := t.emitRemove(out, found, t.ents, ts); err != nil {
				return err
			}
		}
		t.rows.Remove(foundKey)
		if len(t.ents) == 1 {
			// The partition's last row: nothing is left of it.
			t.meta.Clear()
			if h.timer != 0 {
				t.timers.DeleteProcessingTimeTimer(nil, h.timer)
			}
			return nil
		}
	case !exists:
		return nil // a retraction of a row never stored, in an empty partition
	}
	// The meta changes with a new row's sequence number, or an access.
	if touched := t.touch(&h); adds || touched {
		t.buf = binary.AppendUvarint(appendTopNHeader(t.buf[:0], h), seq)
		t.meta.Update(t.buf)
	}
	return nil
}

// emitInsert emits the changes of a row r entering the top at pos, old
// the top before (at most Limit rows).
func (t *TopN) emitInsert(out sdk.Collector, r row.Row, pos int, old []topNEntry, ts int64) error {
	count := len(old)
	switch {
	case t.rank:
		// Every row from pos on moves down one: the row number of each
		// position changes hands.
		prev, i := r, 0
		for k := pos; k < min(count+1, t.limit); k++ {
			if k == count {
				t.emit(out, row.Insert, prev, k+1, ts)
				break
			}
			cur, err := t.decodeStored(old[k].row, i)
			if err != nil {
				return err
			}
			t.emit(out, row.UpdateBefore, cur, k+1, ts)
			t.emit(out, row.UpdateAfter, prev, k+1, ts)
			prev, i = cur, i^1
		}
	case t.limit == 1:
		if count == 0 {
			t.emit(out, row.Insert, r, 0, ts)
			break
		}
		first, err := t.decodeStored(old[0].row, 0)
		if err != nil {
			return err
		}
		t.emit(out, row.UpdateBefore, first, 0, ts)
		t.emit(out, row.UpdateAfter, r, 0, ts)
	default:
		t.emit(out, row.Insert, r, 0, ts)
		if count == t.limit {
			last, err := t.decodeStored(old[count-1].row, 0)
			if err != nil {
				return err
			}
			t.emit(out, row.Delete, last, 0, ts)
		}
	}
	return nil
}

// emitRemove emits the changes of the row at pos (< Limit) leaving the
// top, old the partition's first rows before (at most Limit+1: the one
// past the top, if any, enters it).
func (t *TopN) emitRemove(out sdk.Collector, pos int, old []topNEntry, ts int64) error {
	count := len(old)
	cur, err := t.decodeStored(old[pos].row, 0)
	if err != nil {
		return err
	}
	switch {
	case t.rank:
		// Every row after pos moves up one.
		i := 1
		for k := pos; k < min(count, t.limit); k++ {
			if k+1 == count {
				t.emit(out, row.Delete, cur, k+1, ts)
				break
			}
			next, err := t.decodeStored(old[k+1].row, i)
			if err != nil {
				return err
			}
			t.emit(out, row.UpdateBefore, cur, k+1, ts)
			t.emit(out, row.UpdateAfter, next, k+1, ts)
			cur, i = next, i^1
		}
	case t.limit == 1 && count > 1:
		next, err := t.decodeStored(old[1].row, 1)
		if err != nil {
			return err
		}
		t.emit(out, row.UpdateBefore, cur, 0, ts)
		t.emit(out, row.UpdateAfter, next, 0, ts)
	default:
		t.emit(out, row.Delete, cur, 0, ts)
		if count > t.limit {
			next, err := t.decodeStored(old[t.limit].row, 1)
			if err != nil {
				return err
			}
			t.emit(out, row.Insert, next, 0, ts)
		}
	}
	return nil
}

// emit writes the change kind of row r, numbered rank when the output
// has the row number.
func (t *TopN) emit(out sdk.Collector, kind row.Kind, r row.Row, rank int, ts int64) {
	if !t.rank {
		t.enc.emit(out, kind, r, ts)
		return
	}
	t.out = append(append(t.out[:0], r...), row.Int(int64(rank)))
	t.enc.emit(out, kind, t.out, ts)
}

// decodeStored decodes a stored row into scratch row i.
func (t *TopN) decodeStored(b []byte, i int) (row.Row, error) {
	r, err := t.codec.Decode(b, t.scratch[i])
	t.scratch[i] = r
	if err != nil {
		return nil, fmt.Errorf("%w: a row: %w", errCorruptTopN, err)
	}
	return r, nil
}

// touch records an access to the partition in h, and makes sure a
// cleanup timer is pending for it; it reports whether h changed.
func (t *TopN) touch(h *topNHeader) bool {
	if t.ttl <= 0 {
		return false
	}
	now := t.timers.CurrentProcessingTime()
	changed := h.access != now
	h.access = now
	if h.timer == 0 {
		h.timer = now + t.ttl
		t.timers.RegisterProcessingTimeTimer(nil, h.timer)
		changed = true
	}
	return changed
}

// OnTimer is a partition's cleanup timer: the partition goes when no
// record touched it for the TTL, else the next timer is registered.
func (t *TopN) OnTimer(tm sdk.Timer, _ sdk.Collector) error {
	if t.ttl <= 0 || tm.Domain != sdk.ProcessingTime {
		return nil
	}
	state, peek := t.top, t.peekTop
	if t.changelog {
		state, peek = t.meta, t.peekMeta
	}
	b, ok := peek()
	if !ok {
		return nil
	}
	h, rest, err := parseTopNHeader(b)
	if err != nil {
		return fmt.Errorf("sql-top-n: partition %x: %w", tm.Key, err)
	}
	if h.timer != tm.Timestamp {
		return nil // not the partition's pending timer
	}
	now := max(t.timers.CurrentProcessingTime(), tm.Timestamp)
	if h.access+t.ttl <= now {
		state.Clear()
		if t.changelog {
			t.rows.Clear()
		}
		return nil
	}
	h.timer = h.access + t.ttl
	t.timers.RegisterProcessingTimeTimer(nil, h.timer)
	t.buf = append(appendTopNHeader(t.buf[:0], h), rest...)
	state.Update(t.buf)
	return nil
}

// PrepareSnapshotPreBarrier writes what the encoder holds back, so that
// no change straddles a checkpoint.
func (t *TopN) PrepareSnapshotPreBarrier(_ int64, out sdk.Collector) error {
	t.enc.flush(out)
	return nil
}

func (t *TopN) EndInput(out sdk.Collector) error {
	t.enc.flush(out)
	return nil
}

func (t *TopN) Close() error { return nil }

// appendSortKey appends the sort key of r: per ORDER BY item, a byte
// placing NULL (0 first, 2 last) around the other values (1), then for
// a value its order-preserving encoding (appendOrdered), every byte
// inverted for DESC. Each item's encoding is prefix-free, so the keys'
// byte order is the rows' SQL order.
func (t *TopN) appendSortKey(dst []byte, r row.Row) []byte {
	return appendRowSortKey(dst, t.keys, r)
}

// appendRowSortKey appends the sort key of r by keys.
func appendRowSortKey(dst []byte, keys []topNSortKey, r row.Row) []byte {
	for _, k := range keys {
		v := r[k.col]
		if v.IsNull() || k.kind == plan.Null {
			if k.nullsFirst {
				dst = append(dst, 0)
			} else {
				dst = append(dst, 2)
			}
			continue
		}
		dst = append(dst, 1)
		at := len(dst)
		dst = appendOrdered(dst, k.kind, v)
		if k.desc {
			for i := at; i < len(dst); i++ {
				dst[i] = ^dst[i]
			}
		}
	}
	return dst
}

func appendTopNHeader(dst []byte, h topNHeader) []byte {
	dst = append(dst, topNFormat)
	dst = binary.AppendVarint(dst, h.access)
	return binary.AppendVarint(dst, h.timer)
}

// parseTopNHeader splits a state value into its header and the rest.
func parseTopNHeader(b []byte) (topNHeader, []byte, error) {
	var h topNHeader
	if len(b) == 0 || b[0] != topNFormat {
		return h, nil, fmt.Errorf("%w: no format byte", errCorruptTopN)
	}
	b = b[1:]
	var n, m int
	if h.access, n = binary.Varint(b); n <= 0 {
		return h, nil, fmt.Errorf("%w: the last access", errCorruptTopN)
	}
	if h.timer, m = binary.Varint(b[n:]); m <= 0 {
		return h, nil, fmt.Errorf("%w: the cleanup timer", errCorruptTopN)
	}
	return h, b[n+m:], nil
}

// parseTopNMeta reads a changelog input's partition meta: its header and
// the next sequence number.
func parseTopNMeta(b []byte) (topNHeader, uint64, error) {
	h, rest, err := parseTopNHeader(b)
	if err != nil {
		return h, 0, err
	}
	seq, n := binary.Uvarint(rest)
	if n <= 0 || n != len(rest) {
		return h, 0, fmt.Errorf("%w: the sequence number", errCorruptTopN)
	}
	return h, seq, nil
}

func appendTopNEntry(dst, key, r []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.AppendUvarint(dst, uint64(len(r)))
	return append(dst, r...)
}

// nextTopNEntry splits the first stored row off b.
func nextTopNEntry(b []byte) (topNEntry, []byte, error) {
	var e topNEntry
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return e, nil, fmt.Errorf("%w: a row's sort key", errCorruptTopN)
	}
	e.key = b[n : n+int(l) : n+int(l)]
	b = b[n+int(l):]
	l, n = binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return e, nil, fmt.Errorf("%w: a row", errCorruptTopN)
	}
	e.row = b[n : n+int(l) : n+int(l)]
	return e, b[n+int(l):], nil
}

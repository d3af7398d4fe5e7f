package ops

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/sdk"
)

// OverAggregate is the operator sql-over-aggregate (a plan.OverAgg):
// aggregates over a frame of rows around each row of a partition,
// aggregate() OVER (PARTITION BY … ORDER BY … ROWS BETWEEN …). Its input
// is keyed by the partition columns upstream, so its keyed state is a
// partition's.
//
// A row added at position p of its partition (or taken back from it)
// changes the frames of the rows at p−Hi … p−Lo: the operator emits the
// row itself (+I, or -D with the result it had) and -U/+U for each of
// those whose result changed. Rows of equal ORDER BY values are ordered
// by all their values, so the result is the same whatever order the rows
// arrive in (copies of one row are interchangeable); the result of every
// row is computed over its whole frame, which is at most Hi−Lo+1 rows, so
// a change costs a scan of the partition up to it and O((Hi−Lo)²) folds.
//
// State, per partition:
//
//   - MapState "rows": user key a row's sort key (appendRowSortKey over
//     the ORDER BY items, then over every column ascending), so that the
//     map's byte order is the partition's order; value a uvarint, how
//     many copies of the row there are, then the row's encoding.
//   - With a TTL, the ValueState "meta": the TopN's header (the byte
//     topNFormat, varints of the last access and of the pending cleanup
//     timer, processing-time ms). A partition no record touched for the
//     TTL is dropped without a word downstream.
type OverAggregate struct {
	codec     *row.Codec
	enc       *encoder
	keys      []topNSortKey
	lo, hi    int
	calls     []aggCall
	changelog bool
	ttl       int64

	timers   sdk.TimerService
	rows     sdk.MapState
	meta     sdk.ValueState
	peekMeta func() ([]byte, bool)

	in  row.Row
	key []byte
	// win is the rows around the change, in order, gathered from ring
	// (those before it) and after; dec their decoded rows.
	ring  overRing
	rev   [][]byte
	after [][]byte
	win   [][]byte
	dec   []row.Row
	// oldSeq and newSeq index win: the partition's rows around the change
	// before and after it.
	oldSeq, newSeq []int
	oldRes, newRes []row.Value
	seg, scratch   []byte
	out            row.Row
	buf            []byte
}

var (
	_ sdk.Operator       = (*OverAggregate)(nil)
	_ sdk.TimerHandler   = (*OverAggregate)(nil)
	_ sdk.PreBarrierHook = (*OverAggregate)(nil)
	_ sdk.InputEnder     = (*OverAggregate)(nil)
)

var errCorruptOver = errors.New("corrupt state")

// maxOverFrame bounds a frame's rows: every change folds each affected
// row's frame again.
const maxOverFrame = 10000

func (o *OverAggregate) Open(ctx sdk.Context) error {
	op, err := loadPlan(ctx, "sql-over-aggregate")
	if err != nil {
		return err
	}
	if op.OverAgg == nil {
		return errors.New("sql-over-aggregate: the plan is not an OVER aggregate's")
	}
	if err := o.open(op.OverAgg); err != nil {
		return fmt.Errorf("sql-over-aggregate: %w", err)
	}
	o.rows = ctx.MapState("rows")
	if o.ttl > 0 {
		o.timers = ctx.TimerService()
		o.meta = ctx.ValueState("meta")
		o.peekMeta = topNPeek(o.meta)
	}
	return nil
}

// open checks and compiles p.
func (o *OverAggregate) open(p *plan.OverAgg) error {
	if p.Lo > p.Hi || p.Hi-p.Lo >= maxOverFrame || p.Lo < -maxOverFrame || p.Hi > maxOverFrame {
		return fmt.Errorf("frame %d … %d: want lo <= hi, at most %d rows", p.Lo, p.Hi, maxOverFrame)
	}
	o.lo, o.hi, o.changelog, o.ttl = int(p.Lo), int(p.Hi), p.InChangelog, p.TTL
	if o.ttl < 0 {
		return fmt.Errorf("TTL %dms: want 0 (none) or more", o.ttl)
	}
	n := len(p.In)
	for _, c := range p.Partition {
		if c < 0 || c >= n {
			return fmt.Errorf("partition column %d of an input of %d columns", c, n)
		}
	}
	o.keys = o.keys[:0]
	for _, k := range p.Order {
		if k.Col < 0 || k.Col >= n {
			return fmt.Errorf("ORDER BY column %d of an input of %d columns", k.Col, n)
		}
		o.keys = append(o.keys, topNSortKey{col: k.Col, kind: p.In[k.Col].Type.Kind, desc: k.Desc, nullsFirst: k.NullsFirst})
	}
	for i, c := range p.In {
		o.keys = append(o.keys, topNSortKey{col: i, kind: c.Type.Kind})
	}
	if len(p.Aggs) == 0 {
		return errors.New("no aggregates")
	}
	if len(p.Out) != n+len(p.Aggs) {
		return fmt.Errorf("the output has %d columns, want %d (the input's, then the aggregates)", len(p.Out), n+len(p.Aggs))
	}
	for i, c := range p.In {
		if p.Out[i].Type != c.Type {
			return fmt.Errorf("output column %d is %s, the input's %s", i, p.Out[i].Type, c.Type)
		}
	}
	o.calls = o.calls[:0]
	for i, c := range p.Aggs {
		if c.Fn == plan.CountDistinct {
			return fmt.Errorf("aggregate %d: count(DISTINCT) over a frame is not supported", i)
		}
		a, err := newAggCall(c, p.In)
		if err != nil {
			return fmt.Errorf("aggregate %d: %w", i, err)
		}
		if p.Out[n+i].Type != c.Type {
			return fmt.Errorf("output column %d is %s, aggregate %d's %s", n+i, p.Out[n+i].Type, i, c.Type)
		}
		o.calls = append(o.calls, a)
	}
	if !p.Enc.Changelog && p.Enc.Sink == "" {
		return errors.New("an append-only output: a row's frame changes, the output is a changelog (or a sink's mode)")
	}
	var err error
	if o.enc, err = newEncoder(p.Out, p.Enc); err != nil {
		return err
	}
	o.codec = row.NewCodec(p.In)
	o.out = make(row.Row, 0, len(p.Out))
	return nil
}

func (o *OverAggregate) ProcessRecord(rec sdk.Record, out sdk.Collector) error {
	kind, v := row.Insert, rec.Value
	if o.changelog {
		var err error
		if kind, v, err = row.SplitKind(v); err != nil {
			return fmt.Errorf("sql-over-aggregate: %w", err)
		}
	}
	r, err := o.codec.Decode(v, o.in)
	o.in = r
	if err != nil {
		return fmt.Errorf("sql-over-aggregate: decode: %w", err)
	}
	o.key = appendRowSortKey(o.key[:0], o.keys, r)
	if err := o.change(kind.Adds(), v, rec.Timestamp, out); err != nil {
		return fmt.Errorf("sql-over-aggregate: partition %x: %w", rec.Key, err)
	}
	return nil
}

// change adds the row whose encoding is v (or takes one copy of it back)
// and emits what it changes.
func (o *OverAggregate) change(adds bool, v []byte, ts int64, out sdk.Collector) error {
	// The rows whose frames the change enters or leaves are those at
	// p−hi … p−lo, and their frames reach p−hi+lo … p−lo+hi; the changed
	// row's own reaches p+lo … p+hi: so many rows each side are enough.
	nb := max(0, o.hi, -o.lo, o.hi-o.lo)
	at, copies, err := o.gather(adds, v, nb, nb)
	if err != nil || at < 0 {
		return err
	}
	if err := o.decodeWindow(); err != nil {
		return err
	}
	o.oldSeq, o.newSeq = o.oldSeq[:0], o.newSeq[:0]
	for i := range o.win {
		if i != at || !adds {
			o.oldSeq = append(o.oldSeq, i)
		}
		if i != at || adds {
			o.newSeq = append(o.newSeq, i)
		}
	}
	// The changed row: +I with its new result, or -D with its old one.
	if adds {
		if o.newRes, err = o.frame(o.newRes[:0], o.newSeq, at); err != nil {
			return err
		}
		o.emit(out, row.Insert, o.dec[at], o.newRes, ts)
	} else {
		if o.oldRes, err = o.frame(o.oldRes[:0], o.oldSeq, at); err != nil {
			return err
		}
		o.emit(out, row.Delete, o.dec[at], o.oldRes, ts)
	}
	// The others whose result changed, in order: only a row whose frame
	// reaches the change's place, at an offset in −hi … −lo, can change.
	oi, ni := 0, 0
	for i := range o.win {
		if i == at {
			if adds {
				ni++
			} else {
				oi++
			}
			continue
		}
		if d := i - at; d < -o.hi || d > -o.lo {
			oi++
			ni++
			continue
		}
		if o.oldRes, err = o.frame(o.oldRes[:0], o.oldSeq, oi); err != nil {
			return err
		}
		if o.newRes, err = o.frame(o.newRes[:0], o.newSeq, ni); err != nil {
			return err
		}
		oi++
		ni++
		if !gaRowsEqual(o.oldRes, o.newRes) {
			o.emit(out, row.UpdateBefore, o.dec[i], o.oldRes, ts)
			o.emit(out, row.UpdateAfter, o.dec[i], o.newRes, ts)
		}
	}
	// The state: one copy more or less.
	switch n := copies; {
	case adds:
		o.rows.Put(o.key, appendOverEntry(o.buf[:0], n+1, v))
	case n > 1:
		o.rows.Put(o.key, appendOverEntry(o.buf[:0], n-1, v))
	default:
		o.rows.Remove(o.key)
		if o.ttl > 0 && o.rows.IsEmpty() {
			if b, ok := o.peekMeta(); ok {
				if h, _, err := parseTopNHeader(b); err == nil && h.timer != 0 {
					o.timers.DeleteProcessingTimeTimer(nil, h.timer)
				}
			}
			o.meta.Clear()
			return nil
		}
	}
	return o.touch()
}

// orderedMap is a map state that iterates from a user key on, either
// way (both backends' are).
type orderedMap interface {
	Ascend(from []byte) iter.Seq2[[]byte, []byte]
	Descend(below []byte) iter.Seq2[[]byte, []byte]
}

// gather fills o.win with the partition's rows around the change: up to
// nb before it, the changed row (v, added or one copy taken back), up to
// na after, copies counted out; at is the changed row's index, -1 when
// it is a retraction of a row not stored. copies is how many copies of
// the row the partition held.
func (o *OverAggregate) gather(adds bool, v []byte, nb, na int) (at int, copies uint64, err error) {
	var stored []byte
	if b, ok := o.rows.Get(o.key); ok {
		if copies, stored, err = parseOverEntry(b); err != nil {
			return -1, 0, err
		}
	}
	if !adds && copies == 0 {
		return -1, 0, nil
	}
	// The other copies of the changed row come right before it.
	others := copies
	if !adds {
		others--
	}
	seek, ok := o.rows.(orderedMap)
	if !ok {
		at, err := o.gatherAll(v, others, stored, nb, na)
		return at, copies, err
	}
	// Seeking from the changed row's key both ways: the rows before it
	// closest first, the rows after in order.
	o.rev = o.rev[:0]
	for range min(others, uint64(nb)) {
		o.rev = append(o.rev, stored)
	}
	if len(o.rev) < nb {
		for _, val := range seek.Descend(o.key) {
			n, body, err := parseOverEntry(val)
			if err != nil {
				return -1, 0, err
			}
			for ; n > 0 && len(o.rev) < nb; n-- {
				o.rev = append(o.rev, body)
			}
			if len(o.rev) >= nb {
				break
			}
		}
	}
	o.after = o.after[:0]
	if na > 0 {
		for k, val := range seek.Ascend(o.key) {
			if bytes.Equal(k, o.key) {
				continue
			}
			n, body, err := parseOverEntry(val)
			if err != nil {
				return -1, 0, err
			}
			for ; n > 0 && len(o.after) < na; n-- {
				o.after = append(o.after, body)
			}
			if len(o.after) >= na {
				break
			}
		}
	}
	o.win = o.win[:0]
	for i := len(o.rev) - 1; i >= 0; i-- {
		o.win = append(o.win, o.rev[i])
	}
	at = len(o.win)
	o.win = append(o.win, v)
	o.win = append(o.win, o.after...)
	return at, copies, nil
}

// gatherAll is gather over a map state that only iterates from its
// start: one pass in order, keeping the last nb rows before the change
// in a ring.
func (o *OverAggregate) gatherAll(v []byte, others uint64, stored []byte, nb, na int) (int, error) {
	o.ring.reset(nb)
	o.after = o.after[:0]
	for k, val := range o.rows.All() {
		n, body, err := parseOverEntry(val)
		if err != nil {
			return -1, err
		}
		c := bytes.Compare(k, o.key)
		if c < 0 {
			for range min(n, uint64(nb)) {
				o.ring.push(body)
			}
			continue
		}
		if c == 0 {
			continue
		}
		for ; n > 0 && len(o.after) < na; n-- {
			o.after = append(o.after, body)
		}
		if len(o.after) >= na {
			break
		}
	}
	for range min(others, uint64(nb)) {
		o.ring.push(stored)
	}
	o.win = append(o.ring.appendTo(o.win[:0]), v)
	at := len(o.win) - 1
	o.win = append(o.win, o.after...)
	return at, nil
}

// decodeWindow decodes the gathered rows.
func (o *OverAggregate) decodeWindow() error {
	for len(o.dec) < len(o.win) {
		o.dec = append(o.dec, nil)
	}
	for i, b := range o.win {
		r, err := o.codec.Decode(b, o.dec[i])
		o.dec[i] = r
		if err != nil {
			return fmt.Errorf("%w: a row: %w", errCorruptOver, err)
		}
	}
	return nil
}

// frame appends the aggregates of the row at position i of seq (indexes
// of o.dec), over the rows at i+lo … i+hi that seq has.
func (o *OverAggregate) frame(dst []row.Value, seq []int, i int) ([]row.Value, error) {
	from, to := max(0, i+o.lo), min(len(seq)-1, i+o.hi)
	for c := range o.calls {
		a := &o.calls[c]
		seg := a.appendEmpty(o.seg[:0])
		for j := from; j <= to; j++ {
			v, ok := a.value(o.dec[seq[j]])
			if !ok {
				continue
			}
			var err error
			next := seg[len(seg):]
			if next, o.scratch, err = a.add(next, seg, v, o.scratch); err != nil {
				return dst, err
			}
			seg = append(seg[:0], next...)
		}
		o.seg = seg
		res, err := a.result(seg)
		if err != nil {
			return dst, err
		}
		dst = append(dst, res)
	}
	return dst, nil
}

func (o *OverAggregate) emit(out sdk.Collector, kind row.Kind, r row.Row, res []row.Value, ts int64) {
	o.out = append(append(o.out[:0], r...), res...)
	o.enc.emit(out, kind, o.out, ts)
}

// touch records an access to the partition, and makes sure a cleanup
// timer is pending for it.
func (o *OverAggregate) touch() error {
	if o.ttl <= 0 {
		return nil
	}
	var h topNHeader
	if b, ok := o.peekMeta(); ok {
		var err error
		if h, _, err = parseTopNHeader(b); err != nil {
			return err
		}
	}
	now := o.timers.CurrentProcessingTime()
	if h.access == now && h.timer != 0 {
		return nil
	}
	h.access = now
	if h.timer == 0 {
		h.timer = now + o.ttl
		o.timers.RegisterProcessingTimeTimer(nil, h.timer)
	}
	o.buf = appendTopNHeader(o.buf[:0], h)
	o.meta.Update(o.buf)
	return nil
}

// OnTimer is a partition's cleanup timer: the partition goes when no
// record touched it for the TTL, else the next timer is registered.
func (o *OverAggregate) OnTimer(tm sdk.Timer, _ sdk.Collector) error {
	if o.ttl <= 0 || tm.Domain != sdk.ProcessingTime {
		return nil
	}
	b, ok := o.peekMeta()
	if !ok {
		return nil
	}
	h, _, err := parseTopNHeader(b)
	if err != nil {
		return fmt.Errorf("sql-over-aggregate: partition %x: %w", tm.Key, err)
	}
	if h.timer != tm.Timestamp {
		return nil
	}
	now := max(o.timers.CurrentProcessingTime(), tm.Timestamp)
	if h.access+o.ttl <= now {
		o.meta.Clear()
		o.rows.Clear()
		return nil
	}
	h.timer = h.access + o.ttl
	o.timers.RegisterProcessingTimeTimer(nil, h.timer)
	o.buf = appendTopNHeader(o.buf[:0], h)
	o.meta.Update(o.buf)
	return nil
}

// PrepareSnapshotPreBarrier writes what the encoder holds back, so that
// no change straddles a checkpoint.
func (o *OverAggregate) PrepareSnapshotPreBarrier(_ int64, out sdk.Collector) error {
	o.enc.flush(out)
	return nil
}

func (o *OverAggregate) EndInput(out sdk.Collector) error {
	o.enc.flush(out)
	return nil
}

func (o *OverAggregate) Close() error { return nil }

func appendOverEntry(dst []byte, copies uint64, r []byte) []byte {
	return append(binary.AppendUvarint(dst, copies), r...)
}

// parseOverEntry splits a stored row into its copies and its encoding.
func parseOverEntry(b []byte) (uint64, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n == 0 {
		return 0, nil, fmt.Errorf("%w: a row's copies", errCorruptOver)
	}
	return n, b[k:], nil
}

// overRing keeps the last rows pushed, up to its size.
type overRing struct {
	rows  [][]byte
	size  int
	start int
}

func (r *overRing) reset(size int) {
	r.rows, r.size, r.start = r.rows[:0], size, 0
}

func (r *overRing) push(b []byte) {
	if len(r.rows) < r.size {
		r.rows = append(r.rows, b)
		return
	}
	r.rows[r.start] = b
	r.start = (r.start + 1) % r.size
}

// appendTo appends the rows in the order pushed.
func (r *overRing) appendTo(dst [][]byte) [][]byte {
	dst = append(dst, r.rows[r.start:]...)
	return append(dst, r.rows[:r.start]...)
}

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

// GroupAggregate is the operator sql-group-aggregate (a plan.GroupAgg):
// an unbounded GROUP BY with retraction (Flink's GroupAggregate). Its
// input is keyed upstream by the group columns, so keyed state is per
// group. For every input row it updates the group's accumulator (+I and
// +U rows add, -U and -D rows take back) and emits the change of the
// group's result row (the group columns, then the aggregates): +I when
// the group appears, -U/+U when its result changes, -D when its last row
// is taken back; nothing when the result is the same.
//
// State, per group:
//
//   - ValueState "acc": gaAccFormat; uvarints of the rows in the group
//     (inserts minus retractions, whatever the FILTERs and NULLs), then
//     varints of the last access and of the cleanup timer registered (the
//     TTL's bookkeeping, processing-time ms, 0: none); then one segment
//     per aggregate in the plan's order: count and count(DISTINCT) a
//     uvarint (the rows, the distinct values); sum and avg a uvarint of
//     the non-NULL values and their sum (a varint, or a float64's 8
//     little-endian bytes); min and max a byte, 1 when there is a value,
//     then the value (agg.go's value encoding).
//   - MapState "distinct": user key the argument column (uvarint) and the
//     value (agg.go's value encoding); value a uvarint per count(DISTINCT)
//     over that column, in the plan's order, of the rows it counted with
//     the value (on an append-only input only 0 or 1: whether it saw it).
//     Calls over one column share its entries (Nexmark q15's FILTERs).
//   - MapState "minmax" (min and max over a changelog only): user key the
//     aggregate's index (uvarint) and the value in an order-preserving
//     encoding (appendOrdered); value a uvarint multiplicity. The entries
//     come in value order, so when the extreme goes the next one is the
//     first (min) or last (max) entry of its prefix.
//
// With a TTL, a group no row touched for that long is dropped, without a
// change emitted (Flink's state TTL): one processing-time timer per group
// checks it. With a mini-batch the changes of a group are folded in
// memory and emitted when the batch ends (Size groups, Latency after its
// first change, before a checkpoint barrier, at the end of the input).
type GroupAggregate struct {
	codec     *row.Codec
	in        row.Row
	changelog bool
	group     []int
	// groupFloat[j] is whether group column j is a float, whose zero and
	// NaN the key normalizes, and so does the output.
	groupFloat []bool
	calls      []aggCall
	// prefix[i] is aggregate i's prefix in "minmax"; minmax[i] whether it
	// keeps its values there.
	prefix   [][]byte
	minmax   []bool
	distinct []gaDistinctCol
	enc      *encoder

	acc         sdk.ValueState
	peek        func() ([]byte, bool)
	distinctMap sdk.MapState
	minmaxMap   sdk.MapState
	useDistinct bool
	useMinmax   bool
	timers      sdk.TimerService
	ttl         int64

	// cur is the group's accumulator as the record leaves it, old as it
	// found it (its extremes alias the state's bytes, valid until the
	// next Update or Clear).
	cur, old gaAcc
	// extBuf[i] holds aggregate i's new extreme.
	extBuf   [][]byte
	accBuf   []byte
	ukBuf    []byte
	valBuf   []byte
	scratch  []byte
	mults    []uint64
	counted  []bool
	oldRow   row.Row
	newRow   row.Row
	nResults int

	// The mini-batch (batchSize 0: off): the groups changed in it, by
	// record key and in the order they came.
	batchSize int
	latency   int64
	batch     map[string]*gaBatchEntry
	order     []*gaBatchEntry
	free      []*gaBatchEntry
	// deadline is when the current batch's latency timer fires.
	deadline int64
}

// gaPeeker is a ValueState that lends its value until the next Update or
// Clear (the heap backend's), saving a copy per record.
type gaPeeker interface{ Peek() ([]byte, bool) }

// gaAccFormat begins every accumulator of a group aggregate.
const gaAccFormat = 1

// gaMiniBatchNS is the namespace of the mini-batch's latency timer (the
// TTL's has none).
var gaMiniBatchNS = []byte("mb")

// gaAcc is a group's accumulator decoded.
type gaAcc struct {
	rows       uint64
	lastAccess int64
	timerAt    int64
	aggs       []gaAgg
}

// gaAgg is one aggregate's part of an accumulator: n the rows counted
// (count), the distinct values (count DISTINCT) or the non-NULL values
// (sum, avg); sum their sum (a float's bits for a float sum); has and ext
// the extreme (min, max), in agg.go's value encoding.
type gaAgg struct {
	n   uint64
	sum int64
	has bool
	ext []byte
}

func (a *gaAgg) equal(b *gaAgg) bool {
	return a.n == b.n && a.sum == b.sum && a.has == b.has && bytes.Equal(a.ext, b.ext)
}

// gaDistinctCol is the count(DISTINCT) calls over one argument column.
type gaDistinctCol struct {
	col    int
	kind   plan.Kind
	prefix []byte
	aggs   []int
}

// gaBatchEntry is a group's changes in the current mini-batch: its result
// before the batch and now (each a copy, or none), and the timestamp of
// its last change.
type gaBatchEntry struct {
	before, cur       row.Row
	hasBefore, hasCur bool
	ts                int64
}

func (g *GroupAggregate) Open(ctx sdk.Context) error {
	op, err := loadPlan(ctx, "sql-group-aggregate")
	if err != nil {
		return err
	}
	if op.GroupAgg == nil {
		return errors.New("sql-group-aggregate: the plan is not a group aggregate's")
	}
	if err := g.open(op.GroupAgg, ctx); err != nil {
		return fmt.Errorf("sql-group-aggregate: %w", err)
	}
	return nil
}

func (g *GroupAggregate) open(p *plan.GroupAgg, ctx sdk.Context) error {
	g.codec = row.NewCodec(p.In)
	g.changelog = p.InChangelog
	for _, c := range p.Group {
		if c < 0 || c >= len(p.In) {
			return fmt.Errorf("group column %d of an input of %d columns", c, len(p.In))
		}
		k := p.In[c].Type.Kind
		g.groupFloat = append(g.groupFloat, k == plan.Float32 || k == plan.Float64)
	}
	g.group = p.Group
	if len(p.Out) != len(p.Group)+len(p.Aggs) {
		return fmt.Errorf("an output of %d columns for %d group columns and %d aggregates", len(p.Out), len(p.Group), len(p.Aggs))
	}
	for i, c := range p.Aggs {
		a, err := newAggCall(c, p.In)
		if err != nil {
			return fmt.Errorf("aggregate %d: %w", i, err)
		}
		g.calls = append(g.calls, a)
		g.prefix = append(g.prefix, binary.AppendUvarint(nil, uint64(i)))
		mm := a.acc == accExtreme && g.changelog
		g.minmax = append(g.minmax, mm)
		g.useMinmax = g.useMinmax || mm
		if a.acc != accDistinct {
			continue
		}
		g.useDistinct = true
		at := -1
		for j, d := range g.distinct {
			if d.col == c.Arg {
				at = j
			}
		}
		if at < 0 {
			at = len(g.distinct)
			g.distinct = append(g.distinct, gaDistinctCol{col: c.Arg, kind: a.arg.Kind, prefix: binary.AppendUvarint(nil, uint64(c.Arg))})
		}
		g.distinct[at].aggs = append(g.distinct[at].aggs, i)
		if n := len(g.distinct[at].aggs); n > len(g.mults) {
			g.mults, g.counted = make([]uint64, n), make([]bool, n)
		}
	}
	if p.TTL < 0 || p.MiniBatch.Size < 0 || p.MiniBatch.Latency < 0 {
		return fmt.Errorf("TTL %dms, mini-batch of %d rows and %dms: want none negative", p.TTL, p.MiniBatch.Size, p.MiniBatch.Latency)
	}
	var err error
	if g.enc, err = newEncoder(p.Out, p.Enc); err != nil {
		return err
	}
	g.acc = ctx.ValueState("acc")
	g.peek = g.acc.Value
	if pk, ok := g.acc.(gaPeeker); ok {
		g.peek = pk.Peek
	}
	if g.useDistinct {
		g.distinctMap = ctx.MapState("distinct")
	}
	if g.useMinmax {
		g.minmaxMap = ctx.MapState("minmax")
	}
	g.ttl = p.TTL
	g.batchSize, g.latency = p.MiniBatch.Size, p.MiniBatch.Latency
	if g.ttl > 0 || (g.batchSize > 0 && g.latency > 0) {
		g.timers = ctx.TimerService()
	}
	if g.batchSize > 0 {
		g.batch = make(map[string]*gaBatchEntry)
	}
	n := len(g.calls)
	g.cur.aggs, g.old.aggs, g.extBuf = make([]gaAgg, n), make([]gaAgg, n), make([][]byte, n)
	g.nResults = len(p.Out)
	g.oldRow, g.newRow = make(row.Row, g.nResults), make(row.Row, g.nResults)
	return nil
}

func (g *GroupAggregate) ProcessRecord(rec sdk.Record, out sdk.Collector) error {
	if err := g.process(rec, out); err != nil {
		return fmt.Errorf("sql-group-aggregate: %w", err)
	}
	return nil
}

func (g *GroupAggregate) process(rec sdk.Record, out sdk.Collector) error {
	kind, v := row.Insert, rec.Value
	if g.changelog {
		var err error
		if kind, v, err = row.SplitKind(v); err != nil {
			return err
		}
	}
	adds := kind.Adds()
	raw, exists := g.peek()
	if exists {
		if err := g.decodeAcc(raw, &g.cur); err != nil {
			return fmt.Errorf("state of group %x: %w", rec.Key, err)
		}
		exists = g.cur.rows > 0
	}
	if !exists {
		if !adds {
			// Nothing to take back from (the group's state expired, say).
			return nil
		}
		g.cur.rows, g.cur.lastAccess, g.cur.timerAt = 0, 0, 0
		for i := range g.cur.aggs {
			g.cur.aggs[i] = gaAgg{}
		}
	}
	var err error
	if g.in, err = g.codec.Decode(v, g.in); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	g.old.rows = g.cur.rows
	copy(g.old.aggs, g.cur.aggs)
	if adds {
		g.cur.rows++
	} else {
		g.cur.rows--
	}
	if err := g.apply(adds); err != nil {
		return err
	}
	changed := !exists || g.cur.rows == 0
	for i := range g.cur.aggs {
		if changed {
			break
		}
		changed = !g.cur.aggs[i].equal(&g.old.aggs[i])
	}
	if changed {
		for j, c := range g.group {
			v := g.in[c]
			if g.groupFloat[j] && !v.IsNull() {
				switch f := v.Float(); {
				case f == 0:
					v = row.Float(0)
				case f != f:
					v = row.Float(math.NaN())
				}
			}
			g.oldRow[j], g.newRow[j] = v, v
		}
		if g.batchSize > 0 {
			err = g.batchChange(rec, exists)
		} else {
			err = g.emitChange(rec.Timestamp, exists, out)
		}
		if err != nil {
			return err
		}
	}
	if g.cur.rows == 0 {
		g.clearGroup()
		if g.ttl > 0 && g.cur.timerAt != 0 {
			g.timers.DeleteProcessingTimeTimer(nil, g.cur.timerAt)
		}
	} else {
		if g.ttl > 0 {
			now := g.timers.CurrentProcessingTime()
			g.cur.lastAccess = now
			if g.cur.timerAt == 0 {
				g.cur.timerAt = now + g.ttl
				g.timers.RegisterProcessingTimeTimer(nil, g.cur.timerAt)
			}
		}
		g.accBuf = g.encodeAcc(g.accBuf[:0], &g.cur)
		g.acc.Update(g.accBuf)
	}
	if g.batchSize > 0 && len(g.order) >= g.batchSize {
		g.flushBatch(out, 0, false)
	}
	return nil
}

// emitChange emits the change of the group's result the record made.
func (g *GroupAggregate) emitChange(ts int64, existed bool, out sdk.Collector) error {
	switch {
	case !existed:
		if err := g.results(&g.cur, g.newRow); err != nil {
			return err
		}
		g.enc.emit(out, row.Insert, g.newRow, ts)
	case g.cur.rows == 0:
		if err := g.results(&g.old, g.oldRow); err != nil {
			return err
		}
		g.enc.emit(out, row.Delete, g.oldRow, ts)
	default:
		if err := g.results(&g.old, g.oldRow); err != nil {
			return err
		}
		if err := g.results(&g.cur, g.newRow); err != nil {
			return err
		}
		if gaRowsEqual(g.oldRow, g.newRow) {
			return nil
		}
		g.enc.emit(out, row.UpdateBefore, g.oldRow, ts)
		g.enc.emit(out, row.UpdateAfter, g.newRow, ts)
	}
	return nil
}

// batchChange folds the change of the group's result the record made into
// the mini-batch.
func (g *GroupAggregate) batchChange(rec sdk.Record, existed bool) error {
	e := g.batch[string(rec.Key)]
	if e == nil {
		if n := len(g.free); n > 0 {
			e, g.free = g.free[n-1], g.free[:n-1]
		} else {
			e = &gaBatchEntry{}
		}
		e.hasBefore = existed
		if existed {
			if err := g.results(&g.old, g.oldRow); err != nil {
				return err
			}
			e.before = append(e.before[:0], g.oldRow...)
		}
		if len(g.order) == 0 && g.latency > 0 {
			g.deadline = g.timers.CurrentProcessingTime() + g.latency
			g.timers.RegisterProcessingTimeTimer(gaMiniBatchNS, g.deadline)
		}
		g.batch[string(rec.Key)] = e
		g.order = append(g.order, e)
	}
	e.hasCur, e.ts = g.cur.rows > 0, rec.Timestamp
	if e.hasCur {
		if err := g.results(&g.cur, g.newRow); err != nil {
			return err
		}
		e.cur = append(e.cur[:0], g.newRow...)
	}
	return nil
}

// flushBatch emits the mini-batch's changes, each group's at its last
// change's timestamp or, when at, at ts.
func (g *GroupAggregate) flushBatch(out sdk.Collector, ts int64, at bool) {
	for _, e := range g.order {
		t := e.ts
		if at {
			t = ts
		}
		switch {
		case !e.hasBefore && e.hasCur:
			g.enc.emit(out, row.Insert, e.cur, t)
		case e.hasBefore && !e.hasCur:
			g.enc.emit(out, row.Delete, e.before, t)
		case e.hasBefore && e.hasCur && !gaRowsEqual(e.before, e.cur):
			g.enc.emit(out, row.UpdateBefore, e.before, t)
			g.enc.emit(out, row.UpdateAfter, e.cur, t)
		}
		g.free = append(g.free, e)
	}
	clear(g.order)
	g.order = g.order[:0]
	clear(g.batch)
}

func gaRowsEqual(a, b row.Row) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// apply adds the decoded input row to (or takes it back from) the
// aggregates of g.cur.
func (g *GroupAggregate) apply(adds bool) error {
	for i := range g.calls {
		a := &g.calls[i]
		if a.acc == accDistinct {
			continue
		}
		v, ok := a.value(g.in)
		if !ok {
			continue
		}
		s := &g.cur.aggs[i]
		switch a.acc {
		case accCount:
			if adds {
				s.n++
			} else if s.n > 0 {
				s.n--
			}
		case accSumInt:
			if adds {
				sum, ok := add64(s.sum, v.Int())
				if !ok {
					return a.overflow()
				}
				s.sum, s.n = sum, s.n+1
			} else if s.n > 0 {
				sum, ok := gaSub64(s.sum, v.Int())
				if !ok {
					return a.overflow()
				}
				s.sum, s.n = sum, s.n-1
				if s.n == 0 {
					s.sum = 0
				}
			}
		case accSumFloat:
			f := math.Float64frombits(uint64(s.sum))
			if adds {
				s.sum, s.n = int64(math.Float64bits(f+v.Float())), s.n+1
			} else if s.n > 0 {
				s.sum, s.n = int64(math.Float64bits(f-v.Float())), s.n-1
				if s.n == 0 {
					s.sum = 0 // no rounding residue from a sum of nothing
				}
			}
		case accExtreme:
			g.scratch = appendValue(g.scratch[:0], a.arg.Kind, v)
			if g.minmax[i] {
				if err := g.applyMinmax(i, s, v, adds); err != nil {
					return err
				}
			} else if adds && (!s.has || gaBetter(a, g.scratch, s.ext)) {
				g.setExtreme(i, s, g.scratch)
			}
		}
	}
	for d := range g.distinct {
		if err := g.applyDistinct(&g.distinct[d], adds); err != nil {
			return err
		}
	}
	return nil
}

// gaBetter reports whether the encoded value x is a better extreme than y
// for the min or max a.
func gaBetter(a *aggCall, x, y []byte) bool {
	c := compareEncoded(a.arg.Kind, x, y)
	if a.Fn == plan.Min {
		return c < 0
	}
	return c > 0
}

func (g *GroupAggregate) setExtreme(i int, s *gaAgg, enc []byte) {
	g.extBuf[i] = append(g.extBuf[i][:0], enc...)
	s.has, s.ext = true, g.extBuf[i]
}

// applyMinmax counts v (encoded in g.scratch) in or out of min or max i's
// values over a changelog; when the extreme's last row goes, the next is
// the first (min) or last (max) of the values left.
func (g *GroupAggregate) applyMinmax(i int, s *gaAgg, v row.Value, adds bool) error {
	a := &g.calls[i]
	g.ukBuf = appendOrdered(append(g.ukBuf[:0], g.prefix[i]...), a.arg.Kind, v)
	m, present, err := gaMultiplicity(g.minmaxMap, g.ukBuf)
	if err != nil {
		return err
	}
	if adds {
		g.valBuf = binary.AppendUvarint(g.valBuf[:0], m+1)
		g.minmaxMap.Put(g.ukBuf, g.valBuf)
		if !s.has || gaBetter(a, g.scratch, s.ext) {
			g.setExtreme(i, s, g.scratch)
		}
		return nil
	}
	if !present {
		return nil // a value never added: nothing to take back
	}
	if m--; m > 0 {
		g.valBuf = binary.AppendUvarint(g.valBuf[:0], m)
		g.minmaxMap.Put(g.ukBuf, g.valBuf)
		return nil
	}
	g.minmaxMap.Remove(g.ukBuf)
	if !s.has || compareEncoded(a.arg.Kind, g.scratch, s.ext) != 0 {
		return nil
	}
	// The extreme is gone: the values left are in order after the prefix.
	prefix, isMax := g.prefix[i], a.Fn == plan.Max
	var found []byte
	for k := range g.minmaxMap.All() {
		if !bytes.HasPrefix(k, prefix) {
			if found != nil || bytes.Compare(k, prefix) > 0 {
				break
			}
			continue
		}
		found = k
		if !isMax {
			break
		}
	}
	if found == nil {
		s.has, s.ext = false, nil
		return nil
	}
	next, err := decodeOrdered(a.arg.Kind, found[len(prefix):])
	if err != nil {
		return fmt.Errorf("minmax entry %x: %w", found, err)
	}
	g.scratch = appendValue(g.scratch[:0], a.arg.Kind, next)
	g.setExtreme(i, s, g.scratch)
	return nil
}

// gaMultiplicity reads the uvarint value of userKey in m (0 when absent).
func gaMultiplicity(m sdk.MapState, userKey []byte) (uint64, bool, error) {
	b, ok := m.Get(userKey)
	if !ok {
		return 0, false, nil
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || k != len(b) {
		return 0, false, fmt.Errorf("minmax entry %x: %w", userKey, errCorruptAcc)
	}
	return n, true, nil
}

// applyDistinct counts the value of column d.col in or out of the
// count(DISTINCT) calls over it whose FILTERs take the row.
func (g *GroupAggregate) applyDistinct(d *gaDistinctCol, adds bool) error {
	v := g.in[d.col]
	if v.IsNull() {
		return nil
	}
	some := false
	for j, ai := range d.aggs {
		_, g.counted[j] = g.calls[ai].value(g.in)
		some = some || g.counted[j]
	}
	if !some {
		return nil
	}
	g.ukBuf = appendValue(append(g.ukBuf[:0], d.prefix...), d.kind, v)
	b, present := g.distinctMap.Get(g.ukBuf)
	if !present && !adds {
		return nil
	}
	mults := g.mults[:len(d.aggs)]
	for j := range mults {
		mults[j] = 0
		if present {
			n, k := binary.Uvarint(b)
			if k <= 0 {
				return fmt.Errorf("distinct entry %x: %w", g.ukBuf, errCorruptAcc)
			}
			mults[j], b = n, b[k:]
		}
	}
	if present && len(b) != 0 {
		return fmt.Errorf("distinct entry %x: %w", g.ukBuf, errCorruptAcc)
	}
	changed, left := false, false
	for j, ai := range d.aggs {
		s := &g.cur.aggs[ai]
		switch {
		case !g.counted[j]:
		case adds && mults[j] == 0:
			mults[j], s.n, changed = 1, s.n+1, true
		case adds && g.changelog:
			// An append-only input never takes a value back: whether
			// it was seen is enough, and the entry is not rewritten.
			mults[j], changed = mults[j]+1, true
		case !adds && mults[j] > 0:
			mults[j], changed = mults[j]-1, true
			if mults[j] == 0 && s.n > 0 {
				s.n--
			}
		}
		left = left || mults[j] > 0
	}
	switch {
	case !changed:
	case !left:
		g.distinctMap.Remove(g.ukBuf)
	default:
		g.valBuf = g.valBuf[:0]
		for _, m := range mults {
			g.valBuf = binary.AppendUvarint(g.valBuf, m)
		}
		g.distinctMap.Put(g.ukBuf, g.valBuf)
	}
	return nil
}

// clearGroup drops all of the current group's state.
func (g *GroupAggregate) clearGroup() {
	g.acc.Clear()
	if g.useDistinct {
		g.distinctMap.Clear()
	}
	if g.useMinmax {
		g.minmaxMap.Clear()
	}
}

// results puts the aggregates' results of acc into dst after the group
// columns.
func (g *GroupAggregate) results(acc *gaAcc, dst row.Row) error {
	at := len(g.group)
	for i := range g.calls {
		v, err := g.result(&g.calls[i], &acc.aggs[i])
		if err != nil {
			return err
		}
		dst[at+i] = v
	}
	return nil
}

// result is call a's value (as agg.go's result).
func (g *GroupAggregate) result(a *aggCall, s *gaAgg) (row.Value, error) {
	switch a.acc {
	case accCount, accDistinct:
		return ratio(int64(s.n), 0, 1, a.Type)
	case accExtreme:
		if !s.has {
			return row.Null(), nil
		}
		return decodeValue(a.arg.Kind, s.ext), nil
	}
	if s.n == 0 {
		return row.Null(), nil
	}
	d := uint64(1)
	if a.Fn == plan.Avg {
		d = s.n
	}
	if a.acc == accSumFloat {
		f := math.Float64frombits(uint64(s.sum)) / float64(d)
		if a.Type.Kind == plan.Float32 {
			f = float64(float32(f))
		}
		return row.Float(f), nil
	}
	scale := 0
	if a.arg.Kind == plan.Decimal {
		scale = int(a.arg.Scale)
	}
	v, err := ratio(s.sum, scale, d, a.Type)
	if err != nil {
		return v, fmt.Errorf("%s: %w", a.Fn, err)
	}
	return v, nil
}

// decodeAcc decodes the accumulator b into acc, whose extremes then alias
// b.
func (g *GroupAggregate) decodeAcc(b []byte, acc *gaAcc) error {
	if len(b) == 0 || b[0] != gaAccFormat {
		return errCorruptAcc
	}
	b = b[1:]
	var n, m, k int
	acc.rows, n = binary.Uvarint(b)
	if n > 0 {
		acc.lastAccess, m = binary.Varint(b[n:])
	}
	if n > 0 && m > 0 {
		acc.timerAt, k = binary.Varint(b[n+m:])
	}
	if n <= 0 || m <= 0 || k <= 0 {
		return errCorruptAcc
	}
	b = b[n+m+k:]
	for i := range g.calls {
		a, s := &g.calls[i], &acc.aggs[i]
		*s = gaAgg{}
		switch a.acc {
		case accExtreme:
			if len(b) == 0 || b[0] > 1 {
				return errCorruptAcc
			}
			s.has, b = b[0] == 1, b[1:]
			if s.has {
				l, err := valueLen(a.arg.Kind, b)
				if err != nil {
					return err
				}
				s.ext, b = b[:l:l], b[l:]
			}
			continue
		}
		s.n, n = binary.Uvarint(b)
		if n <= 0 {
			return errCorruptAcc
		}
		b = b[n:]
		switch a.acc {
		case accSumInt:
			s.sum, n = binary.Varint(b)
			if n <= 0 {
				return errCorruptAcc
			}
			b = b[n:]
		case accSumFloat:
			if len(b) < 8 {
				return errCorruptAcc
			}
			s.sum, b = int64(binary.LittleEndian.Uint64(b)), b[8:]
		}
	}
	if len(b) != 0 {
		return errCorruptAcc
	}
	return nil
}

// encodeAcc appends acc's encoding to dst.
func (g *GroupAggregate) encodeAcc(dst []byte, acc *gaAcc) []byte {
	dst = append(dst, gaAccFormat)
	dst = binary.AppendUvarint(dst, acc.rows)
	dst = binary.AppendVarint(dst, acc.lastAccess)
	dst = binary.AppendVarint(dst, acc.timerAt)
	for i := range g.calls {
		a, s := &g.calls[i], &acc.aggs[i]
		switch a.acc {
		case accExtreme:
			if !s.has {
				dst = append(dst, 0)
				continue
			}
			dst = append(append(dst, 1), s.ext...)
			continue
		}
		dst = binary.AppendUvarint(dst, s.n)
		switch a.acc {
		case accSumInt:
			dst = binary.AppendVarint(dst, s.sum)
		case accSumFloat:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(s.sum))
		}
	}
	return dst
}

// OnTimer ends the mini-batch when its latency passed (namespace "mb"),
// or drops the group when the TTL passed since a row last touched it.
func (g *GroupAggregate) OnTimer(t sdk.Timer, out sdk.Collector) error {
	if bytes.Equal(t.Namespace, gaMiniBatchNS) {
		// A timer of a batch flushed already is stale.
		if len(g.order) > 0 && t.Timestamp >= g.deadline {
			g.flushBatch(out, t.Timestamp, true)
		}
		return nil
	}
	if g.ttl <= 0 {
		return nil
	}
	raw, ok := g.peek()
	if !ok {
		return nil
	}
	if err := g.decodeAcc(raw, &g.cur); err != nil {
		return fmt.Errorf("sql-group-aggregate: state of group %x: %w", t.Key, err)
	}
	expires := g.cur.lastAccess + g.ttl
	if g.timers.CurrentProcessingTime() >= expires {
		g.clearGroup()
		return nil
	}
	if t.Timestamp < g.cur.timerAt {
		return nil // not the group's timer: that one is still to come
	}
	g.cur.timerAt = expires
	g.timers.RegisterProcessingTimeTimer(nil, expires)
	g.accBuf = g.encodeAcc(g.accBuf[:0], &g.cur)
	g.acc.Update(g.accBuf)
	return nil
}

// PrepareSnapshotPreBarrier emits the mini-batch and what the encoder
// holds back: no change waits across a checkpoint, whose state already
// has it.
func (g *GroupAggregate) PrepareSnapshotPreBarrier(_ int64, out sdk.Collector) error {
	g.flushBatch(out, 0, false)
	g.enc.flush(out)
	return nil
}

func (g *GroupAggregate) EndInput(out sdk.Collector) error {
	g.flushBatch(out, 0, false)
	g.enc.flush(out)
	return nil
}

func (g *GroupAggregate) Close() error { return nil }

// gaSub64 is a−b, false when it overflows.
func gaSub64(a, b int64) (int64, bool) {
	c := a - b
	return c, (c < a) == (b > 0)
}

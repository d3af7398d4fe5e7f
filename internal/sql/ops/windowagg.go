package ops

import (
	"errors"
	"fmt"

	"github.com/weirproject/weir/internal/operators"
	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	"github.com/weirproject/weir/internal/window"
	"github.com/weirproject/weir/sdk"
)

// WindowAggregate is the operator sql-window-aggregate (a plan.WindowAgg):
// the runtime's window operator (operators.Window: its panes, sessions,
// timers and state) folding its input rows with the SQL aggregate calls.
// Its input is keyed by the group columns, so the key of a window's
// record is its group's values: the result row takes them from there.
type WindowAggregate struct {
	win operators.Window
}

func (w *WindowAggregate) Open(ctx sdk.Context) error {
	op, err := loadPlan(ctx, "sql-window-aggregate")
	if err != nil {
		return err
	}
	if op.WindowAgg == nil {
		return errors.New("sql-window-aggregate: the plan is not a window aggregate's")
	}
	if w.win.Spec, err = windowSpec(op.WindowAgg.Window); err != nil {
		return fmt.Errorf("sql-window-aggregate: %w", err)
	}
	agg, err := newAggregator(op.WindowAgg)
	if err != nil {
		return fmt.Errorf("sql-window-aggregate: %w", err)
	}
	w.win.Agg = agg
	return w.win.Open(ctx)
}

func (w *WindowAggregate) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	return w.win.ProcessRecord(r, out)
}

func (w *WindowAggregate) OnTimer(t sdk.Timer, out sdk.Collector) error {
	return w.win.OnTimer(t, out)
}

func (w *WindowAggregate) Close() error { return w.win.Close() }

// windowSpec is the window operator's spec for a plan's windows. A
// cascade's rows are stamped at their windows' last millisecond, so
// tumbling windows of the slide gather each window's rows in the one
// ending where it ends (the aggregator reports its start).
func windowSpec(w plan.Window) (window.Spec, error) {
	s := window.Spec{ProcessingTime: w.ProcessingTime}
	switch w.Kind {
	case plan.Tumble, plan.Hop:
		slide := w.Slide
		if w.Kind == plan.Tumble || slide == 0 {
			slide = w.Size
		}
		if w.Size <= 0 || slide <= 0 || slide > w.Size {
			return s, fmt.Errorf("%s window of size %dms and slide %dms: want 0 < slide <= size", w.Kind, w.Size, slide)
		}
		s.Kind, s.Size, s.Slide = window.Sliding, w.Size, slide
		if w.Cascade {
			if w.ProcessingTime {
				// The clock, past the windows' ends when their rows
				// arrive, would put them in the next ones.
				return s, errors.New("an aggregate of processing-time windows' results is not supported")
			}
			s.Size = slide
		}
		if s.Size == s.Slide {
			s.Kind = window.Tumbling
		}
	case plan.Session:
		if w.Cascade {
			return s, errors.New("an aggregate of session windows' results is not supported")
		}
		if w.Gap <= 0 {
			return s, fmt.Errorf("session window of gap %dms: want a positive gap", w.Gap)
		}
		s.Kind, s.Gap = window.Session, w.Gap
	default:
		return s, fmt.Errorf("unknown window kind %q", w.Kind)
	}
	return s, nil
}

// aggregator is the operators.Aggregator of a plan.WindowAgg.
type aggregator struct {
	codec *row.Codec
	in    row.Row
	calls []aggCall
	// keyCodec decodes a record key into the group's values (keyRow).
	keyCodec *row.Codec
	keyRow   row.Row
	output   []plan.OutputItem
	// groupAt[i] is the key column of output item i when it is a group
	// column.
	groupAt []int
	// size is the window size a cascade reports window_start by (0: the
	// window's own start).
	size int64
	enc  *encoder
	vals row.Row
	out  row.Row
	// decode is false when no call reads a column (count(*) alone): the
	// rows need not be decoded.
	decode bool
	// buf is the accumulator Add returns, merged the ones Merge writes to
	// (one that is not what it reads: it merges into its last result),
	// and scratch room for a value's encoding.
	buf     []byte
	merged  [2][]byte
	scratch []byte
	// partial: the input records are a local aggregate's accumulators,
	// merged, not rows added.
	partial bool
}

func newAggregator(p *plan.WindowAgg) (*aggregator, error) {
	g := &aggregator{codec: row.NewCodec(p.In), output: p.Output, partial: p.Partial}
	var keySchema plan.Schema
	for _, c := range p.Group {
		if c < 0 || c >= len(p.In) {
			return nil, fmt.Errorf("group column %d of an input of %d columns", c, len(p.In))
		}
		keySchema = append(keySchema, p.In[c])
	}
	g.keyCodec, g.keyRow = row.NewCodec(keySchema), make(row.Row, len(p.Group))
	for i, c := range p.Aggs {
		a, err := newAggCall(c, p.In)
		if err != nil {
			return nil, fmt.Errorf("aggregate %d: %w", i, err)
		}
		g.calls = append(g.calls, a)
		g.decode = g.decode || c.Arg >= 0 || c.Filter >= 0
	}
	if len(p.Output) != len(p.Out) {
		return nil, fmt.Errorf("%d output items for an output of %d columns", len(p.Output), len(p.Out))
	}
	g.groupAt = make([]int, len(p.Output))
	for i, it := range p.Output {
		g.groupAt[i] = -1
		switch it.Kind {
		case "group":
			for j, c := range p.Group {
				if c == it.Index {
					g.groupAt[i] = j
				}
			}
			if g.groupAt[i] < 0 {
				return nil, fmt.Errorf("output item %d: input column %d is not a group column", i, it.Index)
			}
		case "window_start", "window_end":
		case "agg":
			if it.Index < 0 || it.Index >= len(p.Aggs) {
				return nil, fmt.Errorf("output item %d: aggregate %d of %d", i, it.Index, len(p.Aggs))
			}
		default:
			return nil, fmt.Errorf("output item %d: unknown kind %q", i, it.Kind)
		}
	}
	if p.Window.Cascade {
		g.size = p.Window.Size
	}
	var err error
	if g.enc, err = newEncoder(p.Out, p.Enc); err != nil {
		return nil, err
	}
	g.vals, g.out = make(row.Row, len(p.Aggs)), make(row.Row, len(p.Output))
	return g, nil
}

func (g *aggregator) Add(acc []byte, r sdk.Record) ([]byte, error) {
	if g.partial {
		if acc == nil {
			return r.Value, nil
		}
		return g.Merge(acc, r.Value)
	}
	var err error
	if g.decode {
		if g.in, err = g.codec.Decode(r.Value, g.in); err != nil {
			return nil, err
		}
	}
	if acc != nil {
		if acc, err = accBody(acc); err != nil {
			return nil, err
		}
	}
	out := append(g.buf[:0], accFormat)
	for i := range g.calls {
		a := &g.calls[i]
		var seg []byte
		if acc != nil {
			if seg, acc, err = a.segment(acc); err != nil {
				return nil, err
			}
		}
		v, ok := a.value(g.in)
		if !ok {
			if seg == nil {
				out = a.appendEmpty(out)
			} else {
				out = append(out, seg...)
			}
			continue
		}
		if out, g.scratch, err = a.add(out, seg, v, g.scratch); err != nil {
			return nil, err
		}
	}
	g.buf = out
	return out, nil
}

func (g *aggregator) Merge(x, y []byte) ([]byte, error) {
	turn := -1
	for i, m := range g.merged {
		if !sameArray(m, x) && !sameArray(m, y) {
			turn = i
		}
	}
	var out []byte
	if turn >= 0 {
		out = g.merged[turn][:0]
	}
	out = append(out, accFormat)
	x, err := accBody(x)
	if err != nil {
		return nil, err
	}
	if y, err = accBody(y); err != nil {
		return nil, err
	}
	for i := range g.calls {
		a := &g.calls[i]
		sx, rx, err := a.segment(x)
		if err != nil {
			return nil, err
		}
		sy, ry, err := a.segment(y)
		if err != nil {
			return nil, err
		}
		x, y = rx, ry
		if out, err = a.merge(out, sx, sy); err != nil {
			return nil, err
		}
	}
	if turn >= 0 {
		g.merged[turn] = out
	}
	return out, nil
}

// sameArray reports whether a and b are slices of one array (that reach
// its end, as the buffers here do).
func sameArray(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:cap(a)][cap(a)-1] == &b[:cap(b)][cap(b)-1]
}

func (g *aggregator) Result(key []byte, start, end int64, acc []byte) (sdk.Record, error) {
	var err error
	if g.keyRow, err = g.keyCodec.Decode(key, g.keyRow); err != nil {
		return sdk.Record{}, fmt.Errorf("group key: %w", err)
	}
	if acc, err = accBody(acc); err != nil {
		return sdk.Record{}, err
	}
	for i := range g.calls {
		a := &g.calls[i]
		var seg []byte
		if seg, acc, err = a.segment(acc); err != nil {
			return sdk.Record{}, err
		}
		if g.vals[i], err = a.result(seg); err != nil {
			return sdk.Record{}, err
		}
	}
	if len(acc) > 0 {
		return sdk.Record{}, errCorruptAcc
	}
	if g.size > 0 {
		start = end - g.size
	}
	for i, it := range g.output {
		switch it.Kind {
		case "group":
			g.out[i] = g.keyRow[g.groupAt[i]]
		case "window_start":
			g.out[i] = row.Int(start * 1000)
		case "window_end":
			g.out[i] = row.Int(end * 1000)
		default:
			g.out[i] = g.vals[it.Index]
		}
	}
	return g.enc.record(g.out, window.MaxTimestamp(end)), nil
}

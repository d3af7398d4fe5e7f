package weir

import (
	"fmt"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// KeyedProcessFunction processes a keyed stream record by record (Flink's
// KeyedProcessFunction): with typed keyed state (ValueState, MapState,
// ListState, read and written through ctx) and timers.
type KeyedProcessFunction[K comparable, T, U any] interface {
	ProcessElement(ctx *Context[K, U], v T) error
}

// TimerFunction is implemented by process functions that register timers:
// OnTimer runs when one fires, with ctx scoped to the timer's key.
type TimerFunction[K comparable, U any] interface {
	OnTimer(ctx *Context[K, U], t Timer) error
}

// Timer is a timer that fired.
type Timer struct {
	Timestamp Time
	// ProcessingTime: the clock passed it, not the watermark.
	ProcessingTime bool
}

// Context is what a process function works with, scoped to the key of the
// record (or timer) being processed.
type Context[K comparable, U any] struct {
	keys   *keyedScope
	kc     Codec[K]
	timers sdk.TimerService
	emit   emitter[U]
	out    sdk.Collector
	rawKey []byte
	ts     Time
	key    K
	hasKey bool
}

func (c *Context[K, U]) scope() *keyedScope { return c.keys }

// Key is the current key.
func (c *Context[K, U]) Key() K {
	if !c.hasKey {
		k, err := c.kc.Decode(c.rawKey)
		if err != nil {
			c.keys.fail(fmt.Errorf("weir: vertex %q: decode key: %w", c.keys.schema.vertex, err))
		}
		c.key, c.hasKey = k, true
	}
	return c.key
}

// Timestamp is the event time of the record being processed (of the
// timer, in OnTimer).
func (c *Context[K, U]) Timestamp() Time { return c.ts }

// Emit sends v downstream, at the current timestamp.
func (c *Context[K, U]) Emit(v U) { c.out.Collect(c.emit.record(v, int64(c.ts))) }

// EmitAt sends v downstream with event time ts.
func (c *Context[K, U]) EmitAt(v U, ts Time) { c.out.Collect(c.emit.record(v, int64(ts))) }

// CurrentWatermark is the subtask's event time: no record at or before it
// is expected any more.
func (c *Context[K, U]) CurrentWatermark() Time { return Time(c.timers.CurrentWatermark()) }

// CurrentProcessingTime is the subtask's clock.
func (c *Context[K, U]) CurrentProcessingTime() Time {
	return Time(c.timers.CurrentProcessingTime())
}

// RegisterEventTimeTimer asks for OnTimer when the watermark reaches ts,
// for the current key; registering it again is a no-op. A key has one
// timer per timestamp (as in Flink): two reasons for a timer at the same
// time are one timer, and deleting it deletes it for both — a function
// keeping timers for different purposes tells them apart when they fire.
func (c *Context[K, U]) RegisterEventTimeTimer(ts Time) {
	c.timers.RegisterEventTimeTimer(nil, int64(ts))
}

// RegisterProcessingTimeTimer asks for OnTimer when the clock reaches ts.
func (c *Context[K, U]) RegisterProcessingTimeTimer(ts Time) {
	c.timers.RegisterProcessingTimeTimer(nil, int64(ts))
}

// DeleteEventTimeTimer cancels a timer of the current key.
func (c *Context[K, U]) DeleteEventTimeTimer(ts Time) { c.timers.DeleteEventTimeTimer(nil, int64(ts)) }

// DeleteProcessingTimeTimer cancels a timer of the current key.
func (c *Context[K, U]) DeleteProcessingTimeTimer(ts Time) {
	c.timers.DeleteProcessingTimeTimer(nil, int64(ts))
}

// Process runs a keyed process function, one made by newFn for every
// subtask (so it may keep what it likes in its fields), over ks.
func Process[T any, K comparable, U any](ks *KeyedStream[T, K], name string, newFn func() KeyedProcessFunction[K, T, U], opts ...VertexOption) *Stream[U] {
	s := ks.s
	res := &output[U]{codec: mustCodec[U](s.job, "Process "+name)}
	in, kc := s.codec(), ks.codec
	v := s.job.add(&vertex{name: name, signature: fmt.Sprintf("process(%s by %s) %s", typeName[T](), typeName[K](), typeName[U]())},
		opts, s.edges(weirv1.Partitioner_PARTITIONER_HASH)...)
	v.newOp = func() sdk.Operator {
		return &processOp[T, K, U]{base: base{name, v.signature}, in: in, kc: kc, res: res, newFn: newFn}
	}
	return &Stream[U]{job: s.job, ups: []upstream[U]{{v: v, out: res}}}
}

type processOp[T any, K comparable, U any] struct {
	base
	in    Codec[T]
	kc    Codec[K]
	res   *output[U]
	newFn func() KeyedProcessFunction[K, T, U]
	fn    KeyedProcessFunction[K, T, U]
	ctx   Context[K, U]
	keys  keyedScope
}

func (p *processOp[T, K, U]) Open(ctx sdk.Context) error {
	if err := p.open(ctx); err != nil {
		return err
	}
	p.keys = keyedScope{ctx: ctx, schema: openSchema(ctx, p.vertex), values: map[string]sdk.ValueState{}, maps: map[string]sdk.MapState{}}
	p.ctx = Context[K, U]{keys: &p.keys, kc: p.kc, timers: ctx.TimerService(), emit: emitter[U]{out: p.res}}
	p.fn = p.newFn()
	// The states the function holds in its fields are declared now, so
	// a restored one whose layout changed is migrated by every subtask
	// before any reads it, and every subtask's schema records the same
	// layout.
	declareFields(&p.keys, p.fn)
	return p.keys.err
}

func (p *processOp[T, K, U]) SnapshotState(int64) error { p.keys.schema.save(); return nil }
func (p *processOp[T, K, U]) Close() error              { return nil }

func (p *processOp[T, K, U]) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	v, err := p.in.Decode(r.Value)
	if err != nil {
		return fmt.Errorf("weir: vertex %q: decode %s: %w", p.vertex, typeName[T](), err)
	}
	c := &p.ctx
	c.out, c.rawKey, c.ts, c.hasKey = out, r.Key, Time(r.Timestamp), false
	if err := p.fn.ProcessElement(c, v); err != nil {
		return fmt.Errorf("weir: vertex %q: %w", p.vertex, err)
	}
	return p.keys.err
}

func (p *processOp[T, K, U]) OnTimer(t sdk.Timer, out sdk.Collector) error {
	tf, ok := p.fn.(TimerFunction[K, U])
	if !ok {
		return nil
	}
	c := &p.ctx
	c.out, c.rawKey, c.ts, c.hasKey = out, t.Key, Time(t.Timestamp), false
	if err := tf.OnTimer(c, Timer{Timestamp: Time(t.Timestamp), ProcessingTime: t.Domain == sdk.ProcessingTime}); err != nil {
		return fmt.Errorf("weir: vertex %q: timer: %w", p.vertex, err)
	}
	return p.keys.err
}

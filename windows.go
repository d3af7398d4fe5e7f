package weir

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/weirproject/weir/internal/operators"
	"github.com/weirproject/weir/internal/window"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// WindowAssigner says which windows a record falls in: Tumbling, Sliding
// or Session, on event time unless OnProcessingTime.
type WindowAssigner struct {
	spec window.Spec
	err  error
}

func ms(what string, d time.Duration) (int64, error) {
	if d <= 0 || d%time.Millisecond != 0 {
		return 0, fmt.Errorf("window %s must be a positive whole number of milliseconds, got %s", what, d)
	}
	return d.Milliseconds(), nil
}

// Tumbling windows of size, aligned to the Unix epoch.
func Tumbling(size time.Duration) WindowAssigner {
	s, err := ms("size", size)
	return WindowAssigner{spec: window.Spec{Kind: window.Tumbling, Size: s, Slide: s}, err: err}
}

// Sliding windows of size starting every slide (slide <= size). Records
// are aggregated once per pane of gcd(size, slide), not once per window.
func Sliding(size, slide time.Duration) WindowAssigner {
	a, err := ms("size", size)
	b, err2 := ms("slide", slide)
	if err == nil {
		err = err2
	}
	if err == nil && b > a {
		err = fmt.Errorf("window slide %s exceeds its size %s", slide, size)
	}
	return WindowAssigner{spec: window.Spec{Kind: window.Sliding, Size: a, Slide: b}, err: err}
}

// Session windows: a key's records closer than gap together.
func Session(gap time.Duration) WindowAssigner {
	g, err := ms("gap", gap)
	return WindowAssigner{spec: window.Spec{Kind: window.Session, Gap: g}, err: err}
}

// OnProcessingTime puts records in windows by the subtask's clock.
func (a WindowAssigner) OnProcessingTime() WindowAssigner {
	a.spec.ProcessingTime = true
	return a
}

// AllowedLateness keeps windows open for records up to d behind the
// watermark; a late record fires its window again with the new result.
func (a WindowAssigner) AllowedLateness(d time.Duration) WindowAssigner {
	a.spec.Lateness = d.Milliseconds()
	return a
}

// WindowedStream is a keyed stream cut into windows.
type WindowedStream[T any, K comparable] struct {
	ks       *KeyedStream[T, K]
	assigner WindowAssigner
	// v is the vertex Aggregate made of it.
	v *vertex
}

// Window cuts a keyed stream into windows (Flink's window()).
func Window[T any, K comparable](ks *KeyedStream[T, K], a WindowAssigner) *WindowedStream[T, K] {
	if a.err != nil {
		ks.s.job.fail(a.err)
	}
	return &WindowedStream[T, K]{ks: ks, assigner: a}
}

// Windowed is one window's result for one key.
type Windowed[K comparable, R any] struct {
	Key        K
	Start, End Time // End exclusive
	Value      R
}

// AggregateFunction folds a window's records into an accumulator and
// turns it into the result (Flink's AggregateFunction). Merge combines the
// accumulators of panes (sliding windows) and sessions.
type AggregateFunction[T, A, R any] interface {
	CreateAccumulator() A
	Add(acc A, v T) A
	Merge(a, b A) A
	Result(acc A) R
}

// AggregateFuncs is an AggregateFunction made of functions.
type AggregateFuncs[T, A, R any] struct {
	CreateFn func() A
	AddFn    func(acc A, v T) A
	MergeFn  func(a, b A) A
	ResultFn func(acc A) R
}

func (f AggregateFuncs[T, A, R]) CreateAccumulator() A { return f.CreateFn() }
func (f AggregateFuncs[T, A, R]) Add(acc A, v T) A     { return f.AddFn(acc, v) }
func (f AggregateFuncs[T, A, R]) Merge(a, b A) A       { return f.MergeFn(a, b) }
func (f AggregateFuncs[T, A, R]) Result(acc A) R       { return f.ResultFn(acc) }

// Aggregate computes agg over each window of each key, and emits one
// Windowed result per window when it fires (at its last millisecond).
func Aggregate[T any, K comparable, A, R any](ws *WindowedStream[T, K], name string, agg AggregateFunction[T, A, R], opts ...VertexOption) *Stream[Windowed[K, R]] {
	s := ws.ks.s
	ac := mustCodec[A](s.job, "Aggregate "+name+" accumulator")
	rc := mustCodec[R](s.job, "Aggregate "+name+" result")
	res := &output[Windowed[K, R]]{codec: windowedCodec[K, R]{kc: ws.ks.codec, rc: rc}}
	in, kc, spec := s.codec(), ws.ks.codec, ws.assigner.spec
	v := s.job.add(&vertex{
		name:      name,
		signature: fmt.Sprintf("aggregate(%s by %s, %s) %s", typeName[T](), typeName[K](), typeName[A](), typeName[R]()),
	}, opts, s.edges(weirv1.Partitioner_PARTITIONER_HASH)...)
	ws.v = v
	v.newOp = func() sdk.Operator {
		a := &typedAggregator[T, K, A, R]{in: in, kc: kc, ac: ac, agg: agg, emit: emitter[Windowed[K, R]]{out: res}}
		return &windowOp{base: base{name, v.signature}, accType: typeName[A](), w: &operators.Window{Spec: spec, Agg: a}}
	}
	return &Stream[Windowed[K, R]]{job: s.job, ups: []upstream[Windowed[K, R]]{{v: v, out: res}}}
}

// LateData is the records that came too late for the windows of ws (more
// than the allowed lateness behind the watermark), which are dropped and
// counted otherwise: the window vertex's side output "late". Call it after
// Aggregate or ReduceWindow made ws's vertex.
func LateData[T any, K comparable](ws *WindowedStream[T, K]) *Stream[T] {
	s := ws.ks.s
	if ws.v == nil {
		s.job.fail(fmt.Errorf("LateData: call it after Aggregate or ReduceWindow"))
		return &Stream[T]{job: s.job}
	}
	return &Stream[T]{job: s.job, ups: []upstream[T]{{v: ws.v, out: &output[T]{codec: s.codec()}, side: sdk.LateOutput}}}
}

// ReduceWindow folds each window's records with f (Flink's window reduce).
func ReduceWindow[T any, K comparable](ws *WindowedStream[T, K], name string, f func(a, b T) T, opts ...VertexOption) *Stream[Windowed[K, T]] {
	return Aggregate(ws, name, AggregateFunction[T, reduceAcc[T], T](reduceAgg[T]{f: f}), opts...)
}

// reduceAcc is a reduce's accumulator: empty until the first record.
type reduceAcc[T any] struct {
	Set   bool
	Value T
}

type reduceAgg[T any] struct{ f func(a, b T) T }

func (r reduceAgg[T]) CreateAccumulator() reduceAcc[T] { return reduceAcc[T]{} }
func (r reduceAgg[T]) Add(acc reduceAcc[T], v T) reduceAcc[T] {
	if !acc.Set {
		return reduceAcc[T]{Set: true, Value: v}
	}
	return reduceAcc[T]{Set: true, Value: r.f(acc.Value, v)}
}
func (r reduceAgg[T]) Merge(a, b reduceAcc[T]) reduceAcc[T] {
	switch {
	case !a.Set:
		return b
	case !b.Set:
		return a
	}
	return reduceAcc[T]{Set: true, Value: r.f(a.Value, b.Value)}
}
func (r reduceAgg[T]) Result(acc reduceAcc[T]) T { return acc.Value }

// windowOp is the window operator of the runtime with the Go API's
// schema check: the accumulator's type is recorded like a state's.
type windowOp struct {
	base
	accType string
	w       *operators.Window
	schema  *schema
}

func (o *windowOp) Open(ctx sdk.Context) error {
	if err := o.open(ctx); err != nil {
		return err
	}
	o.schema = openSchema(ctx, o.vertex)
	if _, err := o.schema.declare("window", o.accType, ""); err != nil {
		return err
	}
	return o.w.Open(ctx)
}

func (o *windowOp) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	return o.w.ProcessRecord(r, out)
}
func (o *windowOp) OnTimer(t sdk.Timer, out sdk.Collector) error { return o.w.OnTimer(t, out) }
func (o *windowOp) SnapshotState(int64) error                    { o.schema.save(); return nil }
func (o *windowOp) Close() error                                 { return o.w.Close() }

// typedAggregator is an AggregateFunction as the runtime's window
// operator takes it: accumulators encoded with their codec.
type typedAggregator[T any, K comparable, A, R any] struct {
	in   Codec[T]
	kc   Codec[K]
	ac   Codec[A]
	agg  AggregateFunction[T, A, R]
	emit emitter[Windowed[K, R]]
	buf  []byte
}

func (a *typedAggregator[T, K, A, R]) acc(b []byte) (A, error) {
	if b == nil {
		return a.agg.CreateAccumulator(), nil
	}
	return a.ac.Decode(b)
}

func (a *typedAggregator[T, K, A, R]) Add(acc []byte, r sdk.Record) ([]byte, error) {
	v, err := a.in.Decode(r.Value)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", typeName[T](), err)
	}
	x, err := a.acc(acc)
	if err != nil {
		return nil, err
	}
	a.buf = a.ac.Append(a.buf[:0], a.agg.Add(x, v))
	return a.buf, nil
}

func (a *typedAggregator[T, K, A, R]) Merge(x, y []byte) ([]byte, error) {
	ax, err := a.acc(x)
	if err != nil {
		return nil, err
	}
	ay, err := a.acc(y)
	if err != nil {
		return nil, err
	}
	return a.ac.Append(nil, a.agg.Merge(ax, ay)), nil
}

func (a *typedAggregator[T, K, A, R]) Result(key []byte, start, end int64, acc []byte) (sdk.Record, error) {
	x, err := a.acc(acc)
	if err != nil {
		return sdk.Record{}, err
	}
	k, err := a.kc.Decode(key)
	if err != nil {
		return sdk.Record{}, fmt.Errorf("decode key: %w", err)
	}
	return a.emit.record(Windowed[K, R]{Key: k, Start: Time(start), End: Time(end), Value: a.agg.Result(x)}, window.MaxTimestamp(end)), nil
}

// windowedCodec encodes window results without reflection: the key
// (length-prefixed), start, end, then the value.
type windowedCodec[K comparable, R any] struct {
	kc Codec[K]
	rc Codec[R]
}

func (c windowedCodec[K, R]) Append(dst []byte, w Windowed[K, R]) []byte {
	k := c.kc.Append(nil, w.Key)
	dst = append(binary.AppendUvarint(dst, uint64(len(k))), k...)
	dst = binary.AppendVarint(binary.AppendVarint(dst, int64(w.Start)), int64(w.End))
	return c.rc.Append(dst, w.Value)
}

func (c windowedCodec[K, R]) Decode(b []byte) (Windowed[K, R], error) {
	var w Windowed[K, R]
	kb, rest, err := cut(b)
	if err != nil {
		return w, err
	}
	if w.Key, err = c.kc.Decode(kb); err != nil {
		return w, err
	}
	start, n := binary.Varint(rest)
	if n <= 0 {
		return w, errShort
	}
	rest = rest[n:]
	end, n := binary.Varint(rest)
	if n <= 0 {
		return w, errShort
	}
	w.Start, w.End = Time(start), Time(end)
	w.Value, err = c.rc.Decode(rest[n:])
	return w, err
}

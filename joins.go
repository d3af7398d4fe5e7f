package weir

import (
	"fmt"
	"time"

	"github.com/weirproject/weir/internal/operators"
	"github.com/weirproject/weir/internal/window"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// IntervalJoin joins two keyed streams on event time (Flink's
// intervalJoin().between(lower, upper)): a left record l and a right
// record r of the same key make join(key, l, r) when l.ts + lower <= r.ts
// <= l.ts + upper, at max(l.ts, r.ts). Each side is buffered until the
// watermark passes the last time it could still join.
func IntervalJoin[L, R any, K comparable, O any](left *KeyedStream[L, K], right *KeyedStream[R, K], name string,
	lower, upper time.Duration, join func(key K, l L, r R) O, opts ...VertexOption) *Stream[O] {
	j := left.s.job
	spec := window.IntervalJoinSpec{Lower: lower.Milliseconds(), Upper: upper.Milliseconds()}
	if lower > upper || lower%time.Millisecond != 0 || upper%time.Millisecond != 0 {
		j.fail(fmt.Errorf("IntervalJoin %s: want whole milliseconds with lower <= upper, got %s and %s", name, lower, upper))
	}
	sig := fmt.Sprintf("intervalJoin(%s, %s by %s) %s", typeName[L](), typeName[R](), typeName[K](), typeName[O]())
	return addJoin(left, right, name, sig, join, opts, func(p operators.Pairer) sdk.Operator {
		return &operators.IntervalJoin{Spec: &spec, Pair: p}
	})
}

// WindowJoin joins two keyed streams per tumbling window of size (Flink's
// join().where().equalTo().window()): every pair of a key's records in a
// window makes join(key, l, r), when the window fires.
func WindowJoin[L, R any, K comparable, O any](left *KeyedStream[L, K], right *KeyedStream[R, K], name string,
	size time.Duration, join func(key K, l L, r R) O, opts ...VertexOption) *Stream[O] {
	j := left.s.job
	s, err := ms("size", size)
	if err != nil {
		j.fail(fmt.Errorf("WindowJoin %s: %w", name, err))
	}
	spec := window.WindowJoinSpec{Size: s}
	sig := fmt.Sprintf("windowJoin(%s, %s by %s) %s", typeName[L](), typeName[R](), typeName[K](), typeName[O]())
	return addJoin(left, right, name, sig, join, opts, func(p operators.Pairer) sdk.Operator {
		return &operators.WindowJoin{Spec: &spec, Pair: p}
	})
}

func addJoin[L, R any, K comparable, O any](left *KeyedStream[L, K], right *KeyedStream[R, K], name, sig string,
	join func(K, L, R) O, opts []VertexOption, newJoin func(operators.Pairer) sdk.Operator) *Stream[O] {
	j := left.s.job
	if right.s.job != j {
		j.fail(fmt.Errorf("join %s: streams of two jobs", name))
	}
	res := &output[O]{codec: mustCodec[O](j, "join "+name)}
	lc, rc, kc := left.s.codec(), right.s.codec(), left.codec
	// Input 0 is the left side, input 1 the right (a union on either side
	// adds edges to that side only; the operator tells them apart by
	// input index, so each side is one input).
	if len(left.s.ups) != 1 || len(right.s.ups) != 1 {
		j.fail(fmt.Errorf("join %s: each side must be one vertex's stream (map a union first)", name))
	}
	edges := append(left.s.edges(weirv1.Partitioner_PARTITIONER_HASH), right.s.edges(weirv1.Partitioner_PARTITIONER_HASH)...)
	v := j.add(&vertex{name: name, signature: sig}, opts, edges...)
	v.newOp = func() sdk.Operator {
		e := &emitter[O]{out: res}
		pair := func(key, lb, rb []byte, ts int64) (sdk.Record, error) {
			k, err := kc.Decode(key)
			if err != nil {
				return sdk.Record{}, fmt.Errorf("decode key: %w", err)
			}
			l, err := lc.Decode(lb)
			if err != nil {
				return sdk.Record{}, fmt.Errorf("decode %s: %w", typeName[L](), err)
			}
			r, err := rc.Decode(rb)
			if err != nil {
				return sdk.Record{}, fmt.Errorf("decode %s: %w", typeName[R](), err)
			}
			return e.record(join(k, l, r), ts), nil
		}
		return &joinOp{base: base{name, sig}, op: newJoin(pair)}
	}
	return &Stream[O]{job: j, ups: []upstream[O]{{v: v, out: res}}}
}

// joinOp checks the vertex's signature, then is its join.
type joinOp struct {
	base
	op sdk.Operator
}

func (o *joinOp) Open(ctx sdk.Context) error {
	if err := o.open(ctx); err != nil {
		return err
	}
	return o.op.Open(ctx)
}

func (o *joinOp) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	return o.op.ProcessRecord(r, out)
}
func (o *joinOp) ProcessInput(input int, r sdk.Record, out sdk.Collector) error {
	return o.op.(sdk.MultiInputOperator).ProcessInput(input, r, out)
}
func (o *joinOp) OnTimer(t sdk.Timer, out sdk.Collector) error {
	return o.op.(sdk.TimerHandler).OnTimer(t, out)
}
func (o *joinOp) Close() error { return o.op.Close() }

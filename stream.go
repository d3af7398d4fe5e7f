package weir

import (
	"fmt"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// Stream is a typed stream of records: the output of one or more vertices
// (more after Union).
type Stream[T any] struct {
	job *Job
	ups []upstream[T]
}

// upstream is one vertex a stream comes from and how it encodes its
// records.
type upstream[T any] struct {
	v   *vertex
	out *output[T]
	// side names the vertex's side output the stream is; "" for its main
	// output.
	side string
}

// output encodes a vertex's records: the value with the stream's codec,
// and the key with the key function KeyBy set (none before).
type output[T any] struct {
	codec Codec[T]
	key   func(dst []byte, v T) []byte
}

// KeyedStream is a stream partitioned by key: every record of a key goes
// to the same subtask, whose keyed state and timers are that key's.
type KeyedStream[T any, K comparable] struct {
	s     *Stream[T]
	key   func(T) K
	codec Codec[K]
}

func newStream[T any](j *Job, v *vertex, c Codec[T]) *Stream[T] {
	return &Stream[T]{job: j, ups: []upstream[T]{{v: v, out: &output[T]{codec: c}}}}
}

// edges are the inputs a vertex reading s gets.
func (s *Stream[T]) edges(p weirv1.Partitioner) []*weirv1.JobEdge {
	var out []*weirv1.JobEdge
	for _, u := range s.ups {
		out = append(out, &weirv1.JobEdge{Source: u.v.name, Partitioner: p, Output: u.side})
	}
	return out
}

// codec is the stream's value codec (every upstream has the same).
func (s *Stream[T]) codec() Codec[T] {
	if len(s.ups) == 0 {
		return nil // a stream the job's errors left empty; Graph reports them
	}
	return s.ups[0].out.codec
}

// arena hands out the bytes of encoded records from shared chunks: one
// allocation per chunk, not per record. Bytes handed out are never written
// again (downstream may hold a record a while); a chunk is freed with its
// last record.
type arena struct {
	buf []byte
	// big is the largest record taken so far: a new record gets at least
	// that much room, since one outgrowing the chunk would make its
	// encoder copy the whole chunk into a larger one.
	big int
}

const arenaChunk = 16 << 10

// room makes sure the chunk has room for a record as large as the largest
// so far (up to a chunk: a larger one starts a fresh chunk, which its
// encoder grows, copying only itself).
func (a *arena) room() int {
	if cap(a.buf)-len(a.buf) < min(max(256, a.big), arenaChunk) {
		a.buf = make([]byte, 0, arenaChunk)
	}
	return len(a.buf)
}

// take is what was appended since start, as a slice of its own.
func (a *arena) take(start int) []byte {
	a.big = max(a.big, len(a.buf)-start)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// emitter is an operator's output: encodes and collects records.
type emitter[T any] struct {
	out   *output[T]
	arena arena
}

func (e *emitter[T]) record(v T, ts int64) sdk.Record {
	a := &e.arena
	start := a.room()
	a.buf = e.out.codec.Append(a.buf, v)
	r := sdk.Record{Value: a.take(start), Timestamp: ts}
	if e.out.key != nil {
		start = a.room()
		a.buf = e.out.key(a.buf, v)
		r.Key = a.take(start)
	}
	return r
}

// KeyBy partitions s by the key f extracts (Flink's keyBy): the vertices
// producing s set each record's key, and the next vertex reads them over a
// hash edge. A stream keyed a second time, by another function, goes
// through a pass-through vertex named <vertex>.keyBy-<n>.
func KeyBy[T any, K comparable](s *Stream[T], f func(T) K) *KeyedStream[T, K] {
	kc := mustCodec[K](s.job, "KeyBy")
	for _, u := range s.ups {
		// A side output's records are the vertex's input records, keyed
		// as they came: a new key needs a vertex of its own.
		if u.v.keyed || u.side != "" {
			n := 1
			for s.job.byName[fmt.Sprintf("%s.keyBy-%d", u.v.name, n)] != nil {
				n++
			}
			pass := Map(s, fmt.Sprintf("%s.keyBy-%d", u.v.name, n), func(v T) T { return v }, Parallelism(int(u.v.parallelism)))
			return KeyBy(pass, f)
		}
	}
	for _, u := range s.ups {
		u.v.keyed = true
		u.out.key = func(dst []byte, v T) []byte { return kc.Append(dst, f(v)) }
	}
	return &KeyedStream[T, K]{s: s, key: f, codec: kc}
}

// Union merges streams of the same type into one (Flink's union): a vertex
// reading it reads all of them. (It takes one stream at least, so that a
// union of none cannot be written.)
func Union[T any](first *Stream[T], more ...*Stream[T]) *Stream[T] {
	u := &Stream[T]{job: first.job}
	seen := map[*vertex]bool{}
	for _, s := range append([]*Stream[T]{first}, more...) {
		if s.job != u.job {
			u.job.fail(fmt.Errorf("Union: streams of two jobs"))
			continue
		}
		for _, up := range s.ups {
			if seen[up.v] {
				u.job.fail(fmt.Errorf("Union: stream of vertex %q given twice", up.v.name))
				continue
			}
			seen[up.v] = true
			u.ups = append(u.ups, up)
		}
	}
	return u
}

// Map applies f to every record (Flink's map).
func Map[T, U any](s *Stream[T], name string, f func(T) U, opts ...VertexOption) *Stream[U] {
	in, out := s.codec(), mustCodec[U](s.job, "Map "+name)
	res := &output[U]{codec: out}
	v := s.job.add(&vertex{name: name, signature: fmt.Sprintf("map(%s) %s", typeName[T](), typeName[U]())}, opts, s.edges(0)...)
	v.newOp = func() sdk.Operator {
		return &mapOp[T, U]{base: base{name, v.signature}, in: in, f: f, emit: emitter[U]{out: res}}
	}
	return &Stream[U]{job: s.job, ups: []upstream[U]{{v: v, out: res}}}
}

type mapOp[T, U any] struct {
	base
	in   Codec[T]
	f    func(T) U
	emit emitter[U]
}

func (m *mapOp[T, U]) Open(ctx sdk.Context) error { return m.open(ctx) }
func (m *mapOp[T, U]) Close() error               { return nil }
func (m *mapOp[T, U]) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	v, err := m.in.Decode(r.Value)
	if err != nil {
		return fmt.Errorf("weir: vertex %q: decode %s: %w", m.vertex, typeName[T](), err)
	}
	out.Collect(m.emit.record(m.f(v), r.Timestamp))
	return nil
}

// Filter keeps the records f accepts (Flink's filter).
func Filter[T any](s *Stream[T], name string, f func(T) bool, opts ...VertexOption) *Stream[T] {
	res := &output[T]{codec: s.codec()}
	v := s.job.add(&vertex{name: name, signature: fmt.Sprintf("filter(%s)", typeName[T]())}, opts, s.edges(0)...)
	v.newOp = func() sdk.Operator {
		return &filterOp[T]{base: base{name, v.signature}, in: res.codec, f: f, out: res}
	}
	return &Stream[T]{job: s.job, ups: []upstream[T]{{v: v, out: res}}}
}

type filterOp[T any] struct {
	base
	in    Codec[T]
	f     func(T) bool
	out   *output[T]
	arena arena
}

func (m *filterOp[T]) Open(ctx sdk.Context) error { return m.open(ctx) }
func (m *filterOp[T]) Close() error               { return nil }
func (m *filterOp[T]) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	v, err := m.in.Decode(r.Value)
	if err != nil {
		return fmt.Errorf("weir: vertex %q: decode %s: %w", m.vertex, typeName[T](), err)
	}
	if !m.f(v) {
		return nil
	}
	// The value's bytes go on as they are; only the key is new.
	r.Key = nil
	if m.out.key != nil {
		start := m.arena.room()
		m.arena.buf = m.out.key(m.arena.buf, v)
		r.Key = m.arena.take(start)
	}
	out.Collect(r)
	return nil
}

// FlatMap calls f for every record; f emits any number of records (Flink's
// flatMap).
func FlatMap[T, U any](s *Stream[T], name string, f func(v T, emit func(U)), opts ...VertexOption) *Stream[U] {
	in, out := s.codec(), mustCodec[U](s.job, "FlatMap "+name)
	res := &output[U]{codec: out}
	v := s.job.add(&vertex{name: name, signature: fmt.Sprintf("flatMap(%s) %s", typeName[T](), typeName[U]())}, opts, s.edges(0)...)
	v.newOp = func() sdk.Operator {
		return &flatMapOp[T, U]{base: base{name, v.signature}, in: in, f: f, emit: emitter[U]{out: res}}
	}
	return &Stream[U]{job: s.job, ups: []upstream[U]{{v: v, out: res}}}
}

type flatMapOp[T, U any] struct {
	base
	in   Codec[T]
	f    func(T, func(U))
	emit emitter[U]
	// collect is f's emit, made once rather than a closure per record:
	// it emits into out at ts, the current record's.
	collect func(U)
	out     sdk.Collector
	ts      int64
}

func (m *flatMapOp[T, U]) Open(ctx sdk.Context) error {
	m.collect = func(u U) { m.out.Collect(m.emit.record(u, m.ts)) }
	return m.open(ctx)
}

func (m *flatMapOp[T, U]) Close() error { return nil }
func (m *flatMapOp[T, U]) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	v, err := m.in.Decode(r.Value)
	if err != nil {
		return fmt.Errorf("weir: vertex %q: decode %s: %w", m.vertex, typeName[T](), err)
	}
	m.out, m.ts = out, r.Timestamp
	m.f(v, m.collect)
	return nil
}

// Reduce folds each key's records into a running value and emits it after
// every record (Flink's rolling reduce). The running value is keyed state
// named "reduce".
func Reduce[T any, K comparable](ks *KeyedStream[T, K], name string, f func(acc, v T) T, opts ...VertexOption) *Stream[T] {
	s := ks.s
	res := &output[T]{codec: s.codec()}
	v := s.job.add(&vertex{name: name, signature: fmt.Sprintf("reduce(%s) by %s", typeName[T](), typeName[K]())}, opts, s.edges(weirv1.Partitioner_PARTITIONER_HASH)...)
	v.newOp = func() sdk.Operator {
		return &reduceOp[T]{base: base{name, v.signature}, in: res.codec, f: f, emit: emitter[T]{out: res}}
	}
	return &Stream[T]{job: s.job, ups: []upstream[T]{{v: v, out: res}}}
}

type reduceOp[T any] struct {
	base
	in     Codec[T]
	f      func(T, T) T
	emit   emitter[T]
	state  sdk.ValueState
	schema *schema
	buf    []byte
}

func (m *reduceOp[T]) Open(ctx sdk.Context) error {
	if err := m.open(ctx); err != nil {
		return err
	}
	m.schema = openSchema(ctx, m.vertex)
	if _, err := m.schema.declare("reduce", typeName[T](), ""); err != nil {
		return err
	}
	m.state = ctx.ValueState("reduce")
	return nil
}

func (m *reduceOp[T]) SnapshotState(int64) error { m.schema.save(); return nil }
func (m *reduceOp[T]) Close() error              { return nil }
func (m *reduceOp[T]) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	v, err := m.in.Decode(r.Value)
	if err != nil {
		return fmt.Errorf("weir: vertex %q: decode %s: %w", m.vertex, typeName[T](), err)
	}
	if b, ok := m.state.Value(); ok {
		acc, err := m.in.Decode(b)
		if err != nil {
			return fmt.Errorf("weir: vertex %q: state \"reduce\": %w", m.vertex, err)
		}
		v = m.f(acc, v)
	}
	m.buf = m.in.Append(m.buf[:0], v)
	m.state.Update(m.buf)
	out.Collect(m.emit.record(v, r.Timestamp))
	return nil
}

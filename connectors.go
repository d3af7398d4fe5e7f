package weir

import (
	"fmt"
	"time"

	"github.com/weirproject/weir/internal/operators"
	"github.com/weirproject/weir/sdk"
)

// Source is where a stream starts: Generate, a connector (packages kafka
// and nexmark) or one of your own. FromSource asks it for its vertex and
// hands it the stream's Records, with which each subtask's runtime source
// turns its values into records.
type Source[T any] interface {
	SourceVertex(records Records[T]) SourceVertex
}

// SourceVertex is a source's vertex: the signature a TaskManager built
// from another version of the program is checked against (say the kind of
// source and its type), the configuration the job graph carries (with
// ConnectorKey naming a built-in connector, its checks apply at submit)
// and the runtime source of each subtask, which positions its splits in
// every checkpoint (sdk.Source).
type SourceVertex struct {
	Signature string
	Config    map[string]any
	New       func() sdk.Source
}

// ConnectorKey is the configuration key naming the built-in connector a
// vertex runs (kafka-source, kafka-sink, …), whose checks then apply.
const ConnectorKey = "weir.connector"

// Records makes the runtime records of a stream of T: each value encoded
// by the stream's codec, and keyed once the stream is keyed.
type Records[T any] struct{ out *output[T] }

// Encoder is an encoder for one subtask (not for use by two goroutines).
func (r Records[T]) Encoder() *Encoder[T] { return &Encoder[T]{e: emitter[T]{out: r.out}} }

// Encoder turns a source's values into records.
type Encoder[T any] struct{ e emitter[T] }

// Record is v's record, at event time ts.
func (e *Encoder[T]) Record(v T, ts Time) sdk.Record { return e.e.record(v, int64(ts)) }

// TypeName is T's name as signatures show it.
func TypeName[T any]() string { return typeName[T]() }

// FromSource starts a stream at source (Flink's fromSource). Watermarks
// and Parallelism are its usual options. A source that is a CodecProvider
// adds its codecs to the job first.
func FromSource[T any](j *Job, name string, source Source[T], opts ...VertexOption) *Stream[T] {
	if p, ok := source.(CodecProvider); ok {
		j.addCodecs(p.Codecs())
	}
	res := &output[T]{codec: mustCodec[T](j, "FromSource "+name)}
	sv := source.SourceVertex(Records[T]{out: res})
	v := j.add(&vertex{name: name, signature: sv.Signature, config: sv.Config}, opts)
	v.newSource = func() sdk.Source { return &sourceOp{base: base{name, sv.Signature}, Source: sv.New()} }
	return &Stream[T]{job: j, ups: []upstream[T]{{v: v, out: res}}}
}

// sourceOp checks the vertex's signature, then is its source.
type sourceOp struct {
	base
	sdk.Source
}

func (s *sourceOp) Open(ctx sdk.Context) error {
	if err := s.open(ctx); err != nil {
		return err
	}
	return s.Source.Open(ctx)
}

// SnapshotState passes the checkpoint to the source, which keeps its
// position in state.
func (s *sourceOp) SnapshotState(id int64) error {
	if sn, ok := s.Source.(sdk.Snapshotter); ok {
		return sn.SnapshotState(id)
	}
	return nil
}

// NotifyCheckpointComplete and NotifyCheckpointAborted reach sources that
// act on completed checkpoints (kafka-source commits offsets to its
// group).
func (s *sourceOp) NotifyCheckpointComplete(id int64) error {
	if l, ok := s.Source.(sdk.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}

func (s *sourceOp) NotifyCheckpointAborted(id int64) error {
	if l, ok := s.Source.(sdk.CheckpointListener); ok {
		return l.NotifyCheckpointAborted(id)
	}
	return nil
}

// GenerateOption tunes Generate.
type GenerateOption func(*generateConfig)

type generateConfig struct {
	cfg map[string]any
	ts  func(i int64) Time
}

// Rate limits each subtask to perSecond records (0: as fast as it can).
func Rate(perSecond float64) GenerateOption {
	return func(c *generateConfig) { c.cfg["rate"] = perSecond }
}

// EventTime stamps record i with i*step − (i mod (jitter/step + 1))*step
// ms: time advances step per record, and a record comes at most jitter
// behind the newest.
func EventTime(step, jitter time.Duration) GenerateOption {
	return func(c *generateConfig) {
		c.cfg["event-time"] = map[string]any{"step": step.String(), "jitter": jitter.String()}
	}
}

// Timestamps stamps record i with event time ts(i).
func Timestamps(ts func(i int64) Time) GenerateOption {
	return func(c *generateConfig) { c.ts = ts }
}

// Generate is a source of f(i) for i in [0, count) (count 0: unbounded),
// split across the subtasks like sequence-source, its position in every
// checkpoint: a restored job resumes exactly where the checkpoint was.
func Generate[T any](count int64, f func(i int64) T, opts ...GenerateOption) Source[T] {
	c := generateConfig{cfg: map[string]any{"count": float64(count)}}
	for _, o := range opts {
		o(&c)
	}
	return generator[T]{c: c, f: f}
}

type generator[T any] struct {
	c generateConfig
	f func(int64) T
}

func (g generator[T]) SourceVertex(records Records[T]) SourceVertex {
	return SourceVertex{Signature: fmt.Sprintf("generate() %s", typeName[T]()), Config: g.c.cfg, New: func() sdk.Source {
		e := records.Encoder()
		return &operators.SequenceSource{Make: func(i, ts int64) sdk.Record {
			if g.c.ts != nil {
				ts = int64(g.c.ts(i))
			}
			return e.Record(g.f(i), Time(ts))
		}}
	}}
}

// Sink is where a stream ends: Discard, a connector (packages files and
// kafka) or one of your own. SinkTo asks it for its vertex and hands it
// the codec of the stream's values, which each subtask's operator decodes
// the records it gets with.
type Sink[T any] interface {
	SinkVertex(values Codec[T]) SinkVertex
}

// SinkVertex is a sink's vertex, as SourceVertex is a source's: its
// operator per subtask gets the stream's records; a two-phase-commit sink
// implements sdk.Snapshotter (pre-commit) and sdk.CheckpointListener
// (commit, abort) as well.
type SinkVertex struct {
	Signature string
	Config    map[string]any
	New       func() sdk.Operator
}

// SinkTo writes s to sink (Flink's sinkTo).
func SinkTo[T any](s *Stream[T], name string, sink Sink[T], opts ...VertexOption) {
	sv := sink.SinkVertex(s.codec())
	v := s.job.add(&vertex{name: name, signature: sv.Signature, config: sv.Config}, opts, s.edges(0)...)
	v.newOp = func() sdk.Operator { return &sinkOp{base: base{name, sv.Signature}, op: sv.New()} }
}

// sinkOp checks the vertex's signature, then is its sink, with the
// checkpoint hooks of a two-phase-commit sink.
type sinkOp struct {
	base
	op sdk.Operator
}

func (s *sinkOp) Open(ctx sdk.Context) error {
	if err := s.open(ctx); err != nil {
		return err
	}
	return s.op.Open(ctx)
}

func (s *sinkOp) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	return s.op.ProcessRecord(r, out)
}
func (s *sinkOp) Close() error { return s.op.Close() }

func (s *sinkOp) SnapshotState(id int64) error {
	if sn, ok := s.op.(sdk.Snapshotter); ok {
		return sn.SnapshotState(id)
	}
	return nil
}

func (s *sinkOp) SnapshotStateAsync(id int64) (func() error, error) {
	if a, ok := s.op.(sdk.AsyncSnapshotter); ok {
		return a.SnapshotStateAsync(id)
	}
	return nil, s.SnapshotState(id)
}

func (s *sinkOp) NotifyCheckpointComplete(id int64) error {
	if l, ok := s.op.(sdk.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}

func (s *sinkOp) NotifyCheckpointAborted(id int64) error {
	if l, ok := s.op.(sdk.CheckpointListener); ok {
		return l.NotifyCheckpointAborted(id)
	}
	return nil
}

// Discard drops every record (a benchmark's sink).
func Discard[T any]() Sink[T] { return discard[T]{} }

type discard[T any] struct{}

func (discard[T]) SinkVertex(Codec[T]) SinkVertex {
	return SinkVertex{Signature: "discard", New: func() sdk.Operator { return discardOp{} }}
}

type discardOp struct{}

func (discardOp) Open(sdk.Context) error                        { return nil }
func (discardOp) ProcessRecord(sdk.Record, sdk.Collector) error { return nil }
func (discardOp) Close() error                                  { return nil }

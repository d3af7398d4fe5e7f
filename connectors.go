package weir

import (
	"fmt"
	"time"

	"github.com/weirproject/weir/internal/operators"
	"github.com/weirproject/weir/sdk"
)

// Source is where a stream starts: Generate, and the connectors.
type Source[T any] interface {
	// source describes the vertex and makes its runtime source per
	// subtask, emitting through out.
	source(out *output[T]) (signature string, config map[string]any, newSource func() sdk.Source)
}

// FromSource starts a stream at source (Flink's fromSource). Watermarks
// and Parallelism are its usual options.
func FromSource[T any](j *Job, name string, source Source[T], opts ...VertexOption) *Stream[T] {
	res := &output[T]{codec: mustCodec[T](j, "FromSource "+name)}
	sig, cfg, newSource := source.source(res)
	v := j.add(&vertex{name: name, signature: sig, config: cfg}, opts)
	v.newSource = func() sdk.Source { return &sourceOp{base: base{name, sig}, Source: newSource()} }
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

func (g generator[T]) source(out *output[T]) (string, map[string]any, func() sdk.Source) {
	return fmt.Sprintf("generate() %s", typeName[T]()), g.c.cfg, func() sdk.Source {
		e := &emitter[T]{out: out}
		return &operators.SequenceSource{Make: func(i, ts int64) sdk.Record {
			if g.c.ts != nil {
				ts = int64(g.c.ts(i))
			}
			return e.record(g.f(i), ts)
		}}
	}
}

// Sink is where a stream ends: FileSink, Discard, and the connectors.
type Sink[T any] interface {
	sink(in Codec[T]) (signature string, config map[string]any, newOp func() sdk.Operator)
}

// SinkTo writes s to sink (Flink's sinkTo).
func SinkTo[T any](s *Stream[T], name string, sink Sink[T], opts ...VertexOption) {
	sig, cfg, newOp := sink.sink(s.codec())
	v := s.job.add(&vertex{name: name, signature: sig, config: cfg}, opts, s.edges(0)...)
	v.newOp = func() sdk.Operator { return &sinkOp{base: base{name, sig}, op: newOp()} }
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

// FileSink writes one line per record, format(v), into files under dir
// with a two-phase commit on checkpoints: a line is visible once the
// checkpoint after it completed, and exactly once, through failures.
func FileSink[T any](dir string, format func(T) string) Sink[T] {
	return fileSink[T]{dir: dir, format: format}
}

type fileSink[T any] struct {
	dir    string
	format func(T) string
}

func (f fileSink[T]) sink(in Codec[T]) (string, map[string]any, func() sdk.Operator) {
	return fmt.Sprintf("file-sink(%s)", typeName[T]()), map[string]any{"path": f.dir}, func() sdk.Operator {
		return &operators.FileSink{Format: func(dst []byte, r sdk.Record) ([]byte, error) {
			v, err := in.Decode(r.Value)
			if err != nil {
				return dst, fmt.Errorf("decode %s: %w", typeName[T](), err)
			}
			return append(dst, f.format(v)...), nil
		}}
	}
}

// Discard drops every record (a benchmark's sink).
func Discard[T any]() Sink[T] { return discard[T]{} }

type discard[T any] struct{}

func (discard[T]) sink(Codec[T]) (string, map[string]any, func() sdk.Operator) {
	return "discard", nil, func() sdk.Operator { return discardOp{} }
}

type discardOp struct{}

func (discardOp) Open(sdk.Context) error                        { return nil }
func (discardOp) ProcessRecord(sdk.Record, sdk.Collector) error { return nil }
func (discardOp) Close() error                                  { return nil }

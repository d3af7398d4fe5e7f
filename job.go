// Package weir is the Go API of Weir: a job written as typed functions
// chained in code, in Flink's DataStream vocabulary, checked by the
// compiler.
//
//	job := weir.NewJob("word-count", weir.Checkpointing(time.Second))
//	lines := weir.FromSource(job, "lines", weir.Generate(0, line))
//	words := weir.FlatMap(lines, "words", split)
//	counts := weir.Reduce(weir.KeyBy(words, "by-word", word), "counts", add)
//	weir.SinkTo(counts, "sink", files.Sink(dir, format))
//	program.Main(job)
//
// The program is both the job's client and its worker (package program is
// its entry point): `./prog submit` submits the graph to a JobManager,
// `./prog taskmanager` runs a TaskManager that can run it, `./prog plan`
// prints it. Every call adds a
// vertex whose name is its identity: checkpoints and savepoints address
// state by vertex name and state name (as Flink's uid does), so a rebuilt
// or changed program restores a savepoint as long as those are kept.
//
// Functions given to Map, Filter, FlatMap, Reduce and the window
// functions run on every subtask of their vertex at once: they must not
// share mutable data. A process function is built per subtask by the
// factory given to Process.
package weir

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"time"

	_ "github.com/weirproject/weir/internal/connector/builtin" // the built-in connectors, for the job graph's validation

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/weirproject/weir/internal/jobgraph"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// Job is a job being built: its settings and vertices. Mistakes made while
// building it (a duplicate vertex name, a type without a codec) are kept
// and reported by Graph, and by Main before it does anything.
type Job struct {
	name     string
	graph    *weirv1.JobGraph
	vertices []*vertex
	byName   map[string]*vertex
	errs     []error
	// codecs are the codecs the job was given (WithCodec) and its sources
	// brought (CodecProvider), by type.
	codecs map[reflect.Type]any
}

// vertex is one vertex of the job: the runtime's operator it runs, made
// anew for every subtask.
type vertex struct {
	name        string
	parallelism int32
	inputs      []*weirv1.JobEdge
	watermarks  *weirv1.WatermarkStrategy
	config      map[string]any
	// signature describes the vertex's function and types: a TaskManager
	// built from another version of the program refuses to run a vertex
	// whose signature differs.
	signature string
	newSource func() sdk.Source
	newOp     func() sdk.Operator
	// keyed is set once a KeyBy keys this vertex's output.
	keyed bool
}

// JobOption sets a job-wide setting, as the YAML spec's top-level keys do.
type JobOption func(*jobSettings)

// jobSettings are what the job's options set: the job graph's top-level
// keys (the wire type stays out of the options' signatures) and the job's
// codecs.
type jobSettings struct {
	g      *weirv1.JobGraph
	codecs map[reflect.Type]any
}

// NewJob starts a job. Without options it checkpoints nothing and runs on
// the heap state backend, as a YAML spec without those keys would.
func NewJob(name string, opts ...JobOption) *Job {
	g := &weirv1.JobGraph{Name: name, Checkpointing: &weirv1.CheckpointConfig{}}
	s := &jobSettings{g: g, codecs: map[reflect.Type]any{}}
	for _, o := range opts {
		o(s)
	}
	return &Job{name: name, graph: g, byName: map[string]*vertex{}, codecs: s.codecs}
}

// WithCodec makes c the codec of T in this job, wherever the job's
// streams, keys and window accumulators carry a T, in place of the one a
// source brought or CodecFor's.
func WithCodec[T any](c Codec[T]) JobOption {
	return func(s *jobSettings) { s.codecs[reflect.TypeFor[T]()] = c }
}

// Checkpointing takes a checkpoint every interval (exactly once, unless
// AtLeastOnce), and restarts the job from the latest one on failures.
func Checkpointing(interval time.Duration) JobOption {
	return func(s *jobSettings) { s.g.Checkpointing.Interval = durationpb.New(interval) }
}

// AtLeastOnce checkpoints without aligning barriers.
func AtLeastOnce() JobOption {
	return func(s *jobSettings) {
		s.g.Checkpointing.Mode = weirv1.CheckpointingMode_CHECKPOINTING_MODE_AT_LEAST_ONCE
	}
}

// UnalignedCheckpoints lets barriers overtake records in flight.
func UnalignedCheckpoints() JobOption {
	return func(s *jobSettings) { s.g.Checkpointing.Unaligned = true }
}

// RetainedCheckpoints keeps the latest n completed checkpoints.
func RetainedCheckpoints(n int) JobOption {
	return func(s *jobSettings) { s.g.Checkpointing.Retained = int32(n) }
}

// PebbleState keeps keyed state in the embedded Pebble store (state may
// outgrow memory), with incremental checkpoints if asked.
func PebbleState(incremental bool) JobOption {
	return func(s *jobSettings) {
		s.g.State = &weirv1.StateBackendConfig{Backend: weirv1.StateBackendConfig_BACKEND_PEBBLE, Incremental: incremental}
	}
}

// BufferTimeout bounds how long a record waits in a partly filled output
// batch before it is sent (the job spec's buffer-timeout, Flink's
// execution.buffer-timeout; default 500µs). Lower trades CPU for latency
// when the pipeline is partly loaded; 0 sends after every step.
func BufferTimeout(d time.Duration) JobOption {
	return func(s *jobSettings) { s.g.BufferTimeout = durationpb.New(d) }
}

// MaxParallelism sets the number of key groups (default 128).
func MaxParallelism(n int) JobOption {
	return func(s *jobSettings) { s.g.MaxParallelism = int32(n) }
}

// FixedDelayRestart restarts a failed job up to attempts times, delay apart.
func FixedDelayRestart(attempts int, delay time.Duration) JobOption {
	return func(s *jobSettings) {
		s.g.RestartStrategy = &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_FIXED_DELAY, Attempts: int32(attempts), Delay: durationpb.New(delay)}
	}
}

// NoRestart fails the job for good on its first failure.
func NoRestart() JobOption {
	return func(s *jobSettings) {
		s.g.RestartStrategy = &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_NONE}
	}
}

// Autoscaling is the autoscaler's configuration (see Autoscaler); zero
// fields take the defaults of the job spec's `autoscaler:`.
type Autoscaling struct {
	// TargetUtilization is the share of a vertex's processing capacity its
	// input should use (default 0.7); a vertex within it ±
	// UtilizationBoundary (default 0.3) is left alone.
	TargetUtilization, UtilizationBoundary float64
	// Interval is how often it decides, over the samples of the last
	// MetricsWindow, ignoring those within Stabilization of a (re)start.
	Interval, MetricsWindow, Stabilization time.Duration
	// ScaleDownDelay is how long a scale-down must be called for before
	// it happens; CatchUpDuration the time to catch a backlog up in;
	// RestartTime a rescale's pause.
	ScaleDownDelay, CatchUpDuration, RestartTime time.Duration
	// MaxRescalesPerHour bounds its rescales (default 10).
	MaxRescalesPerHour int
	// MinParallelism and MaxParallelism bound every vertex; Vertices
	// bound single vertices by name ([2]int{min, max}, 0 for none).
	MinParallelism, MaxParallelism int
	Vertices                       map[string][2]int
}

// Autoscaler lets the JobManager change the job's parallelism by its load,
// as Flink's autoscaler does (off by default).
func Autoscaler(a Autoscaling) JobOption {
	return func(s *jobSettings) {
		d := func(v time.Duration) *durationpb.Duration {
			if v == 0 {
				return nil
			}
			return durationpb.New(v)
		}
		c := &weirv1.AutoscalerConfig{
			Enabled: true, TargetUtilization: a.TargetUtilization,
			Interval: d(a.Interval), MetricsWindow: d(a.MetricsWindow), Stabilization: d(a.Stabilization),
			ScaleDownDelay: d(a.ScaleDownDelay), CatchUpDuration: d(a.CatchUpDuration), RestartTime: d(a.RestartTime),
			MaxRescalesPerHour: int32(a.MaxRescalesPerHour),
			MinParallelism:     int32(a.MinParallelism), MaxParallelism: int32(a.MaxParallelism),
		}
		if a.UtilizationBoundary != 0 {
			c.UtilizationBoundary = &a.UtilizationBoundary
		}
		for name, b := range a.Vertices {
			if c.Vertices == nil {
				c.Vertices = map[string]*weirv1.ParallelismBounds{}
			}
			c.Vertices[name] = &weirv1.ParallelismBounds{Min: int32(b[0]), Max: int32(b[1])}
		}
		// Stored with every default filled in, as a spec's is.
		s.g.Autoscaler = jobgraph.AutoscalerProto(jobgraph.AutoscalerSettings(c), true)
	}
}

// VertexOption sets a vertex's settings.
type VertexOption func(*vertex)

// Parallelism runs the vertex as n subtasks (default 1).
func Parallelism(n int) VertexOption { return func(v *vertex) { v.parallelism = int32(n) } }

// Watermarks gives a source a watermark strategy: bounded out-of-orderness
// per split, and splits without records for idleTimeout (0: never) stop
// holding the watermark back.
func Watermarks(maxOutOfOrderness, idleTimeout time.Duration) VertexOption {
	return func(v *vertex) {
		if v.watermarks == nil {
			v.watermarks = &weirv1.WatermarkStrategy{}
		}
		v.watermarks.MaxOutOfOrderness = durationpb.New(maxOutOfOrderness)
		v.watermarks.IdleTimeout = durationpb.New(idleTimeout)
	}
}

// WatermarkInterval is how often a source with Watermarks emits its
// watermark (default 200 ms).
func WatermarkInterval(d time.Duration) VertexOption {
	return func(v *vertex) {
		if v.watermarks == nil {
			v.watermarks = &weirv1.WatermarkStrategy{}
		}
		v.watermarks.Interval = durationpb.New(d)
	}
}

var vertexName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func (j *Job) fail(err error) { j.errs = append(j.errs, err) }

// add adds a vertex reading from inputs.
func (j *Job) add(v *vertex, opts []VertexOption, inputs ...*weirv1.JobEdge) *vertex {
	v.parallelism = 1
	for _, o := range opts {
		o(v)
	}
	switch {
	case !vertexName.MatchString(v.name):
		j.fail(fmt.Errorf("vertex name %q: use only letters, digits, '_', '.' and '-'", v.name))
	case j.byName[v.name] != nil:
		j.fail(fmt.Errorf("vertex name %q is used twice: names identify vertices, and their state in savepoints", v.name))
	}
	if v.watermarks != nil && len(inputs) > 0 {
		j.fail(fmt.Errorf("vertex %q: only a source takes Watermarks", v.name))
	}
	v.inputs = inputs
	j.byName[v.name] = v
	j.vertices = append(j.vertices, v)
	return v
}

// operatorName is the runtime operator name of a Go API vertex.
func operatorName(vertex string) string { return "go:" + vertex }

// signatureKey holds a vertex's signature in its configuration.
const signatureKey = "weir.signature"

// Name is the job's name.
func (j *Job) Name() string { return j.name }

// Graph is the job graph to submit, defaulted and validated like a YAML
// spec; the errors made while building the job come first.
func (j *Job) Graph() (*weirv1.JobGraph, error) {
	if len(j.errs) > 0 {
		return nil, fmt.Errorf("weir: job %q: %w", j.name, errors.Join(j.errs...))
	}
	g := cloneGraph(j.graph)
	for _, v := range j.vertices {
		cfg := map[string]any{signatureKey: v.signature}
		for k, val := range v.config {
			cfg[k] = val
		}
		st, err := structpb.NewStruct(cfg)
		if err != nil {
			return nil, fmt.Errorf("weir: vertex %q: config: %w", v.name, err)
		}
		g.Vertices = append(g.Vertices, &weirv1.JobVertex{
			Name: v.name, Operator: operatorName(v.name), Parallelism: v.parallelism,
			Config: st, Inputs: v.inputs, Watermarks: v.watermarks,
		})
	}
	jobgraph.ApplyDefaults(g)
	if err := jobgraph.Validate(g); err != nil {
		return nil, fmt.Errorf("weir: job %q: %w", j.name, err)
	}
	return g, nil
}

func cloneGraph(g *weirv1.JobGraph) *weirv1.JobGraph {
	c := &weirv1.JobGraph{
		Name: g.Name, MaxParallelism: g.MaxParallelism, RestoreFrom: g.RestoreFrom,
		Checkpointing: g.Checkpointing, RestartStrategy: g.RestartStrategy, State: g.State,
		Autoscaler: g.Autoscaler, BufferTimeout: g.BufferTimeout,
	}
	return c
}

// Registry is the operators a TaskManager built from this program runs:
// one per vertex, each checking at open that the submitted vertex is the
// one this build has (checkSignature).
func (j *Job) Registry() *sdk.Registry {
	reg := sdk.NewRegistry()
	for _, v := range j.vertices {
		if v.newSource != nil {
			reg.RegisterSource(operatorName(v.name), v.newSource)
		} else {
			reg.RegisterOperator(operatorName(v.name), v.newOp)
		}
	}
	return reg
}

// base is what every operator of the Go API starts with: its vertex, and
// the check that the submitted vertex is this build's.
type base struct {
	vertex, signature string
}

func (b base) open(ctx sdk.Context) error {
	got, err := ctx.Config().String(signatureKey, "")
	if err != nil {
		return err
	}
	if got != b.signature {
		return fmt.Errorf("weir: vertex %q: the job was submitted by a program whose vertex is %s, but this TaskManager's program has %s: start TaskManagers built from the program that submitted the job", b.vertex, got, b.signature)
	}
	return nil
}

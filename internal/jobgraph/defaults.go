package jobgraph

import (
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Limits and defaults follow Flink's where Flink has one, so that Flink users
// get what they expect.
const (
	DefaultMaxParallelism = 128
	// UpperBoundMaxParallelism is Flink's limit on key groups (1<<15).
	UpperBoundMaxParallelism = 32768
	// MinCheckpointInterval is the shortest periodic checkpoint interval;
	// shorter would spend all the time in checkpoints.
	MinCheckpointInterval = 10 * time.Millisecond

	DefaultCheckpointTimeout = 10 * time.Minute

	// DefaultWatermarkInterval is how often a source emits its watermark
	// at most (Flink's pipeline.auto-watermark-interval).
	DefaultWatermarkInterval = 200 * time.Millisecond

	DefaultFixedDelayAttempts = 1
	DefaultFixedDelay         = time.Second
	// DefaultExponentialAttempts is unlimited in Flink; MaxInt32 is the
	// nearest an int32 gets.
	DefaultExponentialAttempts   = math.MaxInt32
	DefaultInitialBackoff        = time.Second
	DefaultMaxBackoff            = time.Minute
	DefaultBackoffMultiplier     = 2.0
	DefaultResetBackoffThreshold = time.Hour
)

// DefaultRestartStrategy is the restart strategy of a job that names none:
// exponential-delay when it checkpoints, none otherwise (Flink 1.19+).
func DefaultRestartStrategy(checkpointing bool) weirv1.RestartStrategy_Kind {
	if checkpointing {
		return weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY
	}
	return weirv1.RestartStrategy_KIND_NONE
}

// enumNames maps the spec's words for an enum to its values, in the order the
// words are listed in error messages.
type enumNames[T ~int32] []struct {
	name string
	val  T
}

func (e enumNames[T]) parse(s string) (T, bool) {
	for _, n := range e {
		if n.name == s {
			return n.val, true
		}
	}
	return 0, false
}

func (e enumNames[T]) name(v T) (string, bool) {
	for _, n := range e {
		if n.val == v {
			return n.name, true
		}
	}
	return "", false
}

// want lists the accepted words as "a, b or c".
func (e enumNames[T]) want() string {
	var b strings.Builder
	for i, n := range e {
		switch {
		case i == 0:
		case i == len(e)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(n.name)
	}
	return b.String()
}

// describe names v for messages, falling back to the number for values this
// version does not know.
func (e enumNames[T]) describe(v T) string {
	if s, ok := e.name(v); ok {
		return s
	}
	return fmt.Sprint(int32(v))
}

var (
	modeNames = enumNames[weirv1.CheckpointingMode]{
		{"exactly-once", weirv1.CheckpointingMode_CHECKPOINTING_MODE_EXACTLY_ONCE},
		{"at-least-once", weirv1.CheckpointingMode_CHECKPOINTING_MODE_AT_LEAST_ONCE},
	}
	externalizedNames = enumNames[weirv1.ExternalizedRetention]{
		{"delete-on-cancellation", weirv1.ExternalizedRetention_EXTERNALIZED_RETENTION_DELETE_ON_CANCELLATION},
		{"retain-on-cancellation", weirv1.ExternalizedRetention_EXTERNALIZED_RETENTION_RETAIN_ON_CANCELLATION},
	}
	restartNames = enumNames[weirv1.RestartStrategy_Kind]{
		{"none", weirv1.RestartStrategy_KIND_NONE},
		{"fixed-delay", weirv1.RestartStrategy_KIND_FIXED_DELAY},
		{"exponential-delay", weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY},
	}
	backendNames = enumNames[weirv1.StateBackendConfig_Backend]{
		{"heap", weirv1.StateBackendConfig_BACKEND_HEAP},
		{"pebble", weirv1.StateBackendConfig_BACKEND_PEBBLE},
	}
	partitionNames = enumNames[weirv1.Partitioner]{
		{"forward", weirv1.Partitioner_PARTITIONER_FORWARD},
		{"hash", weirv1.Partitioner_PARTITIONER_HASH},
		{"rebalance", weirv1.Partitioner_PARTITIONER_REBALANCE},
		{"broadcast", weirv1.Partitioner_PARTITIONER_BROADCAST},
	}
)

// ApplyDefaults fills the zero values of g with the defaults ParseSpec uses
// for absent keys. It is for graphs that did not come from ParseSpec (a
// client building the proto itself); proto3 cannot tell an absent int from
// an explicit 0, so here a 0 retained, max-concurrent, parallelism or
// max-parallelism also becomes its default, which ParseSpec would reject.
// Restart attempts are left alone because 0 is meaningful.
func ApplyDefaults(g *weirv1.JobGraph) {
	if g == nil {
		return
	}
	if g.MaxParallelism == 0 {
		g.MaxParallelism = DefaultMaxParallelism
	}
	if g.Checkpointing == nil {
		g.Checkpointing = &weirv1.CheckpointConfig{}
	}
	c := g.Checkpointing
	defaultDuration(&c.Interval, 0)
	defaultDuration(&c.Timeout, DefaultCheckpointTimeout)
	defaultDuration(&c.MinPause, 0)
	defaultDuration(&c.AlignedCheckpointTimeout, 0)
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = 1
	}
	if c.Mode == weirv1.CheckpointingMode_CHECKPOINTING_MODE_UNSPECIFIED {
		c.Mode = weirv1.CheckpointingMode_CHECKPOINTING_MODE_EXACTLY_ONCE
	}
	if c.Retained == 0 {
		c.Retained = 1
	}
	if c.ExternalizedRetention == weirv1.ExternalizedRetention_EXTERNALIZED_RETENTION_UNSPECIFIED {
		c.ExternalizedRetention = weirv1.ExternalizedRetention_EXTERNALIZED_RETENTION_DELETE_ON_CANCELLATION
	}

	if g.RestartStrategy == nil {
		g.RestartStrategy = &weirv1.RestartStrategy{}
	}
	r := g.RestartStrategy
	if r.Kind == weirv1.RestartStrategy_KIND_UNSPECIFIED {
		r.Kind = DefaultRestartStrategy(c.Interval.AsDuration() > 0)
		if r.Kind == weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY && r.Attempts == 0 {
			r.Attempts = DefaultExponentialAttempts
		}
	}
	switch r.Kind {
	case weirv1.RestartStrategy_KIND_FIXED_DELAY:
		defaultDuration(&r.Delay, DefaultFixedDelay)
	case weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY:
		defaultDuration(&r.InitialBackoff, DefaultInitialBackoff)
		defaultDuration(&r.MaxBackoff, DefaultMaxBackoff)
		defaultDuration(&r.ResetBackoffThreshold, DefaultResetBackoffThreshold)
		if r.Multiplier == 0 {
			r.Multiplier = DefaultBackoffMultiplier
		}
	}

	if g.State == nil {
		g.State = &weirv1.StateBackendConfig{}
	}
	if g.State.Backend == weirv1.StateBackendConfig_BACKEND_UNSPECIFIED {
		g.State.Backend = weirv1.StateBackendConfig_BACKEND_HEAP
	}

	parallelism := make(map[string]int32, len(g.Vertices))
	for _, v := range g.Vertices {
		if v == nil {
			continue
		}
		if v.Parallelism == 0 {
			v.Parallelism = 1
		}
		if v.Watermarks != nil && v.Watermarks.Interval == nil {
			v.Watermarks.Interval = durationpb.New(DefaultWatermarkInterval)
		}
		parallelism[v.Name] = v.Parallelism
	}
	for _, v := range g.Vertices {
		if v == nil {
			continue
		}
		for _, in := range v.Inputs {
			if in == nil || in.Partitioner != weirv1.Partitioner_PARTITIONER_UNSPECIFIED {
				continue
			}
			if p, ok := parallelism[in.Source]; ok {
				in.Partitioner = defaultPartitioner(p, v.Parallelism)
			}
		}
	}
}

// defaultPartitioner is Flink's choice for an edge without an explicit one:
// forward keeps records local when it can, rebalance spreads them otherwise.
func defaultPartitioner(upstream, downstream int32) weirv1.Partitioner {
	if upstream == downstream {
		return weirv1.Partitioner_PARTITIONER_FORWARD
	}
	return weirv1.Partitioner_PARTITIONER_REBALANCE
}

func defaultDuration(d **durationpb.Duration, def time.Duration) {
	if *d == nil {
		*d = durationpb.New(def)
	}
}

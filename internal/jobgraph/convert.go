package jobgraph

import (
	"fmt"

	"gopkg.in/yaml.v3"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// converter turns the decoded document into a JobGraph, collecting a problem
// for each value of the wrong type instead of stopping at the first.
type converter struct {
	ps problems
}

func (c *converter) graph(d *specDoc) *weirv1.JobGraph {
	g := &weirv1.JobGraph{
		Name:           c.str(&d.Name, "name"),
		MaxParallelism: c.int32(&d.MaxParallelism, "max-parallelism", DefaultMaxParallelism),
		RestoreFrom:    c.str(&d.RestoreFrom, "restore-from"),
		// Chaining is on unless the spec turns it off, as in Flink.
		DisableChaining: !c.bool(&d.Chaining, "chaining", true),
		Sql:             c.str(&d.SQL, "sql"),
	}

	if present(&d.BufferTimeout) {
		g.BufferTimeout = c.duration(&d.BufferTimeout, "buffer-timeout", 0)
	}

	cp := d.Checkpointing
	if cp == nil {
		cp = &checkpointingDoc{}
	}
	g.Checkpointing = &weirv1.CheckpointConfig{
		Interval:                   c.duration(&cp.Interval, "checkpointing.interval", 0),
		Timeout:                    c.duration(&cp.Timeout, "checkpointing.timeout", DefaultCheckpointTimeout),
		MinPause:                   c.duration(&cp.MinPause, "checkpointing.min-pause", 0),
		MaxConcurrent:              c.int32(&cp.MaxConcurrent, "checkpointing.max-concurrent", 1),
		Mode:                       enumValue(c, &cp.Mode, "checkpointing.mode", "mode", modeNames, weirv1.CheckpointingMode_CHECKPOINTING_MODE_EXACTLY_ONCE),
		Retained:                   c.int32(&cp.Retained, "checkpointing.retained", 1),
		Unaligned:                  c.bool(&cp.Unaligned, "checkpointing.unaligned", false),
		AlignedCheckpointTimeout:   c.duration(&cp.AlignedCheckpointTimeout, "checkpointing.aligned-checkpoint-timeout", 0),
		TolerableFailedCheckpoints: c.int32(&cp.TolerableFailedCheckpoints, "checkpointing.tolerable-failed-checkpoints", 0),
		ExternalizedRetention:      enumValue(c, &cp.Externalized, "checkpointing.externalized", "retention", externalizedNames, weirv1.ExternalizedRetention_EXTERNALIZED_RETENTION_DELETE_ON_CANCELLATION),
	}
	if present(&cp.IntervalDuringBacklog) {
		// Unset means the interval throughout, which 0 cannot say: 0 is
		// no checkpoints during a backlog.
		g.Checkpointing.IntervalDuringBacklog = c.duration(&cp.IntervalDuringBacklog, "checkpointing.interval-during-backlog", 0)
	}

	g.RestartStrategy = c.restart(d.RestartStrategy, g.Checkpointing.GetInterval().AsDuration() > 0)
	g.Autoscaler = c.autoscaler(d.Autoscaler)

	st := d.State
	if st == nil {
		st = &stateDoc{}
	}
	g.State = &weirv1.StateBackendConfig{
		Backend:     enumValue(c, &st.Backend, "state.backend", "backend", backendNames, weirv1.StateBackendConfig_BACKEND_HEAP),
		Incremental: c.bool(&st.Incremental, "state.incremental", false),
	}

	for i := range d.Vertices {
		vd := &d.Vertices[i]
		p := fmt.Sprintf("vertices[%d]", i)
		v := &weirv1.JobVertex{
			Name:        c.str(&vd.Name, p+".name"),
			Operator:    c.str(&vd.Operator, p+".operator"),
			Parallelism: c.int32(&vd.Parallelism, p+".parallelism", 1),
			Config:      c.config(&vd.Config, p+".config"),
			// Empty is the default group, as in Flink.
			SlotSharingGroup: c.str(&vd.SlotSharing, p+".slot-sharing-group"),
			DisableChaining:  !c.bool(&vd.Chaining, p+".chaining", true),
			Description:      c.str(&vd.Description, p+".description"),
			ChangelogMode:    c.str(&vd.ChangelogMode, p+".changelog-mode"),
		}
		if w := vd.Watermarks; w != nil {
			wp := p + ".watermarks"
			v.Watermarks = &weirv1.WatermarkStrategy{
				MaxOutOfOrderness: c.duration(&w.MaxOutOfOrderness, wp+".max-out-of-orderness", 0),
				IdleTimeout:       c.duration(&w.IdleTimeout, wp+".idle-timeout", 0),
				Interval:          c.duration(&w.Interval, wp+".interval", DefaultWatermarkInterval),
			}
		}
		for j := range vd.Inputs {
			in := &vd.Inputs[j]
			ip := fmt.Sprintf("%s.inputs[%d]", p, j)
			v.Inputs = append(v.Inputs, &weirv1.JobEdge{
				Source: c.str(&in.From, ip+".from"),
				// Left unspecified when absent, to be defaulted below once
				// every vertex's parallelism is known.
				Partitioner: enumValue(c, &in.Partition, ip+".partition", "partition", partitionNames, weirv1.Partitioner_PARTITIONER_UNSPECIFIED),
				Output:      c.str(&in.Output, ip+".output"),
			})
		}
		g.Vertices = append(g.Vertices, v)
	}
	parallelism := map[string]int32{}
	for _, v := range g.Vertices {
		if _, dup := parallelism[v.Name]; !dup {
			parallelism[v.Name] = v.Parallelism
		}
	}
	for _, v := range g.Vertices {
		for _, in := range v.Inputs {
			if p, ok := parallelism[in.Source]; ok && in.Partitioner == weirv1.Partitioner_PARTITIONER_UNSPECIFIED {
				in.Partitioner = defaultPartitioner(p, v.Parallelism)
			}
		}
	}
	return g
}

// restart reads the restart strategy. Without one, a job that checkpoints
// restarts with exponential-delay and one that does not fails for good, as
// in Flink 1.19+: a checkpointing job has a state to come back to, and one
// lost TaskManager must not end it.
func (c *converter) restart(d *restartDoc, checkpointing bool) *weirv1.RestartStrategy {
	if d == nil {
		d = &restartDoc{}
	}
	kind := enumValue(c, &d.Type, "restart-strategy.type", "type", restartNames, DefaultRestartStrategy(checkpointing))
	r := &weirv1.RestartStrategy{Kind: kind}
	typeName := restartNames.describe(kind)

	// A key the chosen type ignores is almost always a mistake (a setting
	// meant for another type), so it is rejected like an unknown key.
	notFor := func(n *yaml.Node, key, hint string) {
		if present(n) {
			c.ps.addAt(n.Line, "restart-strategy."+key, "not used by restart type %s%s", typeName, hint)
		}
	}
	switch kind {
	case weirv1.RestartStrategy_KIND_NONE:
		notFor(&d.Attempts, "attempts", "")
		notFor(&d.Delay, "delay", "")
		notFor(&d.InitialBackoff, "initial-backoff", "")
		notFor(&d.MaxBackoff, "max-backoff", "")
		notFor(&d.Multiplier, "multiplier", "")
		notFor(&d.ResetBackoffThreshold, "reset-backoff-threshold", "")
	case weirv1.RestartStrategy_KIND_FIXED_DELAY:
		r.Attempts = c.int32(&d.Attempts, "restart-strategy.attempts", DefaultFixedDelayAttempts)
		r.Delay = c.duration(&d.Delay, "restart-strategy.delay", DefaultFixedDelay)
		hint := " (it is for exponential-delay)"
		notFor(&d.InitialBackoff, "initial-backoff", hint)
		notFor(&d.MaxBackoff, "max-backoff", hint)
		notFor(&d.Multiplier, "multiplier", hint)
		notFor(&d.ResetBackoffThreshold, "reset-backoff-threshold", hint)
	case weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY:
		r.Attempts = c.int32(&d.Attempts, "restart-strategy.attempts", DefaultExponentialAttempts)
		r.InitialBackoff = c.duration(&d.InitialBackoff, "restart-strategy.initial-backoff", DefaultInitialBackoff)
		r.MaxBackoff = c.duration(&d.MaxBackoff, "restart-strategy.max-backoff", DefaultMaxBackoff)
		r.Multiplier = c.float(&d.Multiplier, "restart-strategy.multiplier", DefaultBackoffMultiplier)
		r.ResetBackoffThreshold = c.duration(&d.ResetBackoffThreshold, "restart-strategy.reset-backoff-threshold", DefaultResetBackoffThreshold)
		notFor(&d.Delay, "delay", " (exponential-delay uses initial-backoff)")
	}
	return r
}

package jobgraph

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v3"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// MarshalSpec renders g in the YAML job spec shape, every setting spelled
// out, so a stored or submitted graph can be read and edited like the
// original. For a valid graph ParseSpec(MarshalSpec(g)) equals g. Restart
// settings that g's restart type does not use are left out, as the spec
// rejects them; unspecified enums are left out so that they take their
// defaults when parsed.
func MarshalSpec(g *weirv1.JobGraph) ([]byte, error) {
	if g == nil {
		return nil, fmt.Errorf("jobgraph: marshal spec: job graph is nil")
	}
	m := &marshaler{}
	root := m.graph(g)
	if m.err != nil {
		return nil, fmt.Errorf("jobgraph: marshal spec: %w", m.err)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("jobgraph: marshal spec: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("jobgraph: marshal spec: %w", err)
	}
	return buf.Bytes(), nil
}

// marshaler keeps the first error so the builders can stay expression-like.
type marshaler struct {
	err error
}

func (m *marshaler) fail(format string, args ...any) {
	if m.err == nil {
		m.err = fmt.Errorf(format, args...)
	}
}

func mapping() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode} }

func set(n *yaml.Node, key string, v *yaml.Node) {
	if v == nil {
		return
	}
	n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

func strNode(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func intNode(v int64) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v, 10)}
}

func boolNode(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(b)}
}

func floatNode(f float64) *yaml.Node {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	switch {
	case math.IsInf(f, 1):
		s = ".inf"
	case math.IsInf(f, -1):
		s = "-.inf"
	case math.IsNaN(f):
		s = ".nan"
	case !strings.ContainsAny(s, ".e"):
		// "2.0" rather than "2" tells the reader a fraction is allowed.
		s += ".0"
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: s}
}

func (m *marshaler) durationNode(path string, d *durationpb.Duration) *yaml.Node {
	if d == nil {
		return nil
	}
	if err := d.CheckValid(); err != nil {
		m.fail("%s: %w", path, err)
		return nil
	}
	return strNode(FormatDuration(d.AsDuration()))
}

func enumNode[T ~int32](m *marshaler, path string, names enumNames[T], v T) *yaml.Node {
	if v == 0 {
		return nil
	}
	s, ok := names.name(v)
	if !ok {
		m.fail("%s: unknown value %d", path, int32(v))
		return nil
	}
	return strNode(s)
}

func (m *marshaler) graph(g *weirv1.JobGraph) *yaml.Node {
	root := mapping()
	set(root, "name", strNode(g.Name))
	set(root, "max-parallelism", intNode(int64(g.MaxParallelism)))
	if g.RestoreFrom != "" {
		set(root, "restore-from", strNode(g.RestoreFrom))
	}
	if g.DisableChaining {
		set(root, "chaining", boolNode(false))
	}
	if g.Sql != "" {
		set(root, "sql", strNode(g.Sql))
	}
	if g.BufferTimeout != nil {
		set(root, "buffer-timeout", m.durationNode("buffer-timeout", g.BufferTimeout))
	}
	if c := g.Checkpointing; c != nil {
		n := mapping()
		set(n, "interval", m.durationNode("checkpointing.interval", c.Interval))
		set(n, "mode", enumNode(m, "checkpointing.mode", modeNames, c.Mode))
		set(n, "timeout", m.durationNode("checkpointing.timeout", c.Timeout))
		set(n, "min-pause", m.durationNode("checkpointing.min-pause", c.MinPause))
		set(n, "max-concurrent", intNode(int64(c.MaxConcurrent)))
		set(n, "retained", intNode(int64(c.Retained)))
		set(n, "unaligned", boolNode(c.Unaligned))
		set(n, "aligned-checkpoint-timeout", m.durationNode("checkpointing.aligned-checkpoint-timeout", c.AlignedCheckpointTimeout))
		set(n, "tolerable-failed-checkpoints", intNode(int64(c.TolerableFailedCheckpoints)))
		set(n, "externalized", enumNode(m, "checkpointing.externalized", externalizedNames, c.ExternalizedRetention))
		if c.IntervalDuringBacklog != nil {
			set(n, "interval-during-backlog", m.durationNode("checkpointing.interval-during-backlog", c.IntervalDuringBacklog))
		}
		set(root, "checkpointing", n)
	}
	if r := g.RestartStrategy; r != nil {
		n := mapping()
		set(n, "type", enumNode(m, "restart-strategy.type", restartNames, r.Kind))
		switch r.Kind {
		case weirv1.RestartStrategy_KIND_FIXED_DELAY:
			set(n, "attempts", intNode(int64(r.Attempts)))
			set(n, "delay", m.durationNode("restart-strategy.delay", r.Delay))
		case weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY:
			set(n, "attempts", intNode(int64(r.Attempts)))
			set(n, "initial-backoff", m.durationNode("restart-strategy.initial-backoff", r.InitialBackoff))
			set(n, "max-backoff", m.durationNode("restart-strategy.max-backoff", r.MaxBackoff))
			set(n, "multiplier", floatNode(r.Multiplier))
			set(n, "reset-backoff-threshold", m.durationNode("restart-strategy.reset-backoff-threshold", r.ResetBackoffThreshold))
		}
		set(root, "restart-strategy", n)
	}
	if s := g.State; s != nil {
		n := mapping()
		set(n, "backend", enumNode(m, "state.backend", backendNames, s.Backend))
		set(n, "incremental", boolNode(s.Incremental))
		set(root, "state", n)
	}
	if a := g.Autoscaler; a != nil {
		set(root, "autoscaler", m.marshalAutoscaler(a))
	}
	vertices := &yaml.Node{Kind: yaml.SequenceNode}
	for i, v := range g.Vertices {
		if v == nil {
			m.fail("vertices[%d]: missing", i)
			continue
		}
		p := fmt.Sprintf("vertices[%d]", i)
		n := mapping()
		set(n, "name", strNode(v.Name))
		set(n, "operator", strNode(v.Operator))
		set(n, "parallelism", intNode(int64(v.Parallelism)))
		if v.SlotSharingGroup != "" {
			set(n, "slot-sharing-group", strNode(v.SlotSharingGroup))
		}
		if v.DisableChaining {
			set(n, "chaining", boolNode(false))
		}
		if v.Description != "" {
			set(n, "description", strNode(v.Description))
		}
		if v.ChangelogMode != "" {
			set(n, "changelog-mode", strNode(v.ChangelogMode))
		}
		if len(v.Inputs) > 0 {
			// Flow style keeps each edge on one line, as people write them.
			inputs := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for j, in := range v.Inputs {
				if in == nil {
					m.fail("%s.inputs[%d]: missing", p, j)
					continue
				}
				e := mapping()
				set(e, "from", strNode(in.Source))
				set(e, "partition", enumNode(m, fmt.Sprintf("%s.inputs[%d].partition", p, j), partitionNames, in.Partitioner))
				if in.Output != "" {
					set(e, "output", strNode(in.Output))
				}
				inputs.Content = append(inputs.Content, e)
			}
			set(n, "inputs", inputs)
		}
		if w := v.Watermarks; w != nil {
			wn := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			set(wn, "max-out-of-orderness", m.durationNode(p+".watermarks.max-out-of-orderness", w.MaxOutOfOrderness))
			set(wn, "idle-timeout", m.durationNode(p+".watermarks.idle-timeout", w.IdleTimeout))
			set(wn, "interval", m.durationNode(p+".watermarks.interval", w.Interval))
			set(n, "watermarks", wn)
		}
		if v.Config != nil {
			cfg := &yaml.Node{}
			if err := cfg.Encode(yamlValue(structpb.NewStructValue(v.Config))); err != nil {
				m.fail("%s.config: %w", p, err)
			} else {
				set(n, "config", cfg)
			}
		}
		vertices.Content = append(vertices.Content, n)
	}
	set(root, "vertices", vertices)
	return root
}

// yamlValue turns a Struct value back into plain Go values, writing whole
// numbers as integers: the spec said "count: 100000", not "1e+05".
func yamlValue(v *structpb.Value) any {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		f := k.NumberValue
		if f == math.Trunc(f) && math.Abs(f) <= maxExactInt {
			return int64(f)
		}
		return f
	case *structpb.Value_StringValue:
		return k.StringValue
	case *structpb.Value_BoolValue:
		return k.BoolValue
	case *structpb.Value_StructValue:
		out := make(map[string]any, len(k.StructValue.GetFields()))
		for key, fv := range k.StructValue.GetFields() {
			out[key] = yamlValue(fv)
		}
		return out
	case *structpb.Value_ListValue:
		out := make([]any, len(k.ListValue.GetValues()))
		for i, e := range k.ListValue.GetValues() {
			out[i] = yamlValue(e)
		}
		return out
	}
	return nil
}

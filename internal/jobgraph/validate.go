package jobgraph

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirproject/weir/internal/connector"
	"github.com/weirproject/weir/internal/window"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// vertexName keeps names usable in file paths, metric names and log lines.
var vertexName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Validate checks a complete job graph and changes nothing. Graphs from
// ParseSpec are complete; others may need ApplyDefaults first, since zero
// values such as an unspecified mode or a retained count of 0 are errors
// here. Problems name fields by their job spec keys. The error wraps
// ErrInvalidSpec and is a *SpecError.
func Validate(g *weirv1.JobGraph) error {
	var ps problems
	if g == nil {
		ps.add("", "job graph is missing")
		return ps.err()
	}
	if g.Name == "" {
		ps.add("name", "required")
	}
	maxOK := g.MaxParallelism >= 1 && g.MaxParallelism <= UpperBoundMaxParallelism
	if !maxOK {
		ps.add("max-parallelism", "must be between 1 and %d, got %d", UpperBoundMaxParallelism, g.MaxParallelism)
	}
	if g.BufferTimeout != nil {
		if d, ok := checkDuration(&ps, "buffer-timeout", g.BufferTimeout); ok && (d < 0 || d > MaxBufferTimeout) {
			ps.add("buffer-timeout", "must be between 0s and %s, got %s", FormatDuration(MaxBufferTimeout), FormatDuration(d))
		}
	}
	validateCheckpointing(&ps, g.Checkpointing)
	validateRestart(&ps, g.RestartStrategy)
	validateState(&ps, g.State)
	validateVertices(&ps, g, maxOK)
	validateAutoscaler(&ps, g)
	return ps.err()
}

// MaxBufferTimeout bounds buffer-timeout: a record held longer than this
// in a batch is a mistake, not a setting (Flink's default is 100ms).
const MaxBufferTimeout = time.Minute

func validateCheckpointing(ps *problems, c *weirv1.CheckpointConfig) {
	const p = "checkpointing."
	if c == nil {
		ps.add("checkpointing", "missing")
		return
	}
	if d, ok := checkDuration(ps, p+"interval", c.Interval); ok {
		switch {
		case d < 0:
			ps.add(p+"interval", "must not be negative, got %s", FormatDuration(d))
		case d > 0 && d < MinCheckpointInterval:
			ps.add(p+"interval", "%s is below the minimum of %s (0 disables periodic checkpoints)", FormatDuration(d), FormatDuration(MinCheckpointInterval))
		}
	}
	if c.IntervalDuringBacklog != nil {
		if d, ok := checkDuration(ps, p+"interval-during-backlog", c.IntervalDuringBacklog); ok {
			switch {
			case d < 0:
				ps.add(p+"interval-during-backlog", "must not be negative, got %s", FormatDuration(d))
			case d > 0 && d < MinCheckpointInterval:
				ps.add(p+"interval-during-backlog", "%s is below the minimum of %s (0 takes no checkpoints during a backlog)", FormatDuration(d), FormatDuration(MinCheckpointInterval))
			}
		}
	}
	if d, ok := checkDuration(ps, p+"timeout", c.Timeout); ok && d <= 0 {
		ps.add(p+"timeout", "must be positive, got %s", FormatDuration(d))
	}
	if d, ok := checkDuration(ps, p+"min-pause", c.MinPause); ok && d < 0 {
		ps.add(p+"min-pause", "must not be negative, got %s", FormatDuration(d))
	}
	if c.MaxConcurrent < 1 {
		ps.add(p+"max-concurrent", "must be at least 1, got %d", c.MaxConcurrent)
	}
	checkEnum(ps, p+"mode", "mode", modeNames, c.Mode)
	if c.Retained < 1 {
		ps.add(p+"retained", "must be at least 1, got %d", c.Retained)
	}
	// Unaligned checkpoints let barriers overtake records, which is only
	// sound when the barrier is aligned in the first place (Flink's rule).
	if c.Unaligned && c.Mode != weirv1.CheckpointingMode_CHECKPOINTING_MODE_EXACTLY_ONCE {
		ps.add(p+"unaligned", "unaligned checkpoints require mode exactly-once, got %s", modeNames.describe(c.Mode))
	}
	if d, ok := checkDuration(ps, p+"aligned-checkpoint-timeout", c.AlignedCheckpointTimeout); ok {
		switch {
		case d < 0:
			ps.add(p+"aligned-checkpoint-timeout", "must not be negative, got %s", FormatDuration(d))
		case d > 0 && !c.Unaligned:
			// The timeout switches an aligned checkpoint to unaligned; without
			// unaligned it would be silently ignored.
			ps.add(p+"aligned-checkpoint-timeout", "only applies with unaligned: true")
		}
	}
	if c.TolerableFailedCheckpoints < 0 {
		ps.add(p+"tolerable-failed-checkpoints", "must not be negative, got %d", c.TolerableFailedCheckpoints)
	}
	checkEnum(ps, p+"externalized", "retention", externalizedNames, c.ExternalizedRetention)
}

func validateRestart(ps *problems, r *weirv1.RestartStrategy) {
	const p = "restart-strategy."
	if r == nil {
		ps.add("restart-strategy", "missing")
		return
	}
	checkEnum(ps, p+"type", "type", restartNames, r.Kind)
	switch r.Kind {
	case weirv1.RestartStrategy_KIND_FIXED_DELAY:
		if r.Attempts < 0 {
			ps.add(p+"attempts", "must not be negative, got %d", r.Attempts)
		}
		if d, ok := checkDuration(ps, p+"delay", r.Delay); ok && d < 0 {
			ps.add(p+"delay", "must not be negative, got %s", FormatDuration(d))
		}
	case weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY:
		if r.Attempts < 0 {
			ps.add(p+"attempts", "must not be negative, got %d", r.Attempts)
		}
		initial, okInitial := checkDuration(ps, p+"initial-backoff", r.InitialBackoff)
		if okInitial && initial <= 0 {
			ps.add(p+"initial-backoff", "must be positive, got %s", FormatDuration(initial))
			okInitial = false
		}
		if d, ok := checkDuration(ps, p+"max-backoff", r.MaxBackoff); ok && okInitial && d < initial {
			ps.add(p+"max-backoff", "%s is less than initial-backoff %s", FormatDuration(d), FormatDuration(initial))
		}
		// Written to also reject NaN.
		if !(r.Multiplier >= 1) || math.IsInf(r.Multiplier, 0) {
			ps.add(p+"multiplier", "must be at least 1, got %v", r.Multiplier)
		}
		if d, ok := checkDuration(ps, p+"reset-backoff-threshold", r.ResetBackoffThreshold); ok && d < 0 {
			ps.add(p+"reset-backoff-threshold", "must not be negative, got %s", FormatDuration(d))
		}
	}
}

func validateState(ps *problems, s *weirv1.StateBackendConfig) {
	if s == nil {
		ps.add("state", "missing")
		return
	}
	checkEnum(ps, "state.backend", "backend", backendNames, s.Backend)
}

func validateVertices(ps *problems, g *weirv1.JobGraph, maxOK bool) {
	if len(g.Vertices) == 0 {
		ps.add("vertices", "at least one vertex is required")
		return
	}
	first := map[string]int{}
	for i, v := range g.Vertices {
		p := fmt.Sprintf("vertices[%d]", i)
		if v == nil {
			ps.add(p, "missing")
			continue
		}
		switch {
		case v.Name == "":
			ps.add(p+".name", "required")
		case !vertexName.MatchString(v.Name):
			ps.add(p+".name", "invalid vertex name %q: use only letters, digits, '_', '.' and '-'", v.Name)
		}
		if v.Name != "" {
			if j, dup := first[v.Name]; dup {
				ps.add(p+".name", "duplicate vertex name %q (also vertices[%d])", v.Name, j)
			} else {
				first[v.Name] = i
			}
		}
		if v.Operator == "" {
			ps.add(p+".operator", "required")
		}
		switch {
		case v.Parallelism < 1:
			ps.add(p+".parallelism", "must be at least 1, got %d", v.Parallelism)
		case maxOK && v.Parallelism > g.MaxParallelism:
			ps.add(p+".parallelism", "%d exceeds max-parallelism %d", v.Parallelism, g.MaxParallelism)
		}
	}

	sources := 0
	for i, v := range g.Vertices {
		if v == nil {
			continue
		}
		if len(v.Inputs) == 0 {
			sources++
		}
		seen := map[string]int{}
		for j, in := range v.Inputs {
			ip := fmt.Sprintf("vertices[%d].inputs[%d]", i, j)
			if in == nil {
				ps.add(ip, "missing")
				continue
			}
			u, known := first[in.Source]
			switch {
			case in.Source == "":
				ps.add(ip+".from", "required")
				continue
			case in.Source == v.Name:
				ps.add(ip+".from", "vertex %q cannot read its own output", v.Name)
				continue
			case !known:
				ps.add(ip+".from", "unknown vertex %q", in.Source)
				continue
			}
			// A second edge from the same vertex would deliver every record
			// twice under one channel name; almost surely a mistake.
			if k, dup := seen[in.Source]; dup {
				ps.add(ip+".from", "duplicate input from %q (also inputs[%d])", in.Source, k)
				continue
			}
			seen[in.Source] = j
			if !checkEnum(ps, ip+".partition", "partition", partitionNames, in.Partitioner) {
				continue
			}
			up := g.Vertices[u]
			if in.Partitioner == weirv1.Partitioner_PARTITIONER_FORWARD &&
				up.Parallelism >= 1 && v.Parallelism >= 1 && up.Parallelism != v.Parallelism {
				ps.add(ip+".partition", "forward requires equal parallelism on both ends, but %q has %d and %q has %d (use rebalance or hash)",
					up.Name, up.Parallelism, v.Name, v.Parallelism)
			}
		}
	}
	if sources == 0 {
		ps.add("vertices", "no source vertex: every vertex has inputs, so nothing produces records")
	}
	validateEventTime(ps, g, first)
	validateConnectors(ps, g)
	if cycle, closing, ok := findCycle(len(g.Vertices), resolveEdges(g)); ok {
		ps.add(fmt.Sprintf("vertices[%d].inputs[%d].from", closing.to, closing.input), "cycle: %s", cycleString(g, cycle))
	}
}

// checkEnum reports unspecified or unknown enum values and says whether v is
// one of names.
func checkEnum[T ~int32](ps *problems, path, what string, names enumNames[T], v T) bool {
	if _, ok := names.name(v); ok {
		return true
	}
	if v == 0 {
		ps.add(path, "required (%s)", names.want())
	} else {
		ps.add(path, "unknown %s %d (want %s)", what, int32(v), names.want())
	}
	return false
}

// checkDuration treats a nil duration as 0, as proto3 does.
func checkDuration(ps *problems, path string, d *durationpb.Duration) (time.Duration, bool) {
	if d == nil {
		return 0, true
	}
	if err := d.CheckValid(); err != nil {
		ps.add(path, "invalid duration: %v", err)
		return 0, false
	}
	return d.AsDuration(), true
}

// formatDuration writes durations the way a user would in a spec: "1m", not
// Go's "1m0s".
// FormatDuration writes d as job specs do: 1m, 2h, not 1m0s or 2h0m0s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// validateEventTime checks watermark strategies, the built-in window and
// join operators' configuration, and that an event-time window or a join
// has a watermarked source upstream (without one its windows would fire,
// and its state be cleaned, only at the end of the input, or never).
func validateEventTime(ps *problems, g *weirv1.JobGraph, index map[string]int) {
	for i, v := range g.Vertices {
		if v == nil {
			continue
		}
		p := fmt.Sprintf("vertices[%d]", i)
		if w := v.Watermarks; w != nil {
			if len(v.Inputs) > 0 {
				ps.add(p+".watermarks", "only a source vertex generates watermarks; %q has inputs (operators forward their inputs' watermarks)", v.Name)
			}
			if d, ok := checkDuration(ps, p+".watermarks.max-out-of-orderness", w.MaxOutOfOrderness); ok && d < 0 {
				ps.add(p+".watermarks.max-out-of-orderness", "must not be negative, got %s", FormatDuration(d))
			}
			if d, ok := checkDuration(ps, p+".watermarks.idle-timeout", w.IdleTimeout); ok && d < 0 {
				ps.add(p+".watermarks.idle-timeout", "must not be negative, got %s (0: never idle)", FormatDuration(d))
			}
			if d, ok := checkDuration(ps, p+".watermarks.interval", w.Interval); ok && d <= 0 {
				ps.add(p+".watermarks.interval", "must be positive, got %s", FormatDuration(d))
			}
		}
		for j, in := range v.Inputs {
			if in != nil && in.Output != "" && !vertexName.MatchString(in.Output) {
				ps.add(fmt.Sprintf("%s.inputs[%d].output", p, j), "invalid output name %q: use only letters, digits, '_', '.' and '-'", in.Output)
			}
		}
		if v.Operator == "interval-join" || v.Operator == "window-join" {
			validateJoin(ps, g, index, i, v)
			continue
		}
		if v.Operator != "window" {
			continue
		}
		spec, err := window.Parse(sdk.Config(v.Config.AsMap()))
		if err != nil {
			ps.add(p+".config", "%v", err)
			continue
		}
		if !spec.ProcessingTime && !watermarkedUpstream(g, index, v, map[string]bool{}) {
			ps.add(p+".config.time", "an event-time window needs a source with a watermarks strategy upstream; none of %q's sources has one (add watermarks: {max-out-of-orderness: ...} to the source, or use time: processing)", v.Name)
		}
	}
}

// validateJoin checks a built-in join: its configuration, its two inputs
// (left, then right), keyed so that both sides of a key meet in one
// subtask, and a watermarked source upstream of each. The join's
// watermark is the lower of its inputs': an input without one holds it
// back, and the join buffers everything until the end of the input.
func validateJoin(ps *problems, g *weirv1.JobGraph, index map[string]int, i int, v *weirv1.JobVertex) {
	p := fmt.Sprintf("vertices[%d]", i)
	cfg := sdk.Config(v.Config.AsMap())
	var err error
	if v.Operator == "interval-join" {
		_, err = window.ParseIntervalJoin(cfg)
	} else {
		_, err = window.ParseWindowJoin(cfg)
	}
	if err != nil {
		ps.add(p+".config", "%v", err)
	}
	if len(v.Inputs) != 2 {
		ps.add(p+".inputs", "%s joins exactly two inputs (left, then right), got %d", v.Operator, len(v.Inputs))
		return
	}
	for j, in := range v.Inputs {
		u, ok := index[in.GetSource()]
		if !ok {
			continue // reported with the inputs
		}
		ip := fmt.Sprintf("%s.inputs[%d]", p, j)
		// Unspecified and unknown partitioners are reported with the inputs.
		if name, known := partitionNames.name(in.GetPartitioner()); known && in.GetPartitioner() != weirv1.Partitioner_PARTITIONER_HASH {
			ps.add(ip+".partition", "a join's inputs must be keyed: use partition: hash, not %s (records of a key from both sides must meet in one subtask)", name)
		}
		up := g.Vertices[u]
		if (up.Watermarks == nil || len(up.Inputs) > 0) && !watermarkedUpstream(g, index, up, map[string]bool{}) {
			ps.add(ip+".from", "a join runs on event time and needs a source with a watermarks strategy upstream of each input; none of %q's sources has one (add watermarks: {max-out-of-orderness: ...} to the source)", in.GetSource())
		}
	}
}

// watermarkedUpstream reports whether a source upstream of v generates
// watermarks.
func watermarkedUpstream(g *weirv1.JobGraph, index map[string]int, v *weirv1.JobVertex, seen map[string]bool) bool {
	if seen[v.Name] {
		return false
	}
	seen[v.Name] = true
	for _, in := range v.Inputs {
		i, ok := index[in.GetSource()]
		if !ok {
			continue
		}
		u := g.Vertices[i]
		if u.Watermarks != nil && len(u.Inputs) == 0 {
			return true
		}
		if watermarkedUpstream(g, index, u, seen) {
			return true
		}
	}
	return false
}

// validateConnectors runs the check each vertex's operator or connector
// registered (internal/connector): a problem is placed under the vertex's
// config, or where in the job it says.
func validateConnectors(ps *problems, g *weirv1.JobGraph) {
	for i, v := range g.Vertices {
		if v == nil {
			continue
		}
		s, ok := connector.Lookup(Connector(v))
		if !ok || s.Check == nil {
			continue
		}
		p := fmt.Sprintf("vertices[%d].config", i)
		for _, pr := range s.Check(g, v) {
			path := p
			switch {
			case pr.Global:
				path = pr.Path
			case pr.Path != "":
				path = p + "." + pr.Path
			}
			ps.add(path, "%s", pr.Msg)
		}
	}
}

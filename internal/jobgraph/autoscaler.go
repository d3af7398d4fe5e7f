package jobgraph

import (
	"sort"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"gopkg.in/yaml.v3"

	"github.com/weirproject/weir/internal/autoscaler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// autoscalerDoc is the spec's `autoscaler:` (Flink's job.autoscaler.*
// options without the prefix).
type autoscalerDoc struct {
	Enabled             yaml.Node            `yaml:"enabled"`
	TargetUtilization   yaml.Node            `yaml:"target-utilization"`
	UtilizationBoundary yaml.Node            `yaml:"utilization-boundary"`
	Interval            yaml.Node            `yaml:"interval"`
	MetricsWindow       yaml.Node            `yaml:"metrics-window"`
	Stabilization       yaml.Node            `yaml:"stabilization"`
	ScaleDownDelay      yaml.Node            `yaml:"scale-down-delay"`
	CatchUpDuration     yaml.Node            `yaml:"catch-up-duration"`
	RestartTime         yaml.Node            `yaml:"restart-time"`
	MaxRescalesPerHour  yaml.Node            `yaml:"max-rescales-per-hour"`
	MaxScaleDownFactor  yaml.Node            `yaml:"max-scale-down-factor"`
	MaxScaleUpFactor    yaml.Node            `yaml:"max-scale-up-factor"`
	MinParallelism      yaml.Node            `yaml:"min-parallelism"`
	MaxParallelism      yaml.Node            `yaml:"max-parallelism"`
	Vertices            map[string]boundsDoc `yaml:"vertices"`
}

type boundsDoc struct {
	MinParallelism yaml.Node `yaml:"min-parallelism"`
	MaxParallelism yaml.Node `yaml:"max-parallelism"`
}

// autoscaler reads the spec's autoscaler, absent keys at their defaults;
// nil when the spec has none.
func (c *converter) autoscaler(d *autoscalerDoc) *weirv1.AutoscalerConfig {
	if d == nil {
		return nil
	}
	const p = "autoscaler."
	a := &weirv1.AutoscalerConfig{
		Enabled:             c.bool(&d.Enabled, p+"enabled", false),
		TargetUtilization:   c.float(&d.TargetUtilization, p+"target-utilization", autoscaler.DefaultTargetUtilization),
		UtilizationBoundary: proto.Float64(c.float(&d.UtilizationBoundary, p+"utilization-boundary", autoscaler.DefaultUtilizationBoundary)),
		Interval:            c.duration(&d.Interval, p+"interval", autoscaler.DefaultInterval),
		MetricsWindow:       c.duration(&d.MetricsWindow, p+"metrics-window", autoscaler.DefaultMetricsWindow),
		Stabilization:       c.duration(&d.Stabilization, p+"stabilization", autoscaler.DefaultStabilization),
		ScaleDownDelay:      c.duration(&d.ScaleDownDelay, p+"scale-down-delay", autoscaler.DefaultScaleDownDelay),
		CatchUpDuration:     c.duration(&d.CatchUpDuration, p+"catch-up-duration", autoscaler.DefaultCatchUpDuration),
		RestartTime:         c.duration(&d.RestartTime, p+"restart-time", autoscaler.DefaultRestartTime),
		MaxRescalesPerHour:  c.int32(&d.MaxRescalesPerHour, p+"max-rescales-per-hour", autoscaler.DefaultMaxRescalesPerHour),
		MaxScaleDownFactor:  c.float(&d.MaxScaleDownFactor, p+"max-scale-down-factor", autoscaler.DefaultMaxScaleDownFactor),
		MaxScaleUpFactor:    c.float(&d.MaxScaleUpFactor, p+"max-scale-up-factor", autoscaler.DefaultMaxScaleUpFactor),
		MinParallelism:      c.int32(&d.MinParallelism, p+"min-parallelism", 0),
		MaxParallelism:      c.int32(&d.MaxParallelism, p+"max-parallelism", 0),
	}
	if present(&d.MaxRescalesPerHour) && a.MaxRescalesPerHour < 1 {
		c.ps.addAt(d.MaxRescalesPerHour.Line, p+"max-rescales-per-hour", "must be at least 1, got %d", a.MaxRescalesPerHour)
	}
	for name, b := range d.Vertices {
		if a.Vertices == nil {
			a.Vertices = map[string]*weirv1.ParallelismBounds{}
		}
		vp := p + "vertices." + name + "."
		a.Vertices[name] = &weirv1.ParallelismBounds{
			Min: c.int32(&b.MinParallelism, vp+"min-parallelism", 0),
			Max: c.int32(&b.MaxParallelism, vp+"max-parallelism", 0),
		}
	}
	return a
}

// AutoscalerSettings is the autoscaler configuration a's job runs with:
// its zero fields at the defaults.
func AutoscalerSettings(a *weirv1.AutoscalerConfig) autoscaler.Config {
	dur := func(d *durationpb.Duration, def time.Duration) time.Duration {
		if d == nil {
			return def
		}
		return d.AsDuration()
	}
	or := func(v, def float64) float64 {
		if v == 0 {
			return def
		}
		return v
	}
	c := autoscaler.Config{
		TargetUtilization:   or(a.GetTargetUtilization(), autoscaler.DefaultTargetUtilization),
		UtilizationBoundary: autoscaler.DefaultUtilizationBoundary,
		Interval:            dur(a.GetInterval(), autoscaler.DefaultInterval),
		MetricsWindow:       dur(a.GetMetricsWindow(), autoscaler.DefaultMetricsWindow),
		Stabilization:       dur(a.GetStabilization(), autoscaler.DefaultStabilization),
		ScaleDownDelay:      dur(a.GetScaleDownDelay(), autoscaler.DefaultScaleDownDelay),
		CatchUpDuration:     dur(a.GetCatchUpDuration(), autoscaler.DefaultCatchUpDuration),
		RestartTime:         dur(a.GetRestartTime(), autoscaler.DefaultRestartTime),
		MaxRescalesPerHour:  int(a.GetMaxRescalesPerHour()),
		MaxScaleDownFactor:  or(a.GetMaxScaleDownFactor(), autoscaler.DefaultMaxScaleDownFactor),
		MaxScaleUpFactor:    or(a.GetMaxScaleUpFactor(), autoscaler.DefaultMaxScaleUpFactor),
		MinParallelism:      a.GetMinParallelism(),
		MaxParallelism:      a.GetMaxParallelism(),
	}
	if a.UtilizationBoundary != nil {
		c.UtilizationBoundary = a.GetUtilizationBoundary()
	}
	if c.MaxRescalesPerHour == 0 {
		c.MaxRescalesPerHour = autoscaler.DefaultMaxRescalesPerHour
	}
	for name, b := range a.GetVertices() {
		if c.Vertices == nil {
			c.Vertices = map[string]autoscaler.Bounds{}
		}
		c.Vertices[name] = autoscaler.Bounds{Min: b.GetMin(), Max: b.GetMax()}
	}
	return c
}

// AutoscalerProto is c as the job graph carries it.
func AutoscalerProto(c autoscaler.Config, enabled bool) *weirv1.AutoscalerConfig {
	a := &weirv1.AutoscalerConfig{
		Enabled: enabled, TargetUtilization: c.TargetUtilization, UtilizationBoundary: proto.Float64(c.UtilizationBoundary),
		Interval: durationpb.New(c.Interval), MetricsWindow: durationpb.New(c.MetricsWindow),
		Stabilization: durationpb.New(c.Stabilization), ScaleDownDelay: durationpb.New(c.ScaleDownDelay),
		CatchUpDuration: durationpb.New(c.CatchUpDuration), RestartTime: durationpb.New(c.RestartTime),
		MaxRescalesPerHour: int32(c.MaxRescalesPerHour), MaxScaleDownFactor: c.MaxScaleDownFactor,
		MaxScaleUpFactor: c.MaxScaleUpFactor, MinParallelism: c.MinParallelism, MaxParallelism: c.MaxParallelism,
	}
	for name, b := range c.Vertices {
		if a.Vertices == nil {
			a.Vertices = map[string]*weirv1.ParallelismBounds{}
		}
		a.Vertices[name] = &weirv1.ParallelismBounds{Min: b.Min, Max: b.Max}
	}
	return a
}

func validateAutoscaler(ps *problems, g *weirv1.JobGraph) {
	a := g.GetAutoscaler()
	if a == nil {
		return
	}
	for _, d := range []struct {
		name string
		d    *durationpb.Duration
	}{
		{"interval", a.Interval}, {"metrics-window", a.MetricsWindow}, {"stabilization", a.Stabilization},
		{"scale-down-delay", a.ScaleDownDelay}, {"catch-up-duration", a.CatchUpDuration}, {"restart-time", a.RestartTime},
	} {
		if _, ok := checkDuration(ps, "autoscaler."+d.name, d.d); !ok {
			return
		}
	}
	if err := AutoscalerSettings(a).Validate(); err != nil {
		ps.add("autoscaler", "%v", err)
	}
	names := map[string]bool{}
	for _, v := range g.GetVertices() {
		names[v.GetName()] = true
	}
	var unknown []string
	for name := range a.GetVertices() {
		if !names[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		ps.add("autoscaler.vertices."+name, "the job has no vertex %q", name)
	}
	if m := a.GetMaxParallelism(); m > g.GetMaxParallelism() && g.GetMaxParallelism() > 0 {
		ps.add("autoscaler.max-parallelism", "%d is above the job's max-parallelism %d", m, g.GetMaxParallelism())
	}
}

// marshalAutoscaler writes a back as the spec's autoscaler.
func (m *marshaler) marshalAutoscaler(a *weirv1.AutoscalerConfig) *yaml.Node {
	const p = "autoscaler."
	n := mapping()
	set(n, "enabled", boolNode(a.Enabled))
	set(n, "target-utilization", floatNode(a.TargetUtilization))
	if a.UtilizationBoundary != nil {
		set(n, "utilization-boundary", floatNode(a.GetUtilizationBoundary()))
	}
	set(n, "interval", m.durationNode(p+"interval", a.Interval))
	set(n, "metrics-window", m.durationNode(p+"metrics-window", a.MetricsWindow))
	set(n, "stabilization", m.durationNode(p+"stabilization", a.Stabilization))
	set(n, "scale-down-delay", m.durationNode(p+"scale-down-delay", a.ScaleDownDelay))
	set(n, "catch-up-duration", m.durationNode(p+"catch-up-duration", a.CatchUpDuration))
	set(n, "restart-time", m.durationNode(p+"restart-time", a.RestartTime))
	set(n, "max-rescales-per-hour", intNode(int64(a.MaxRescalesPerHour)))
	set(n, "max-scale-down-factor", floatNode(a.MaxScaleDownFactor))
	set(n, "max-scale-up-factor", floatNode(a.MaxScaleUpFactor))
	set(n, "min-parallelism", intNode(int64(a.MinParallelism)))
	set(n, "max-parallelism", intNode(int64(a.MaxParallelism)))
	if len(a.Vertices) > 0 {
		names := make([]string, 0, len(a.Vertices))
		for name := range a.Vertices {
			names = append(names, name)
		}
		sort.Strings(names)
		vs := mapping()
		for _, name := range names {
			b := a.Vertices[name]
			bn := mapping()
			bn.Style = yaml.FlowStyle
			set(bn, "min-parallelism", intNode(int64(b.GetMin())))
			set(bn, "max-parallelism", intNode(int64(b.GetMax())))
			set(vs, name, bn)
		}
		set(n, "vertices", vs)
	}
	return n
}

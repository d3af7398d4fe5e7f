package autoscaler

import (
	"fmt"
	"math"
	"time"
)

// Config is a job's autoscaler configuration (job spec `autoscaler:`).
// The defaults are Flink's where its restart cost does not set them; where
// it does they are shorter, because a Weir rescale pauses a job for about a
// second where Flink's restarts it for minutes.
type Config struct {
	// TargetUtilization is the share of each vertex's true processing
	// rate the target rate should use; the rest is headroom.
	TargetUtilization float64
	// UtilizationBoundary: a vertex whose utilization is within
	// TargetUtilization ± UtilizationBoundary is left alone.
	UtilizationBoundary float64
	// Interval is how often the autoscaler decides.
	Interval time.Duration
	// MetricsWindow is the span of samples a decision averages.
	MetricsWindow time.Duration
	// Stabilization is how long after a (re)start samples are ignored.
	Stabilization time.Duration
	// ScaleDownDelay is how long a vertex's scale-down must be asked for
	// at every decision before it is carried out.
	ScaleDownDelay time.Duration
	// CatchUpDuration is the time a backlog (Kafka lag) should be caught
	// up in, beside keeping up with the input.
	CatchUpDuration time.Duration
	// RestartTime is the pause a rescale costs, whose input must be
	// caught up too.
	RestartTime time.Duration
	// MaxRescalesPerHour bounds the rescales in any hour (at least 1).
	MaxRescalesPerHour int
	// MaxScaleDownFactor and MaxScaleUpFactor bound one step: a vertex's
	// parallelism p goes no lower than p·(1−down) and no higher than
	// p·(1+up).
	MaxScaleDownFactor float64
	MaxScaleUpFactor   float64
	// MinParallelism and MaxParallelism bound every vertex (0: 1 and the
	// job's max-parallelism); Vertices bound single vertices by name.
	MinParallelism int32
	MaxParallelism int32
	Vertices       map[string]Bounds
}

// Bounds are a vertex's parallelism bounds; 0 leaves one to the job-wide
// bound.
type Bounds struct {
	Min, Max int32
}

// Defaults.
const (
	DefaultTargetUtilization   = 0.7
	DefaultUtilizationBoundary = 0.3
	DefaultInterval            = 15 * time.Second
	DefaultMetricsWindow       = 3 * time.Minute
	DefaultStabilization       = time.Minute
	DefaultScaleDownDelay      = 30 * time.Minute
	DefaultCatchUpDuration     = 5 * time.Minute
	DefaultRestartTime         = 5 * time.Second
	DefaultMaxRescalesPerHour  = 10
	DefaultMaxScaleDownFactor  = 0.6
	DefaultMaxScaleUpFactor    = 100000
)

// Validate says what is wrong with c, nil when nothing is. The checks
// are written so that NaN fails them.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"target-utilization", c.TargetUtilization}, {"utilization-boundary", c.UtilizationBoundary},
		{"max-scale-down-factor", c.MaxScaleDownFactor}, {"max-scale-up-factor", c.MaxScaleUpFactor},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s %v is not a number", f.name, f.v)
		}
	}
	switch {
	case !(c.TargetUtilization > 0 && c.TargetUtilization <= 1):
		return fmt.Errorf("target-utilization %v is outside (0, 1]", c.TargetUtilization)
	case !(c.UtilizationBoundary >= 0 && c.UtilizationBoundary < 1):
		return fmt.Errorf("utilization-boundary %v is outside [0, 1)", c.UtilizationBoundary)
	case c.Interval <= 0:
		return fmt.Errorf("interval %s must be positive", c.Interval)
	case c.MetricsWindow < c.Interval:
		return fmt.Errorf("metrics-window %s is shorter than interval %s", c.MetricsWindow, c.Interval)
	case c.Stabilization < 0 || c.ScaleDownDelay < 0 || c.RestartTime < 0:
		return fmt.Errorf("stabilization, scale-down-delay and restart-time must not be negative")
	case c.CatchUpDuration <= 0:
		return fmt.Errorf("catch-up-duration %s must be positive", c.CatchUpDuration)
	case c.MaxRescalesPerHour < 1:
		return fmt.Errorf("max-rescales-per-hour %d must be at least 1", c.MaxRescalesPerHour)
	case !(c.MaxScaleDownFactor > 0 && c.MaxScaleDownFactor <= 1):
		return fmt.Errorf("max-scale-down-factor %v is outside (0, 1]", c.MaxScaleDownFactor)
	case !(c.MaxScaleUpFactor > 0):
		return fmt.Errorf("max-scale-up-factor %v must be positive", c.MaxScaleUpFactor)
	case c.MinParallelism < 0 || c.MaxParallelism < 0 || c.MaxParallelism > 0 && c.MinParallelism > c.MaxParallelism:
		return fmt.Errorf("min-parallelism %d and max-parallelism %d are not bounds", c.MinParallelism, c.MaxParallelism)
	}
	for name, b := range c.Vertices {
		if b.Min < 0 || b.Max < 0 || b.Max > 0 && b.Min > b.Max {
			return fmt.Errorf("vertices.%s: min-parallelism %d and max-parallelism %d are not bounds", name, b.Min, b.Max)
		}
	}
	return nil
}

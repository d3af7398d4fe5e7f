package task

import (
	"log/slog"

	"github.com/weirproject/weir/sdk"
)

// opContext is the sdk.Context of a subtask.
type opContext struct{ t *Task }

func (c *opContext) JobID() string               { return c.t.attempt.GetJobId() }
func (c *opContext) TaskName() string            { return c.t.attempt.GetVertex() }
func (c *opContext) SubtaskIndex() int           { return int(c.t.attempt.GetSubtaskIndex()) }
func (c *opContext) Parallelism() int            { return int(c.t.desc.GetParallelism()) }
func (c *opContext) AttemptNumber() int          { return int(c.t.attempt.GetAttempt()) }
func (c *opContext) Logger() *slog.Logger        { return c.t.log }
func (c *opContext) RestoredCheckpointID() int64 { return c.t.restoredID }

func (c *opContext) ReportPending(p sdk.Pending) {
	if p.Known {
		c.t.splits.Store(int32(p.Splits))
		c.t.pendingRecords.Store(max(p.Records, 0))
	}
}
func (c *opContext) Config() sdk.Config {
	return sdk.Config(c.t.desc.GetConfig().AsMap())
}
func (c *opContext) ValueState(name string) sdk.ValueState { return c.t.backend.ValueState(name) }
func (c *opContext) ListState(name string) sdk.ListState   { return c.t.backend.ListState(name, false) }
func (c *opContext) UnionListState(name string) sdk.ListState {
	return c.t.backend.ListState(name, true)
}
func (c *opContext) MapState(name string) sdk.MapState { return c.t.backend.MapState(name) }
func (c *opContext) ValueStateTTL(name string, ttl sdk.StateTTL) sdk.ValueState {
	return c.t.backend.ValueStateTTL(name, ttl)
}
func (c *opContext) MigrateState(name string, isMap bool, f func([]byte) ([]byte, error)) error {
	return c.t.backend.MigrateState(name, isMap, f)
}
func (c *opContext) MapStateTTL(name string, ttl sdk.StateTTL) sdk.MapState {
	return c.t.backend.MapStateTTL(name, ttl)
}
func (c *opContext) TimerService() sdk.TimerService { return timerService{c.t} }
func (c *opContext) Output(name string) sdk.Collector {
	if sc, ok := c.t.side[name]; ok {
		return sc
	}
	return discard{}
}
func (c *opContext) EmitLate(r sdk.Record) {
	if sc, ok := c.t.side[sdk.LateOutput]; ok {
		sc.Collect(r)
		return
	}
	c.t.metrics.lateDropped.Inc()
	c.t.et.view.lateDropped.Add(1)
}
func (c *opContext) Metrics() sdk.MetricGroup { return c.t.metrics.ops }
func (c *opContext) ReducingState(name string, reduce func(acc, v []byte) []byte) sdk.ReducingState {
	return c.t.backend.ReducingState(name, reduce)
}

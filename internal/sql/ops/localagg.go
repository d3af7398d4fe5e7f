package ops

import (
	"errors"
	"fmt"
	"slices"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/window"
	"github.com/weirproject/weir/sdk"
)

// LocalAggregate is the operator sql-local-aggregate (a plan's LocalAgg):
// the first phase of a two-phase window aggregate. Chained after the calc
// that reads its rows, it folds them per group and pane in memory and
// sends on one partial accumulator per group and pane once the watermark
// passes the pane's end — before the watermark itself, so the global
// phase (sql-window-aggregate with Partial) has it when its windows fire.
// A global aggregate (no GROUP BY key) otherwise sends every row of the
// stream to one subtask; this way each subtask sends one record per pane.
//
// It keeps no state: before a checkpoint's barrier it sends every partial
// it holds (Flink's local aggregate does the same), which the global
// phase merges with the pane's later ones. So a checkpoint has them all in
// the global phase's state, and a restore, at any parallelism, starts
// with nothing pending.
type LocalAggregate struct {
	agg    *aggregator
	spec   window.Spec
	timers sdk.TimerService
	// pending is the partials not sent yet, by pane start and group key.
	pending map[int64]map[string][]byte
}

func (l *LocalAggregate) Open(ctx sdk.Context) error {
	op, err := loadPlan(ctx, "sql-local-aggregate")
	if err != nil {
		return err
	}
	p := op.LocalAgg
	if p == nil {
		return errors.New("sql-local-aggregate: the plan is not a local aggregate's")
	}
	if p.Window.Kind == plan.Session || p.Window.ProcessingTime {
		return errors.New("sql-local-aggregate: only event-time tumbling and hopping windows are aggregated in two phases")
	}
	if l.spec, err = windowSpec(p.Window); err != nil {
		return fmt.Errorf("sql-local-aggregate: %w", err)
	}
	// The aggregator's output side is the global phase's: this one only
	// folds.
	q := *p
	q.Output, q.Out, q.Enc = nil, nil, plan.Encoding{Format: plan.FormatRow}
	if l.agg, err = newAggregator(&q); err != nil {
		return fmt.Errorf("sql-local-aggregate: %w", err)
	}
	l.timers = ctx.TimerService()
	l.pending = map[int64]map[string][]byte{}
	return nil
}

func (l *LocalAggregate) put(pane int64, key string, acc []byte) {
	m := l.pending[pane]
	if m == nil {
		m = map[string][]byte{}
		l.pending[pane] = m
	}
	m[key] = append(m[key][:0], acc...)
}

func (l *LocalAggregate) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	p := l.spec.PaneStart(r.Timestamp)
	end := p + l.spec.Pane() - 1
	if wm := l.timers.CurrentWatermark(); wm != sdk.MinWatermark && end <= wm {
		// The pane was sent: this row goes on alone, and the global
		// phase judges whether it is late.
		acc, err := l.agg.Add(nil, r)
		if err != nil {
			return fmt.Errorf("sql-local-aggregate: %w", err)
		}
		out.Collect(sdk.Record{Key: r.Key, Value: slices.Clone(acc), Timestamp: r.Timestamp})
		return nil
	}
	m := l.pending[p]
	acc, err := l.agg.Add(m[string(r.Key)], r)
	if err != nil {
		return fmt.Errorf("sql-local-aggregate: %w", err)
	}
	l.put(p, string(r.Key), acc)
	return nil
}

// OnWatermark sends the partials of the panes the watermark completed.
func (l *LocalAggregate) OnWatermark(wm int64, out sdk.Collector) error {
	l.flush(out, func(p int64) bool { return p+l.spec.Pane()-1 <= wm })
	return nil
}

// PrepareSnapshotPreBarrier sends every partial before the barrier: the
// global phase, whose watermark is behind this one's, takes them on time.
func (l *LocalAggregate) PrepareSnapshotPreBarrier(_ int64, out sdk.Collector) error {
	l.flush(out, func(int64) bool { return true })
	return nil
}

// flush sends the partials of the panes done says, in pane and key order.
func (l *LocalAggregate) flush(out sdk.Collector, done func(pane int64) bool) {
	var panes []int64
	for p := range l.pending {
		if done(p) {
			panes = append(panes, p)
		}
	}
	slices.Sort(panes)
	for _, p := range panes {
		m := l.pending[p]
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			out.Collect(sdk.Record{Key: []byte(k), Value: m[k], Timestamp: p + l.spec.Pane() - 1})
		}
		delete(l.pending, p)
	}
}

func (l *LocalAggregate) Close() error { return nil }

package task

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir/internal/exchange"
	"github.com/weirproject/weir/internal/timer"
	"github.com/weirproject/weir/internal/watermark"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// eventTime is a subtask's notion of time: the watermark generator of a
// source, the valve that combines an operator's input watermarks, and the
// timer service. Owned by the mailbox goroutine.
type eventTime struct {
	// gen generates a watermarked source's watermarks; nil otherwise.
	gen *watermark.Generator
	// valve combines the input channels' watermarks; nil for a source.
	valve *watermark.Valve
	// input is the watermark operators see (CurrentWatermark); output is
	// the last one sent downstream.
	input, output int64
	// outIdle is the status last sent downstream.
	outIdle bool
	timers  *timer.Service
	// curKey is the key keyed state and timers are scoped to.
	curKey []byte
	// published is when a source last published its splits.
	published time.Time
	view      watermarkView
}

// watermarkView is the subtask's event time as the heartbeat reads it:
// the mailbox goroutine publishes a new message whenever it changes (a
// published one is never modified), the counters are live.
type watermarkView struct {
	mu          sync.Mutex
	info        *weirv1.SubtaskWatermarks
	timers      atomic.Int64
	lateDropped atomic.Int64
}

// Watermarks reports the subtask's event time; nil before its first
// watermark. Safe to call from any goroutine.
func (t *Task) Watermarks() *weirv1.SubtaskWatermarks {
	v := &t.et.view
	v.mu.Lock()
	info := v.info
	v.mu.Unlock()
	if info == nil {
		return nil
	}
	return &weirv1.SubtaskWatermarks{
		InputMs: info.InputMs, OutputMs: info.OutputMs, Idle: info.Idle,
		Channels: info.Channels, Holding: info.Holding, Splits: info.Splits,
		Timers: v.timers.Load(), LateRecordsDropped: v.lateDropped.Load(),
	}
}

// sourcePublishInterval bounds how often a source publishes its splits'
// watermarks, which move with every record.
const sourcePublishInterval = 100 * time.Millisecond

// publishWatermarks builds the heartbeat's view of the subtask's event
// time.
func (t *Task) publishWatermarks() {
	info := &weirv1.SubtaskWatermarks{InputMs: t.et.input, OutputMs: t.et.output, Idle: t.et.outIdle}
	if v := t.et.valve; v != nil {
		ex := v.Explain()
		ins := t.desc.GetInputs()
		for ch, c := range ex.Channels {
			gate := ins[t.gate[ch]]
			info.Channels = append(info.Channels, &weirv1.ChannelWatermark{
				UpstreamVertex:  gate.GetSourceVertex(),
				UpstreamSubtask: gate.GetChannels()[t.gateIndex[ch]].GetPartition().GetProducer().GetSubtaskIndex(),
				WatermarkMs:     c.Watermark, Idle: c.Idle, Finished: c.Finished, Aligned: c.Aligned,
			})
		}
		for _, h := range ex.Holding {
			info.Holding = append(info.Holding, int32(h))
		}
	}
	if g := t.et.gen; g != nil {
		ex := g.Explain()
		info.InputMs = ex.Watermark
		for _, sp := range ex.Splits {
			info.Splits = append(info.Splits, &weirv1.SplitWatermark{Id: sp.ID, WatermarkMs: sp.Watermark, MaxTimestampMs: sp.MaxTimestamp, Idle: sp.Idle})
		}
	}
	v := &t.et.view
	v.mu.Lock()
	v.info = info
	v.mu.Unlock()
}

func (t *Task) setupEventTime() {
	t.et.input, t.et.output = sdk.MinWatermark, sdk.MinWatermark
	t.et.timers = timer.New(t.backend)
	if t.src != nil {
		if w := t.desc.GetWatermarks(); w != nil {
			t.et.gen = watermark.NewGenerator(watermark.Strategy{
				MaxOutOfOrderness: w.GetMaxOutOfOrderness().AsDuration(),
				IdleTimeout:       w.GetIdleTimeout().AsDuration(),
				Interval:          w.GetInterval().AsDuration(),
			}, t.now())
		}
		return
	}
	t.et.valve = watermark.NewValve(len(t.inputs))
}

// restoreTimers rebuilds the timer queues from the restored keyed state.
func (t *Task) restoreTimers() error {
	if err := t.et.timers.Restore(); err != nil {
		return fmt.Errorf("task: restore timers: %w", err)
	}
	t.timersChanged()
	return nil
}

// pollWatermarks emits what the source's watermark generator has due.
func (t *Task) pollWatermarks(now time.Time) error {
	if t.et.gen == nil {
		return nil
	}
	o := t.et.gen.Poll(now)
	if err := t.emitGenerated(o); err != nil {
		return err
	}
	if o.Advanced || o.StatusChanged || now.Sub(t.et.published) >= sourcePublishInterval {
		t.et.published = now
		t.publishWatermarks()
	}
	return nil
}

func (t *Task) emitGenerated(o watermark.Output) error {
	return t.applyOutput(o, t.emitWatermark)
}

// onValve carries out what an input event did to the combined watermark:
// the timers it made due fire, the operator observes it, and it goes
// downstream, in that order (Flink's output watermark follows the input
// after the timers fired).
func (t *Task) onValve(o watermark.Output) error {
	defer t.publishWatermarks()
	return t.applyOutput(o, t.advanceWatermark)
}

// applyOutput sends a watermark change downstream with advance: a status
// that turns active before the watermark, one that turns idle after it.
func (t *Task) applyOutput(o watermark.Output, advance func(int64) error) error {
	if o.StatusChanged && !o.Idle {
		if err := t.emitStatus(false); err != nil {
			return err
		}
	}
	if o.Advanced {
		if err := advance(o.Watermark); err != nil {
			return err
		}
	}
	if o.StatusChanged && o.Idle {
		return t.emitStatus(true)
	}
	return nil
}

func (t *Task) advanceWatermark(wm int64) error {
	if wm <= t.et.input {
		return nil
	}
	t.et.input = wm
	t.metrics.setInputWatermark(wm)
	if err := t.fireTimers(sdk.EventTime, wm); err != nil {
		return err
	}
	if o, ok := t.op.(sdk.WatermarkObserver); ok {
		t.out.count = 0
		if err := o.OnWatermark(wm, t.out); err != nil {
			return fmt.Errorf("task: %s: on watermark: %w", t.desc.GetOperator(), err)
		}
		if t.out.err != nil {
			return t.out.err
		}
		t.metrics.recordsOut.Add(float64(t.out.count))
	}
	return t.emitWatermark(wm)
}

// fireTimers fires the timers of domain d due at upTo, in timestamp order,
// each with keyed state scoped to its key.
func (t *Task) fireTimers(d sdk.TimeDomain, upTo int64) error {
	// A timer OnTimer registers that is already due fires in this loop.
	h, _ := t.op.(sdk.TimerHandler)
	fired := 0
	t.out.count = 0
	for {
		tm, ok := t.et.timers.Pop(timer.Domain(d), upTo)
		if !ok {
			break
		}
		fired++
		t.et.curKey = tm.Key
		if h == nil {
			continue
		}
		err := h.OnTimer(sdk.Timer{Domain: d, Timestamp: tm.Timestamp, Key: tm.Key, Namespace: tm.Namespace}, t.out)
		if err != nil {
			return fmt.Errorf("task: %s: on %s timer: %w", t.desc.GetOperator(), d, err)
		}
		if t.out.err != nil {
			return t.out.err
		}
	}
	if fired > 0 {
		t.metrics.recordsOut.Add(float64(t.out.count))
		t.timersChanged()
	}
	return nil
}

// fireProcessingTimers fires the processing-time timers the clock passed.
func (t *Task) fireProcessingTimers(now time.Time) error {
	if next, ok := t.et.timers.Next(timer.ProcessingTime); !ok || next > now.UnixMilli() {
		return nil
	}
	return t.fireTimers(sdk.ProcessingTime, now.UnixMilli())
}

// nextTimeEvent is when the loop must wake for time alone: the next
// processing-time timer, or the source's next watermark due.
func (t *Task) nextTimeEvent(now time.Time) (time.Duration, bool) {
	var at time.Time
	if next, ok := t.et.timers.Next(timer.ProcessingTime); ok {
		at = time.UnixMilli(next)
	}
	// Asked now, not at the step's start: the step's writes may have
	// filed the first entries.
	if next := t.backend.NextExpiry(); next > 0 && (at.IsZero() || next < at.UnixMilli()) {
		at = time.UnixMilli(next)
	}
	if t.et.gen != nil && !t.endOfInput {
		if g, ok := t.et.gen.NextPoll(now); ok && (at.IsZero() || g.Before(at)) {
			at = g
		}
	}
	if at.IsZero() {
		return 0, false
	}
	return max(at.Sub(now), time.Millisecond), true
}

// endEventTime runs when the subtask's input ended: event time reaches its
// end, so every event-time timer fires, and so does every processing-time
// timer (a window on processing time must not lose its last records
// because the clock did not reach its end before the job finished).
func (t *Task) endEventTime() error {
	if t.et.valve != nil && t.et.input != sdk.MaxWatermark {
		if err := t.advanceWatermark(sdk.MaxWatermark); err != nil {
			return err
		}
	}
	return t.fireTimers(sdk.ProcessingTime, sdk.MaxWatermark)
}

// emitWatermark sends wm downstream on every output, main and side.
func (t *Task) emitWatermark(wm int64) error {
	if wm <= t.et.output {
		return nil
	}
	t.et.output = wm
	t.metrics.setOutputWatermark(wm)
	return t.broadcast(exchange.Buffer{Kind: exchange.KindWatermark, Watermark: wm})
}

func (t *Task) emitStatus(idle bool) error {
	if idle == t.et.outIdle {
		return nil
	}
	t.et.outIdle = idle
	return t.broadcast(exchange.Buffer{Kind: exchange.KindWatermarkStatus, Idle: idle})
}

// sourceOutput is the Collector a source emits through: it feeds the
// watermark generator with each record's split and timestamp.
type sourceOutput struct {
	t   *Task
	now time.Time
}

func (s *sourceOutput) Collect(r sdk.Record) {
	if g := s.t.et.gen; g != nil {
		g.OnRecord("", r.Timestamp, s.now)
	}
	s.t.out.Collect(r)
}

func (s *sourceOutput) Split(id string) sdk.Collector {
	if g := s.t.et.gen; g != nil {
		g.AddSplit(id, s.now)
	}
	return &splitOutput{s: s, id: id}
}

func (s *sourceOutput) ReleaseSplit(id string) {
	if g := s.t.et.gen; g != nil {
		g.RemoveSplit(id, s.now)
	}
}

type splitOutput struct {
	s  *sourceOutput
	id string
}

func (o *splitOutput) Collect(r sdk.Record) {
	if g := o.s.t.et.gen; g != nil {
		g.OnRecord(o.id, r.Timestamp, o.s.now)
	}
	o.s.t.out.Collect(r)
}

// timerService is the sdk.TimerService of a subtask: timers of the
// current key.
type timerService struct{ t *Task }

func (s timerService) CurrentWatermark() int64      { return s.t.et.input }
func (s timerService) CurrentProcessingTime() int64 { return s.t.now().UnixMilli() }

func (s timerService) RegisterEventTimeTimer(ns []byte, ts int64) {
	s.register(timer.EventTime, ns, ts)
}

func (s timerService) RegisterProcessingTimeTimer(ns []byte, ts int64) {
	s.register(timer.ProcessingTime, ns, ts)
}

func (s timerService) DeleteEventTimeTimer(ns []byte, ts int64) {
	if s.t.et.timers.Delete(timer.EventTime, s.t.et.curKey, ns, ts) {
		s.t.timersChanged()
	}
}

func (s timerService) DeleteProcessingTimeTimer(ns []byte, ts int64) {
	if s.t.et.timers.Delete(timer.ProcessingTime, s.t.et.curKey, ns, ts) {
		s.t.timersChanged()
	}
}

func (s timerService) register(d timer.Domain, ns []byte, ts int64) {
	if s.t.et.timers.Register(d, s.t.et.curKey, ns, ts) {
		s.t.timersChanged()
	}
}

func (t *Task) timersChanged() {
	n := t.et.timers.Len()
	t.metrics.setTimers(n)
	t.et.view.timers.Store(int64(n))
}

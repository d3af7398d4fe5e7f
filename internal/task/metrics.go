package task

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// Metrics are the TaskManager's per-subtask metrics, named after Flink's
// task checkpoint metrics in Prometheus style.
type Metrics struct {
	recordsIn     *prometheus.CounterVec
	recordsOut    *prometheus.CounterVec
	backpressured *prometheus.CounterVec
	alignment     *prometheus.HistogramVec
	startDelay    *prometheus.HistogramVec
	syncDuration  *prometheus.GaugeVec
	asyncDuration *prometheus.GaugeVec
	processed     *prometheus.GaugeVec
	persisted     *prometheus.GaugeVec
	unaligned     *prometheus.CounterVec
	inputWM       *prometheus.GaugeVec
	outputWM      *prometheus.GaugeVec
	lateDropped   *prometheus.CounterVec
	timers        *prometheus.GaugeVec
	load          *loadCollector
	ops           *operatorMetrics
}

// NewMetrics registers the subtask metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := subtaskLabels
	buckets := prometheus.ExponentialBuckets(0.0005, 2, 16)
	m := &Metrics{
		recordsIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_task_records_in_total", Help: "Records a subtask received.",
		}, labels),
		recordsOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_task_records_out_total", Help: "Records a subtask emitted.",
		}, labels),
		backpressured: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_task_backpressured_seconds_total", Help: "Time a subtask was back-pressured: its output queues were full, so it took no new input, or a write blocked.",
		}, labels),
		alignment: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "weir_task_checkpoint_alignment_duration_seconds", Help: "Time from the first to the last barrier of a checkpoint at a subtask (an unaligned checkpoint snapshots at the first).", Buckets: buckets,
		}, labels),
		startDelay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "weir_task_checkpoint_start_delay_seconds", Help: "Time from checkpoint trigger to the first barrier reaching a subtask.", Buckets: buckets,
		}, labels),
		syncDuration: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_task_checkpoint_sync_duration_seconds", Help: "Synchronous part of the subtask's last checkpoint.",
		}, labels),
		asyncDuration: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_task_checkpoint_async_duration_seconds", Help: "Asynchronous part of the subtask's last checkpoint.",
		}, labels),
		processed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_task_alignment_buffered_bytes", Help: "Bytes the subtask processed between the first and the last barrier of its last checkpoint (blocked channels hold theirs back in the bounded exchange queues, so nothing is buffered).",
		}, labels),
		persisted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_task_checkpoint_persisted_bytes", Help: "In-flight records the subtask's last checkpoint persisted as channel state (unaligned checkpoints only).",
		}, labels),
		unaligned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_task_checkpoints_unaligned_total", Help: "Checkpoints the subtask took unaligned, from the first barrier or after the aligned checkpoint timeout.",
		}, labels),
		inputWM: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_task_input_watermark_seconds", Help: "A subtask's input watermark (event time, Unix seconds): the minimum over its active input channels; +Inf once its input ended. Absent until the first watermark.",
		}, labels),
		outputWM: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_task_output_watermark_seconds", Help: "The watermark a subtask last sent downstream (event time, Unix seconds); +Inf once its input ended. Absent until the first watermark.",
		}, labels),
		lateDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_task_late_records_dropped_total", Help: "Records dropped because they arrived behind the watermark by more than the operator's allowed lateness, with no downstream vertex reading the late side output.",
		}, labels),
		timers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_task_timers", Help: "Timers registered and not yet fired (event time and processing time).",
		}, labels),
		load: newLoadCollector(labels),
		ops:  newOperatorMetrics(),
	}
	reg.MustRegister(m.recordsIn, m.recordsOut, m.backpressured, m.alignment, m.startDelay, m.syncDuration, m.asyncDuration, m.processed, m.persisted, m.unaligned,
		m.inputWM, m.outputWM, m.lateDropped, m.timers, m.load, m.ops)
	return m
}

// subtaskLabels label every subtask's series.
var subtaskLabels = []string{"job_id", "task_name", "subtask_index"}

// subtaskMetrics are one subtask's children, looked up once.
type subtaskMetrics struct {
	recordsIn, recordsOut, backpressured prometheus.Counter
	alignment, startDelay                prometheus.Observer
	syncDuration, asyncDuration          prometheus.Gauge
	processed, persisted                 prometheus.Gauge
	unaligned                            prometheus.Counter
	lateDropped                          prometheus.Counter
	timers                               prometheus.Gauge
	// inputWM and outputWM are created at the first watermark, so a
	// subtask without event time has none.
	inputWM, outputWM func() prometheus.Gauge
	// load splits the subtask's time into idle, back-pressured and busy.
	load *loadClock
	// ops are the operator's own metrics.
	ops     *subtaskGroup
	release func()
}

func (m *Metrics) forSubtask(a *weirv1.ExecutionAttemptID) *subtaskMetrics {
	lv := []string{a.GetJobId(), a.GetVertex(), strconv.Itoa(int(a.GetSubtaskIndex()))}
	load := &loadClock{}
	m.load.add(lv, load)
	ops := m.ops.forSubtask(subtaskLabels, lv)
	return &subtaskMetrics{
		recordsIn:     m.recordsIn.WithLabelValues(lv...),
		recordsOut:    m.recordsOut.WithLabelValues(lv...),
		backpressured: m.backpressured.WithLabelValues(lv...),
		alignment:     m.alignment.WithLabelValues(lv...),
		startDelay:    m.startDelay.WithLabelValues(lv...),
		syncDuration:  m.syncDuration.WithLabelValues(lv...),
		asyncDuration: m.asyncDuration.WithLabelValues(lv...),
		processed:     m.processed.WithLabelValues(lv...),
		persisted:     m.persisted.WithLabelValues(lv...),
		unaligned:     m.unaligned.WithLabelValues(lv...),
		lateDropped:   m.lateDropped.WithLabelValues(lv...),
		timers:        m.timers.WithLabelValues(lv...),
		inputWM:       sync.OnceValue(func() prometheus.Gauge { return m.inputWM.WithLabelValues(lv...) }),
		outputWM:      sync.OnceValue(func() prometheus.Gauge { return m.outputWM.WithLabelValues(lv...) }),
		load:          load,
		ops:           ops,
		release: func() {
			m.load.remove(lv, load)
			ops.release()
			for _, v := range []interface{ DeleteLabelValues(...string) bool }{
				m.recordsIn, m.recordsOut, m.backpressured, m.alignment, m.startDelay, m.syncDuration, m.asyncDuration, m.processed, m.persisted, m.unaligned,
				m.inputWM, m.outputWM, m.lateDropped, m.timers,
			} {
				v.DeleteLabelValues(lv...)
			}
		},
	}
}

// Load is what a subtask did since it started processing: its time split
// the way Flink's task metrics split it, and its record counts.
type Load struct {
	// Idle is the time the mailbox loop waited with nothing to do: no
	// input, no mail, no due timer (Flink's idle time). Back-pressured is the
	// time its output had no room (Flink's soft and hard back-pressure).
	// Busy is the rest: processing, snapshots, mail.
	Idle, Backpressured, Busy time.Duration
	RecordsIn, RecordsOut     int64
}

// Load measures the subtask at now (on the clock of Config.Now); ok is
// false until the subtask started processing. Safe to call from any
// goroutine.
func (t *Task) Load(now time.Time) (l Load, ok bool) {
	l.Idle, l.Backpressured, l.Busy, ok = t.metrics.load.sample(now)
	l.RecordsIn, l.RecordsOut = counterValue(t.metrics.recordsIn), counterValue(t.metrics.recordsOut)
	return l, ok
}

// Backlog is what the subtask's source said last about processing a
// backlog (sdk.BacklogUnknown for other subtasks and sources that never
// tell). Safe to call from any goroutine.
func (t *Task) Backlog() sdk.Backlog { return sdk.Backlog(t.backlog.Load()) }

// Pending is what the subtask's source said last it has left to read;
// Known is false for other subtasks and sources that never tell. Safe to
// call from any goroutine.
func (t *Task) Pending() sdk.Pending {
	n := t.pendingRecords.Load()
	if n < 0 {
		return sdk.Pending{}
	}
	return sdk.Pending{Known: true, Records: n, Splits: int(t.splits.Load())}
}

// Attempt is the attempt the subtask runs.
func (t *Task) Attempt() *weirv1.ExecutionAttemptID { return t.attempt }

// counterValue reads a counter. The record counters are the ones the
// processing loop updates anyway, so reading them back costs the hot path
// nothing.
func counterValue(c prometheus.Counter) int64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return int64(m.GetCounter().GetValue())
}

// loadState is what the mailbox loop is doing, as far as the time split goes.
type loadState int

const (
	loadBusy loadState = iota
	loadIdle
	loadBackpressured
)

// loadClock splits a subtask's wall-clock time into idle, back-pressured
// and busy. The mailbox loop opens a period when it starts waiting (enter)
// and closes it when it resumes (leave); busy is whatever is not in a
// period. Readers include the open period, so a subtask idle for an hour
// reads idle now rather than when its wait ends. Every reading is at
// least the previous one, so counters built on it never go back when a
// reader's clock and the loop's disagree by a few microseconds or blocked
// writes are added after the fact.
type loadClock struct {
	mu       sync.Mutex
	start    time.Time
	idle, bp time.Duration // closed periods
	open     loadState
	since    time.Time
	lastIdle time.Duration
	lastBP   time.Duration
	lastBusy time.Duration
}

// begin starts the clock when the subtask starts processing.
func (c *loadClock) begin(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.start = now
}

// enter opens an idle or back-pressured period at now, closing an open one.
func (c *loadClock) enter(s loadState, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked(now)
	c.open, c.since = s, now
}

// leave closes the open period at now and returns how long it lasted.
func (c *loadClock) leave(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeLocked(now)
}

func (c *loadClock) closeLocked(now time.Time) time.Duration {
	if c.open == loadBusy {
		return 0
	}
	d := max(0, now.Sub(c.since))
	if c.open == loadIdle {
		c.idle += d
	} else {
		c.bp += d
	}
	c.open = loadBusy
	return d
}

// addBackpressured adds time a write blocked at a full queue, measured by
// the writer inside a busy stretch.
func (c *loadClock) addBackpressured(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bp += d
}

// sample reads the split at now; ok is false before begin.
func (c *loadClock) sample(now time.Time) (idle, bp, busy time.Duration, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.start.IsZero() {
		return 0, 0, 0, false
	}
	idle, bp = c.idle, c.bp
	if c.open != loadBusy {
		d := max(0, now.Sub(c.since))
		if c.open == loadIdle {
			idle += d
		} else {
			bp += d
		}
	}
	busy = now.Sub(c.start) - idle - bp
	idle, bp, busy = max(idle, c.lastIdle), max(bp, c.lastBP), max(busy, c.lastBusy)
	c.lastIdle, c.lastBP, c.lastBusy = idle, bp, busy
	return idle, bp, busy, true
}

// loadCollector exports every running subtask's idle and busy time as
// counters computed at scrape time, so an open period (a sink waiting for
// input for minutes) shows while it lasts.
type loadCollector struct {
	idle, busy *prometheus.Desc
	mu         sync.Mutex
	clocks     map[string]loadEntry // by joined label values
}

type loadEntry struct {
	lv    []string
	clock *loadClock
}

func newLoadCollector(labels []string) *loadCollector {
	return &loadCollector{
		idle: prometheus.NewDesc("weir_task_idle_seconds_total",
			"Time a subtask waited for input with nothing to do (Flink's idleTimeMsPerSecond is its rate).", labels, nil),
		busy: prometheus.NewDesc("weir_task_busy_seconds_total",
			"Time a subtask was neither idle nor back-pressured: processing records, taking snapshots, handling mail (Flink's busyTimeMsPerSecond is its rate).", labels, nil),
		clocks: map[string]loadEntry{},
	}
}

// add registers a subtask's clock; a newer attempt with the same labels
// (a redeployment on this TaskManager) replaces an older one.
func (c *loadCollector) add(lv []string, clock *loadClock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clocks[strings.Join(lv, "\x00")] = loadEntry{lv: lv, clock: clock}
}

// remove unregisters clock, unless a newer attempt replaced it already.
func (c *loadCollector) remove(lv []string, clock *loadClock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := strings.Join(lv, "\x00")
	if e, ok := c.clocks[k]; ok && e.clock == clock {
		delete(c.clocks, k)
	}
}

func (c *loadCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.idle
	ch <- c.busy
}

func (c *loadCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	entries := make([]loadEntry, 0, len(c.clocks))
	for _, e := range c.clocks {
		entries = append(entries, e)
	}
	c.mu.Unlock()
	now := time.Now()
	for _, e := range entries {
		idle, _, busy, ok := e.clock.sample(now)
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.idle, prometheus.CounterValue, idle.Seconds(), e.lv...)
		ch <- prometheus.MustNewConstMetric(c.busy, prometheus.CounterValue, busy.Seconds(), e.lv...)
	}
}

func (m *subtaskMetrics) setInputWatermark(wm int64)  { m.inputWM().Set(watermarkSeconds(wm)) }
func (m *subtaskMetrics) setOutputWatermark(wm int64) { m.outputWM().Set(watermarkSeconds(wm)) }
func (m *subtaskMetrics) setTimers(n int)             { m.timers.Set(float64(n)) }

// watermarkSeconds is a watermark as a Unix time in seconds; the end of
// event time is +Inf.
func watermarkSeconds(wm int64) float64 {
	if wm == math.MaxInt64 {
		return math.Inf(1)
	}
	return float64(wm) / 1000
}

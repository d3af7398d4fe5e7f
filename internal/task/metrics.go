package task

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
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
}

// NewMetrics registers the subtask metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"job_id", "task_name", "subtask_index"}
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
	}
	reg.MustRegister(m.recordsIn, m.recordsOut, m.backpressured, m.alignment, m.startDelay, m.syncDuration, m.asyncDuration, m.processed, m.persisted, m.unaligned)
	return m
}

// subtaskMetrics are one subtask's children, looked up once.
type subtaskMetrics struct {
	recordsIn, recordsOut, backpressured prometheus.Counter
	alignment, startDelay                prometheus.Observer
	syncDuration, asyncDuration          prometheus.Gauge
	processed, persisted                 prometheus.Gauge
	unaligned                            prometheus.Counter
	release                              func()
}

func (m *Metrics) forSubtask(a *weirv1.ExecutionAttemptID) *subtaskMetrics {
	lv := []string{a.GetJobId(), a.GetVertex(), strconv.Itoa(int(a.GetSubtaskIndex()))}
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
		release: func() {
			for _, v := range []interface{ DeleteLabelValues(...string) bool }{
				m.recordsIn, m.recordsOut, m.backpressured, m.alignment, m.startDelay, m.syncDuration, m.asyncDuration, m.processed, m.persisted, m.unaligned,
			} {
				v.DeleteLabelValues(lv...)
			}
		},
	}
}

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
	buffered      *prometheus.GaugeVec
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
			Name: "weir_task_backpressured_seconds_total", Help: "Time a subtask was blocked writing to full output queues.",
		}, labels),
		alignment: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "weir_task_checkpoint_alignment_duration_seconds", Help: "Time from the first to the last barrier of a checkpoint at a subtask.", Buckets: buckets,
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
		buffered: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_task_alignment_buffered_bytes", Help: "Bytes held back in blocked channels during the subtask's last alignment.",
		}, labels),
	}
	reg.MustRegister(m.recordsIn, m.recordsOut, m.backpressured, m.alignment, m.startDelay, m.syncDuration, m.asyncDuration, m.buffered)
	return m
}

// subtaskMetrics are one subtask's children, looked up once.
type subtaskMetrics struct {
	recordsIn, recordsOut, backpressured prometheus.Counter
	alignment, startDelay                prometheus.Observer
	syncDuration, asyncDuration          prometheus.Gauge
	buffered                             prometheus.Gauge
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
		buffered:      m.buffered.WithLabelValues(lv...),
		release: func() {
			for _, v := range []interface{ DeleteLabelValues(...string) bool }{
				m.recordsIn, m.recordsOut, m.backpressured, m.alignment, m.startDelay, m.syncDuration, m.asyncDuration, m.buffered,
			} {
				v.DeleteLabelValues(lv...)
			}
		},
	}
}

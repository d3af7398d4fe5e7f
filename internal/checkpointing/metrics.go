package checkpointing

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the JobManager's per-job checkpoint metrics, Flink's
// checkpointing metrics under Prometheus naming.
type Metrics struct {
	triggered, completed *prometheus.CounterVec
	failed               *prometheus.CounterVec
	inProgress           *prometheus.GaugeVec
	duration             *prometheus.HistogramVec
	lastDuration         *prometheus.GaugeVec
	lastSize             *prometheus.GaugeVec
	lastFullSize         *prometheus.GaugeVec
	lastID               *prometheus.GaugeVec
	restoredAt           *prometheus.GaugeVec
}

// NewMetrics registers the checkpoint metrics on reg; a nil reg keeps them
// unregistered (for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	l := []string{"job_id", "job_name"}
	m := &Metrics{
		triggered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_job_checkpoints_triggered_total", Help: "Checkpoints triggered."}, l),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_job_checkpoints_completed_total", Help: "Checkpoints completed."}, l),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_job_checkpoints_failed_total", Help: "Checkpoints failed, by reason.",
		}, append(l, "reason")),
		inProgress: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "weir_job_checkpoints_in_progress", Help: "Checkpoints in progress."}, l),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "weir_job_checkpoint_duration_seconds", Help: "End-to-end duration of completed checkpoints.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, l),
		lastDuration: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "weir_job_last_checkpoint_duration_seconds", Help: "End-to-end duration of the last completed checkpoint."}, l),
		lastSize:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "weir_job_last_checkpoint_size_bytes", Help: "Checkpointed size of the last completed checkpoint."}, l),
		lastFullSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "weir_job_last_checkpoint_full_size_bytes", Help: "Full state size of the last completed checkpoint."}, l),
		lastID:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "weir_job_last_completed_checkpoint_id", Help: "ID of the last completed checkpoint."}, l),
		restoredAt: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_job_last_checkpoint_restore_timestamp_seconds", Help: "When the job last restored from a checkpoint (Unix time).",
		}, l),
	}
	if reg != nil {
		reg.MustRegister(m.triggered, m.completed, m.failed, m.inProgress, m.duration, m.lastDuration, m.lastSize, m.lastFullSize, m.lastID, m.restoredAt)
	}
	return m
}

type jobMetrics struct {
	triggered, completed                             prometheus.Counter
	failed                                           *prometheus.CounterVec
	inProgress, lastDuration, lastSize, lastFullSize prometheus.Gauge
	lastID, restoredAt                               prometheus.Gauge
	duration                                         prometheus.Observer
	release                                          func()
}

func (m *Metrics) forJob(id, name string) *jobMetrics {
	lv := prometheus.Labels{"job_id": id, "job_name": name}
	return &jobMetrics{
		triggered:    m.triggered.With(lv),
		completed:    m.completed.With(lv),
		failed:       m.failed.MustCurryWith(lv),
		inProgress:   m.inProgress.With(lv),
		duration:     m.duration.With(lv),
		lastDuration: m.lastDuration.With(lv),
		lastSize:     m.lastSize.With(lv),
		lastFullSize: m.lastFullSize.With(lv),
		lastID:       m.lastID.With(lv),
		restoredAt:   m.restoredAt.With(lv),
		// Counters and the last checkpoint's gauges stay for the finished
		// job's history; nothing is in progress any more.
		release: func() { m.inProgress.Delete(lv) },
	}
}

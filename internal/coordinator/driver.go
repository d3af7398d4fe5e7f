package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// IO is everything the coordinator needs done outside its state machine.
// The JobManager implements it over gRPC, etcd and checkpoint storage.
type IO interface {
	NextCheckpointID(ctx context.Context) (int64, error)
	InitLocation(ctx context.Context, id int64, savepoint bool, target string) (string, error)
	TriggerCheckpoint(ctx context.Context, task *weirv1.ExecutionAttemptID, id int64, ts time.Time, opts *weirv1.CheckpointOptions) error
	NotifyCheckpointComplete(ctx context.Context, task *weirv1.ExecutionAttemptID, id, lastSubsumed int64) error
	NotifyCheckpointAborted(ctx context.Context, task *weirv1.ExecutionAttemptID, id int64) error
	// Finalize writes the metadata, adds the checkpoint to the completed
	// store and discards what the store subsumed; it returns the metadata
	// path and the newest subsumed checkpoint (0 if none).
	Finalize(ctx context.Context, f Finalize) (path string, subsumed int64, err error)
	Discard(ctx context.Context, d DiscardState) error
	FailJob(cause error)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Result is the outcome of a manual trigger.
type Result struct {
	ID   int64
	Path string
	Err  error
}

// Driver runs a Coordinator on one goroutine, carries out its effects and
// feeds their outcomes back as events.
type Driver struct {
	sm      *Coordinator
	io      IO
	log     *slog.Logger
	metrics *jobMetrics
	events  chan func()
	done    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	waiters map[int64]chan Result // owned by the loop
}

// NewDriver makes a driver; Run starts it.
func NewDriver(cfg Config, jobName string, io IO, m *Metrics, log *slog.Logger) *Driver {
	ctx, cancel := context.WithCancel(context.Background())
	return &Driver{
		sm:      New(cfg, realClock{}, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))),
		io:      io,
		log:     log.With("job_id", cfg.JobID),
		metrics: m.forJob(cfg.JobID, jobName),
		events:  make(chan func(), 64),
		done:    make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
		waiters: map[int64]chan Result{},
	}
}

// Run owns the coordinator until Close.
func (d *Driver) Run() {
	defer close(d.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case f := <-d.events:
			f()
		case <-timer.C:
			d.sm.Tick()
		case <-d.ctx.Done():
			return
		}
		d.process(d.sm.Ready())
		if next := d.sm.NextDeadline(); !next.IsZero() {
			timer.Reset(max(time.Until(next), 0))
		} else {
			timer.Stop()
		}
	}
}

// Close stops the loop and waits for every I/O goroutine.
func (d *Driver) Close() {
	d.cancel()
	<-d.done
	d.wg.Wait()
	d.metrics.release()
}

// post runs f on the loop; it gives up once the driver is closed.
func (d *Driver) post(f func()) bool {
	select {
	case d.events <- f:
		return true
	case <-d.ctx.Done():
		return false
	}
}

// call runs f on the loop and waits for it.
func (d *Driver) call(f func()) bool {
	done := make(chan struct{})
	if !d.post(func() { f(); close(done) }) {
		return false
	}
	select {
	case <-done:
		return true
	case <-d.ctx.Done():
		return false
	}
}

func (d *Driver) goIO(f func(ctx context.Context)) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f(d.ctx)
	}()
}

// Start activates periodic checkpoints for a running job.
func (d *Driver) Start(tasks []Task) { d.post(func() { d.sm.Start(tasks) }) }

// Stop aborts everything in flight; the job left RUNNING.
func (d *Driver) Stop(reason weirv1.CheckpointFailureReason) { d.call(func() { d.sm.Stop(reason) }) }

// TaskFinished records a finished subtask.
func (d *Driver) TaskFinished(a *weirv1.ExecutionAttemptID) { d.post(func() { d.sm.TaskFinished(a) }) }

// Acknowledge feeds a subtask's ack.
func (d *Driver) Acknowledge(ack *weirv1.AcknowledgeCheckpointRequest) {
	posted := d.post(func() {
		if r := d.sm.Acknowledge(ack); r != AckSuccess {
			d.log.Info("checkpoint ack not used", "checkpoint_id", ack.GetCheckpointId(), "attempt", attemptKey(ack.GetAttempt()), "result", r)
		}
	})
	if !posted && ack.GetState() != nil {
		// The coordinator is gone, so is the checkpoint: do not leak its files.
		if err := d.io.Discard(context.Background(), DiscardState{States: []*weirv1.SubtaskState{ack.GetState()}}); err != nil {
			d.log.Warn("discarding late ack state failed", "err", err)
		}
	}
}

// Decline feeds a subtask's decline.
func (d *Driver) Decline(dec *weirv1.DeclineCheckpointRequest) { d.post(func() { d.sm.Decline(dec) }) }

// Trigger requests a checkpoint or savepoint and waits for its outcome.
func (d *Driver) Trigger(ctx context.Context, kind RequestKind, target string) Result {
	ch := make(chan Result, 1)
	if !d.post(func() {
		seq := d.sm.Trigger(kind, kind == Savepoint, target)
		d.waiters[seq] = ch
	}) {
		return Result{Err: errors.New("coordinator: shut down")}
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return Result{Err: ctx.Err()}
	case <-d.done:
		return Result{Err: errors.New("coordinator: shut down")}
	}
}

// Stats returns the checkpoint history.
func (d *Driver) Stats() *weirv1.ListCheckpointsResponse {
	var out *weirv1.ListCheckpointsResponse
	if !d.call(func() { out = d.sm.Stats() }) {
		return &weirv1.ListCheckpointsResponse{Counts: &weirv1.CheckpointCounts{}}
	}
	return out
}

// Detail returns one checkpoint's statistics.
func (d *Driver) Detail(id int64) (*weirv1.GetCheckpointResponse, bool) {
	var out *weirv1.GetCheckpointResponse
	var ok bool
	d.call(func() { out, ok = d.sm.CheckpointDetail(id) })
	return out, ok
}

func (d *Driver) process(effects []Effect) {
	for _, e := range effects {
		switch e := e.(type) {
		case PrepareCheckpoint:
			d.goIO(func(ctx context.Context) {
				id, err := d.io.NextCheckpointID(ctx)
				var loc string
				if err == nil {
					loc, err = d.io.InitLocation(ctx, id, e.Savepoint, e.Target)
				}
				d.post(func() { d.sm.Prepared(e.Request, id, loc, err) })
			})
		case SendTrigger:
			d.metrics.triggered.Inc()
			for _, t := range e.Tasks {
				d.goIO(func(ctx context.Context) {
					if err := d.io.TriggerCheckpoint(ctx, t, e.ID, e.Timestamp, e.Options); err != nil {
						d.post(func() { d.sm.TriggerFailed(e.ID, err) })
					}
				})
			}
		case Finalize:
			d.goIO(func(ctx context.Context) {
				path, subsumed, err := d.io.Finalize(ctx, e)
				d.post(func() { d.sm.Finalized(e.ID, path, subsumed, err) })
			})
		case NotifyComplete:
			for _, t := range e.Tasks {
				d.goIO(func(ctx context.Context) {
					if err := d.io.NotifyCheckpointComplete(ctx, t, e.ID, e.LastSubsumed); err != nil && ctx.Err() == nil {
						d.log.Warn("notify checkpoint complete failed", "checkpoint_id", e.ID, "attempt", attemptKey(t), "err", err)
					}
				})
			}
		case NotifyAborted:
			for _, t := range e.Tasks {
				d.goIO(func(ctx context.Context) {
					if err := d.io.NotifyCheckpointAborted(ctx, t, e.ID); err != nil && ctx.Err() == nil {
						d.log.Debug("notify checkpoint aborted failed", "checkpoint_id", e.ID, "attempt", attemptKey(t), "err", err)
					}
				})
			}
		case DiscardState:
			d.goIO(func(ctx context.Context) {
				if err := d.io.Discard(ctx, e); err != nil {
					d.log.Warn("discarding checkpoint state failed", "location", e.Location, "err", err)
				}
			})
		case RequestDone:
			d.finished(e)
		case FailJob:
			d.log.Error("failing job: checkpoint failures not tolerable", "err", e.Cause)
			d.io.FailJob(e.Cause)
		}
	}
	d.metrics.inProgress.Set(float64(d.sm.NumPending()))
}

func (d *Driver) finished(e RequestDone) {
	if ch, ok := d.waiters[e.Request]; ok {
		ch <- Result{ID: e.ID, Path: e.Path, Err: e.Err}
		delete(d.waiters, e.Request)
	}
	var f *Failure
	switch {
	case e.Err == nil:
		st, _ := d.sm.CheckpointDetail(e.ID)
		c := st.GetCheckpoint()
		d.metrics.completed.Inc()
		dur := time.Duration(c.GetEndToEndDurationMs()) * time.Millisecond
		d.metrics.duration.Observe(dur.Seconds())
		d.metrics.lastDuration.Set(dur.Seconds())
		d.metrics.lastSize.Set(float64(c.GetCheckpointedSize()))
		d.metrics.lastFullSize.Set(float64(c.GetStateSize()))
		d.metrics.lastID.Set(float64(e.ID))
		d.log.Info("checkpoint completed", "checkpoint_id", e.ID, "duration_ms", c.GetEndToEndDurationMs(), "state_size", c.GetStateSize(), "path", e.Path)
	case errors.As(e.Err, &f) && e.ID != 0:
		d.metrics.failed.WithLabelValues(f.Reason.String()).Inc()
		d.log.Warn("checkpoint failed", "checkpoint_id", e.ID, "reason", f.Reason.String(), "err", e.Err)
	default:
		d.log.Debug("checkpoint request not run", "err", e.Err)
	}
}

// Metrics are the JobManager's per-job checkpoint metrics.
type Metrics struct {
	triggered, completed *prometheus.CounterVec
	failed               *prometheus.CounterVec
	inProgress           *prometheus.GaugeVec
	duration             *prometheus.HistogramVec
	lastDuration         *prometheus.GaugeVec
	lastSize             *prometheus.GaugeVec
	lastFullSize         *prometheus.GaugeVec
	lastID               *prometheus.GaugeVec
}

// NewMetrics registers the checkpoint metrics on reg.
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
	}
	reg.MustRegister(m.triggered, m.completed, m.failed, m.inProgress, m.duration, m.lastDuration, m.lastSize, m.lastFullSize, m.lastID)
	return m
}

type jobMetrics struct {
	triggered, completed                             prometheus.Counter
	failed                                           *prometheus.CounterVec
	inProgress, lastDuration, lastSize, lastFullSize prometheus.Gauge
	lastID                                           prometheus.Gauge
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
		release: func() {
			m.inProgress.Delete(lv)
		},
	}
}

package jobmanager

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/autoscaler"
	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// autoscaling drives a job's autoscaler: one goroutine owns the state
// machine, samples the job's load, carries out its rescales and publishes
// its history for the API.
type autoscaling struct {
	j   *jobMaster
	cfg autoscaler.Config
	// history is the state machine's, as last published.
	history atomic.Pointer[[]autoscaler.Entry]
}

// autoscalerMetrics are the autoscaler's, per job and vertex.
type autoscalerMetrics struct {
	decisions   *prometheus.CounterVec
	recommended *prometheus.GaugeVec
	rate        *prometheus.GaugeVec
	target      *prometheus.GaugeVec
	utilization *prometheus.GaugeVec
}

func newAutoscalerMetrics(reg prometheus.Registerer) *autoscalerMetrics {
	labels := []string{"job_id", "job_name", "vertex"}
	m := &autoscalerMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_autoscaler_decisions_total",
			Help: "The autoscaler's decisions by kind: rescale, rescaled and rescale-failed, or why it did not rescale (waiting, restarted, stabilizing, collecting, no-change, deferred, limited, no-slots).",
		}, []string{"job_id", "job_name", "kind"}),
		recommended: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_autoscaler_vertex_parallelism_recommended",
			Help: "The parallelism the autoscaler's latest evaluation calls for (a chain counts as its head vertex).",
		}, labels),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_autoscaler_vertex_true_processing_rate",
			Help: "Records per second the vertex would handle at its parallelism were it busy all the time, over the metrics window.",
		}, labels),
		target: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_autoscaler_vertex_target_rate",
			Help: "Records per second the vertex must handle to keep up with its sources' input, plus the rate to catch their backlog up.",
		}, labels),
		utilization: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_autoscaler_vertex_utilization",
			Help: "The share of the vertex's true processing rate its input needs, over the metrics window.",
		}, labels),
	}
	reg.MustRegister(m.decisions, m.recommended, m.rate, m.target, m.utilization)
	return m
}

func (m *autoscalerMetrics) forget(jobID string) {
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.decisions, m.recommended, m.rate, m.target, m.utilization} {
		v.DeletePartialMatch(prometheus.Labels{"job_id": jobID})
	}
}

// startAutoscaler starts j's autoscaler when its graph turns it on.
func (j *jobMaster) startAutoscaler(g *weirv1.JobGraph) {
	if !g.GetAutoscaler().GetEnabled() {
		return
	}
	a := &autoscaling{j: j, cfg: jobgraph.AutoscalerSettings(g.GetAutoscaler())}
	var rescales []time.Time
	for _, ms := range g.GetAutoscalerRescalesMs() {
		rescales = append(rescales, time.UnixMilli(ms))
	}
	empty := []autoscaler.Entry{}
	a.history.Store(&empty)
	j.autoscale = a
	j.goIO(func() { a.run(autoscaler.New(a.cfg, time.Now(), rescales)) })
}

// sampleEvery is how often the driver samples: often enough for several
// samples per decision, no more often than heartbeats bring news.
func (a *autoscaling) sampleEvery() time.Duration {
	return min(max(a.cfg.Interval/10, 100*time.Millisecond), time.Second)
}

func (a *autoscaling) run(sm *autoscaler.Autoscaler) {
	j := a.j
	defer j.s.autoMet.forget(j.id)
	t := time.NewTicker(a.sampleEvery())
	defer t.Stop()
	var last autoscaler.Entry
	for {
		select {
		case <-j.ctx.Done():
			return
		case <-t.C:
		}
		if scheduler.Terminal(j.state()) {
			return
		}
		d := sm.Observe(time.Now(), j.observe())
		if d != nil {
			a.publish(sm, &last)
			if err := a.carryOut(*d, sm.Rescales()); err != nil {
				j.log.Warn("autoscaler: rescale failed", "parallelism", d.Parallelism, "err", err)
				sm.RescaleFailed(time.Now(), *d, err)
			} else {
				j.log.Info("autoscaler: rescaled", "parallelism", d.Parallelism, "reason", d.Reason)
				sm.Rescaled(time.Now(), *d)
			}
		}
		a.publish(sm, &last)
	}
}

// carryOut rescales the job as d asks, storing the times of the
// autoscaler's rescales with the graph (this one's included).
func (a *autoscaling) carryOut(d autoscaler.Decision, earlier []time.Time) error {
	j := a.j
	ctx, cancel := context.WithTimeout(j.ctx, time.Minute)
	defer cancel()
	now := time.Now()
	_, err := j.s.rescale(ctx, j, d.Parallelism, func(g *weirv1.JobGraph) error {
		// A rescale by hand between the decision and now: the decision
		// was made for another shape.
		for _, v := range g.GetVertices() {
			if p, ok := d.From[v.GetName()]; ok && p != v.GetParallelism() {
				return fmt.Errorf("vertex %s runs at %d, not the %d the autoscaler decided from", v.GetName(), v.GetParallelism(), p)
			}
		}
		g.AutoscalerRescalesMs = g.AutoscalerRescalesMs[:0]
		for _, t := range append(earlier, now) {
			g.AutoscalerRescalesMs = append(g.AutoscalerRescalesMs, t.UnixMilli())
		}
		return nil
	})
	if status.Code(err) == codes.Unavailable && a.applied(d) {
		// Under way, its storing retried in the background.
		return nil
	}
	return err
}

// applied: the job runs at d's parallelism.
func (a *autoscaling) applied(d autoscaler.Decision) bool {
	for _, v := range a.j.current().Graph.GetVertices() {
		if p, ok := d.Parallelism[v.GetName()]; ok && p != v.GetParallelism() {
			return false
		}
	}
	return true
}

// publish makes the history readable and counts the decisions made since
// last (a run of one non-decision counts each time it is made again).
func (a *autoscaling) publish(sm *autoscaler.Autoscaler, last *autoscaler.Entry) {
	h := sm.History()
	a.history.Store(&h)
	e, ok := sm.Last()
	if !ok || e.Kind == last.Kind && e.Time.Equal(last.Time) && e.Repeats == last.Repeats {
		return
	}
	*last = e
	j := a.j
	m := j.s.autoMet
	m.decisions.WithLabelValues(j.id, j.name, string(e.Kind)).Inc()
	for _, ev := range e.Evaluations {
		m.recommended.WithLabelValues(j.id, j.name, ev.Vertex).Set(float64(ev.Recommended))
		m.rate.WithLabelValues(j.id, j.name, ev.Vertex).Set(ev.TrueProcessingRate)
		m.target.WithLabelValues(j.id, j.name, ev.Vertex).Set(ev.TargetRate + ev.CatchUpRate)
		m.utilization.WithLabelValues(j.id, j.name, ev.Vertex).Set(ev.Utilization)
	}
}

// observe is the job as the autoscaler sees it: its vertices joined into
// the chains that run as one subtask (whose head reports the chain's
// load), in topological order.
func (j *jobMaster) observe() autoscaler.Observation {
	info := j.info()
	g := info.GetGraph()
	o := autoscaler.Observation{
		Running: info.GetState() == weirv1.JobState_JOB_STATE_RUNNING, State: info.GetState().FlinkName(),
		Restarts: info.GetRestarts(), Slots: j.s.slotsFor(j),
	}
	order, err := jobgraph.TopologicalOrder(g)
	if err != nil {
		return o
	}
	after := jobgraph.ChainedAfter(g)
	head := map[string]string{}
	for _, x := range order {
		head[x.GetName()] = x.GetName()
		if up, ok := after[x.GetName()]; ok {
			head[x.GetName()] = head[up]
		}
	}
	vertices := map[string]*weirv1.VertexInfo{}
	for _, vi := range info.GetVertices() {
		vertices[vi.GetName()] = vi
	}
	for _, x := range order {
		if head[x.GetName()] != x.GetName() {
			continue
		}
		u := autoscaler.Unit{
			Name: x.GetName(), Parallelism: x.GetParallelism(), MaxParallelism: g.GetMaxParallelism(),
			SlotSharingGroup: x.GetSlotSharingGroup(), Source: len(x.GetInputs()) == 0, PendingRecords: -1,
		}
		for _, y := range order {
			if head[y.GetName()] == u.Name {
				u.Vertices = append(u.Vertices, y.GetName())
			}
		}
		seen := map[string]bool{}
		for _, in := range x.GetInputs() {
			if h := head[in.GetSource()]; !seen[h] {
				seen[h] = true
				u.Inputs = append(u.Inputs, h)
			}
			if in.GetPartitioner() == weirv1.Partitioner_PARTITIONER_HASH {
				u.Keyed = true
			}
		}
		sort.Strings(u.Inputs)
		var busy float64
		for _, st := range vertices[u.Name].GetSubtasks() {
			l := st.GetLoad()
			if st.GetState() != weirv1.ExecutionState_EXECUTION_STATE_RUNNING || l == nil {
				continue
			}
			u.Reporting++
			busy += l.GetBusyMsPerSecond()
			u.RecordsInPerSecond += l.GetRecordsInPerSecond()
			u.RecordsOutPerSecond += l.GetRecordsOutPerSecond()
			if l.PendingRecords != nil {
				u.PendingRecords = max(u.PendingRecords, 0) + l.GetPendingRecords()
				u.Splits += l.GetSplits()
			}
		}
		if u.Reporting > 0 {
			u.BusyMsPerSecond = busy / float64(u.Reporting)
		}
		o.Units = append(o.Units, u)
	}
	return o
}

// autoscalerInfo is the job's autoscaler for the API; enabled false when
// it has none.
func (j *jobMaster) autoscalerInfo() *weirv1.GetAutoscalerResponse {
	a := j.autoscale
	if a == nil {
		return &weirv1.GetAutoscalerResponse{Config: j.current().Graph.GetAutoscaler()}
	}
	out := &weirv1.GetAutoscalerResponse{Enabled: true, Config: jobgraph.AutoscalerProto(a.cfg, true)}
	for _, e := range *a.history.Load() {
		out.History = append(out.History, entryProto(e))
	}
	return out
}

// lastAutoscalerEntry is the autoscaler's newest entry, nil without one.
func (j *jobMaster) lastAutoscalerEntry() *weirv1.AutoscalerEntry {
	a := j.autoscale
	if a == nil {
		return nil
	}
	h := *a.history.Load()
	if len(h) == 0 {
		return nil
	}
	return entryProto(h[len(h)-1])
}

func entryProto(e autoscaler.Entry) *weirv1.AutoscalerEntry {
	p := &weirv1.AutoscalerEntry{
		TimeMs: e.Time.UnixMilli(), Repeats: int32(e.Repeats), Kind: string(e.Kind), Reason: e.Reason,
		Parallelism: e.Parallelism,
	}
	if !e.Last.IsZero() {
		p.LastMs = e.Last.UnixMilli()
	}
	for _, ev := range e.Evaluations {
		p.Evaluations = append(p.Evaluations, &weirv1.AutoscalerEvaluation{
			Vertex: ev.Vertex, Parallelism: ev.Parallelism, BusyMsPerSecond: ev.BusyMsPerSecond,
			RecordsInPerSecond: ev.RecordsInPerSecond, RecordsOutPerSecond: ev.RecordsOutPerSecond,
			TrueProcessingRate: ev.TrueProcessingRate, TargetRate: ev.TargetRate, CatchUpRate: ev.CatchUpRate,
			PendingRecords: ev.PendingRecords, Utilization: ev.Utilization, WithinTarget: ev.Within,
			Recommended: ev.Recommended, Chosen: ev.Chosen, Reason: ev.Reason,
		})
	}
	return p
}

// GetAutoscaler returns a job's autoscaler: its configuration and its
// history of decisions.
func (s *Server) GetAutoscaler(_ context.Context, req *weirv1.GetAutoscalerRequest) (*weirv1.GetAutoscalerResponse, error) {
	j, err := s.lookup(req.GetJobId())
	if err != nil {
		return nil, err
	}
	return j.autoscalerInfo(), nil
}

package restapi

import (
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/jobgraph"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// autoscalerInfo is GET /jobs/{jobid}/autoscaler, Weir's own endpoint
// (Flink's autoscaler reports through its Kubernetes operator instead):
// the configuration in effect, and every decision with its figures and
// reason, oldest first.
type autoscalerInfo struct {
	JID     string                `json:"jid"`
	Enabled bool                  `json:"enabled"`
	Config  *autoscalerConfigInfo `json:"config,omitempty"`
	History []autoscalerEntryInfo `json:"history"`
}

// autoscalerConfigInfo names its fields as the job spec's autoscaler:
// block does; durations in the spec's notation.
type autoscalerConfigInfo struct {
	TargetUtilization   float64                    `json:"target-utilization"`
	UtilizationBoundary float64                    `json:"utilization-boundary"`
	Interval            string                     `json:"interval"`
	MetricsWindow       string                     `json:"metrics-window"`
	Stabilization       string                     `json:"stabilization"`
	ScaleDownDelay      string                     `json:"scale-down-delay"`
	CatchUpDuration     string                     `json:"catch-up-duration"`
	RestartTime         string                     `json:"restart-time"`
	MaxRescalesPerHour  int                        `json:"max-rescales-per-hour"`
	MaxScaleDownFactor  float64                    `json:"max-scale-down-factor"`
	MaxScaleUpFactor    float64                    `json:"max-scale-up-factor"`
	MinParallelism      int32                      `json:"min-parallelism"`
	MaxParallelism      int32                      `json:"max-parallelism"`
	Vertices            map[string]parallelismInfo `json:"vertices,omitempty"`
}

type parallelismInfo struct {
	Min int32 `json:"min-parallelism"`
	Max int32 `json:"max-parallelism"`
}

// autoscalerEntryInfo is one decision; last and repeats are a run of the
// same non-decision's last time and count after time.
type autoscalerEntryInfo struct {
	Time        int64                      `json:"time"`
	Last        int64                      `json:"last,omitempty"`
	Repeats     int32                      `json:"repeats,omitempty"`
	Kind        string                     `json:"kind"`
	Reason      string                     `json:"reason"`
	Parallelism map[string]int32           `json:"parallelism,omitempty"`
	Vertices    []autoscalerEvaluationInfo `json:"vertices,omitempty"`
}

type autoscalerEvaluationInfo struct {
	Vertex              string  `json:"vertex"`
	Parallelism         int32   `json:"parallelism"`
	BusyMsPerSecond     float64 `json:"busy-ms-per-second"`
	RecordsInPerSecond  float64 `json:"records-in-per-second"`
	RecordsOutPerSecond float64 `json:"records-out-per-second"`
	TrueProcessingRate  float64 `json:"true-processing-rate"`
	TargetRate          float64 `json:"target-rate"`
	CatchUpRate         float64 `json:"catch-up-rate"`
	PendingRecords      int64   `json:"pending-records"`
	Utilization         float64 `json:"utilization"`
	WithinTarget        bool    `json:"within-target"`
	Recommended         int32   `json:"recommended"`
	Chosen              int32   `json:"chosen"`
	Reason              string  `json:"reason"`
}

func (h *Handler) getJobAutoscaler(w http.ResponseWriter, r *http.Request) error {
	id, err := jobIDParam(r)
	if err != nil {
		return err
	}
	resp, err := h.api.GetAutoscaler(r.Context(), &weirv1.GetAutoscalerRequest{JobId: id})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return errorf(http.StatusNotFound, "Job %s not found", id)
		}
		return err
	}
	h.writeJSON(w, http.StatusOK, toAutoscalerInfo(id, resp))
	return nil
}

func toAutoscalerInfo(id string, resp *weirv1.GetAutoscalerResponse) autoscalerInfo {
	out := autoscalerInfo{JID: id, Enabled: resp.GetEnabled(), History: []autoscalerEntryInfo{}}
	if c := resp.GetConfig(); c != nil {
		s := jobgraph.AutoscalerSettings(c)
		d := func(v time.Duration) string { return jobgraph.FormatDuration(v) }
		out.Config = &autoscalerConfigInfo{
			TargetUtilization: s.TargetUtilization, UtilizationBoundary: s.UtilizationBoundary,
			Interval: d(s.Interval), MetricsWindow: d(s.MetricsWindow), Stabilization: d(s.Stabilization),
			ScaleDownDelay: d(s.ScaleDownDelay), CatchUpDuration: d(s.CatchUpDuration), RestartTime: d(s.RestartTime),
			MaxRescalesPerHour: s.MaxRescalesPerHour, MaxScaleDownFactor: s.MaxScaleDownFactor, MaxScaleUpFactor: s.MaxScaleUpFactor,
			MinParallelism: s.MinParallelism, MaxParallelism: s.MaxParallelism,
		}
		for name, b := range s.Vertices {
			if out.Config.Vertices == nil {
				out.Config.Vertices = map[string]parallelismInfo{}
			}
			out.Config.Vertices[name] = parallelismInfo{Min: b.Min, Max: b.Max}
		}
	}
	for _, e := range resp.GetHistory() {
		out.History = append(out.History, toAutoscalerEntry(e))
	}
	return out
}

func toAutoscalerEntry(e *weirv1.AutoscalerEntry) autoscalerEntryInfo {
	x := autoscalerEntryInfo{
		Time: e.GetTimeMs(), Last: e.GetLastMs(), Repeats: e.GetRepeats(), Kind: e.GetKind(), Reason: e.GetReason(),
		Parallelism: e.GetParallelism(),
	}
	for _, v := range e.GetEvaluations() {
		x.Vertices = append(x.Vertices, autoscalerEvaluationInfo{
			Vertex: v.GetVertex(), Parallelism: v.GetParallelism(), BusyMsPerSecond: v.GetBusyMsPerSecond(),
			RecordsInPerSecond: v.GetRecordsInPerSecond(), RecordsOutPerSecond: v.GetRecordsOutPerSecond(),
			TrueProcessingRate: v.GetTrueProcessingRate(), TargetRate: v.GetTargetRate(), CatchUpRate: v.GetCatchUpRate(),
			PendingRecords: v.GetPendingRecords(), Utilization: v.GetUtilization(), WithinTarget: v.GetWithinTarget(),
			Recommended: v.GetRecommended(), Chosen: v.GetChosen(), Reason: v.GetReason(),
		})
	}
	return x
}

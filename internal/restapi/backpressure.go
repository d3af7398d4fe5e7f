package restapi

import (
	"net/http"
	"sort"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Back-pressure and throughput: Flink's GET
// /jobs/{jobid}/vertices/{vertexid}/backpressure and the per-vertex I/O
// metrics of GET /jobs/{jobid}, from the loads the TaskManagers report
// with their heartbeats (SubtaskInfo.load of the client API).

// Flink's back-pressure levels and the thresholds of its
// JobVertexBackPressureHandler: a back-pressured ratio up to 10% is ok, up
// to 50% low, above that high.
const (
	levelOK   = "ok"
	levelLow  = "low"
	levelHigh = "high"
)

func backPressureLevel(ratio float64) string {
	switch {
	case ratio <= 0.10:
		return levelOK
	case ratio <= 0.5:
		return levelLow
	}
	return levelHigh
}

// JobVertexBackPressureInfo (NON_NULL): only status when no subtask of the
// vertex reported its load (Flink's "deprecated", which it answers when it
// has no metrics for the vertex).
//
// Flink 1.15 writes the level as "backpressure-level"; its generated API
// documentation and OpenAPI spec name it "backpressureLevel". Both are
// written, so clients of either work.
type jobVertexBackPressureInfo struct {
	Status            string `json:"status"`
	BackpressureLevel string `json:"backpressure-level,omitempty"`
	// Weir addition: the documented spelling of backpressure-level.
	BackpressureLevelDoc string                    `json:"backpressureLevel,omitempty"`
	EndTimestamp         int64                     `json:"end-timestamp,omitempty"`
	Subtasks             []subtaskBackPressureInfo `json:"subtasks,omitempty"`
}

// JobVertexBackPressureInfo.SubtaskBackPressureInfo. Flink's
// other-concurrent-attempts (speculative execution) does not apply: Weir
// runs one attempt of a subtask at a time.
type subtaskBackPressureInfo struct {
	Subtask           int32  `json:"subtask"`
	AttemptNumber     int32  `json:"attempt-number"`
	BackpressureLevel string `json:"backpressure-level"`
	// Weir addition: the documented spelling of backpressure-level.
	BackpressureLevelDoc string  `json:"backpressureLevel"`
	Ratio                float64 `json:"ratio"`
	IdleRatio            float64 `json:"idleRatio"`
	BusyRatio            float64 `json:"busyRatio"`
	// Weir additions: the subtask's throughput over the same interval,
	// under Flink's metric names.
	NumRecordsInPerSecond  float64 `json:"numRecordsInPerSecond"`
	NumRecordsOutPerSecond float64 `json:"numRecordsOutPerSecond"`
}

// toBackPressureInfo answers the back-pressure of vertex v from its
// subtasks' loads, by subtask index.
func toBackPressureInfo(v vertexView) jobVertexBackPressureInfo {
	subs := append([]*weirv1.SubtaskInfo(nil), v.info.GetSubtasks()...)
	sort.Slice(subs, func(i, k int) bool { return subs[i].GetIndex() < subs[k].GetIndex() })
	out := jobVertexBackPressureInfo{Status: "deprecated"}
	maxRatio := 0.0
	for _, st := range subs {
		l := st.GetLoad()
		if l == nil {
			continue
		}
		ratio := l.GetBackpressuredMsPerSecond() / 1000
		level := backPressureLevel(ratio)
		out.Subtasks = append(out.Subtasks, subtaskBackPressureInfo{
			Subtask: st.GetIndex(), AttemptNumber: st.GetAttempt(), BackpressureLevel: level, BackpressureLevelDoc: level,
			Ratio: ratio, IdleRatio: l.GetIdleMsPerSecond() / 1000, BusyRatio: l.GetBusyMsPerSecond() / 1000,
			NumRecordsInPerSecond: l.GetRecordsInPerSecond(), NumRecordsOutPerSecond: l.GetRecordsOutPerSecond(),
		})
		maxRatio = max(maxRatio, ratio)
		out.EndTimestamp = max(out.EndTimestamp, l.GetTimestampMs())
	}
	if len(out.Subtasks) > 0 {
		out.Status = "ok"
		out.BackpressureLevel = backPressureLevel(maxRatio)
		out.BackpressureLevelDoc = out.BackpressureLevel
	}
	return out
}

// toIOMetrics is a vertex's IOMetricsInfo. The record counts and times add
// up the subtasks that reported a load; they are complete when every
// subtask of the vertex did. Bytes are not measured.
func toIOMetrics(v vertexView) ioMetricsInfo {
	l := v.info.GetLoad()
	return ioMetrics(l, l != nil && v.parallelism > 0 && v.info.GetLoadReported() >= v.parallelism)
}

// subtaskIOMetrics is a subtask's IOMetricsInfo, complete once it reported
// a load.
func subtaskIOMetrics(st *weirv1.SubtaskInfo) ioMetricsInfo {
	return ioMetrics(st.GetLoad(), st.GetLoad() != nil)
}

func ioMetrics(l *weirv1.SubtaskInfo_Load, complete bool) ioMetricsInfo {
	return ioMetricsInfo{
		ReadRecords: l.GetRecordsIn(), ReadRecordsComplete: complete,
		WriteRecords: l.GetRecordsOut(), WriteRecordsComplete: complete,
		AccumulatedBackpressuredTime: l.GetBackpressuredMs(), AccumulatedIdleTime: l.GetIdleMs(),
		AccumulatedBusyTime:   float64(l.GetBusyMs()),
		ReadRecordsPerSecond:  l.GetRecordsInPerSecond(),
		WriteRecordsPerSecond: l.GetRecordsOutPerSecond(),
	}
}

// vertexParam finds the vertex of path parameter vertexid, by REST ID or
// name; an unknown one is a 404 listing the job's vertices.
func vertexParam(job *jobView, r *http.Request) (vertexView, error) {
	idOrName := r.PathValue("vertexid")
	if v, ok := job.vertex(idOrName); ok {
		return v, nil
	}
	return vertexView{}, errorf(http.StatusNotFound, "job %s has no vertex %q; its vertices are: %s", job.info.GetId(), idOrName, job.vertexList())
}

func (h *Handler) getVertexBackPressure(w http.ResponseWriter, r *http.Request) error {
	job, err := h.job(r)
	if err != nil {
		return err
	}
	v, err := vertexParam(job, r)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, toBackPressureInfo(v))
	return nil
}

package restapi

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirproject/weir/internal/jobgraph"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// A job's exceptions, vertex details, plan and configuration: Flink's GET
// /jobs/{jobid}/exceptions, /jobs/{jobid}/vertices/{vertexid},
// /jobs/{jobid}/plan and /jobs/{jobid}/config.

const (
	// defaultMaxExceptions is how many exceptions Flink reports without a
	// maxExceptions query parameter (JobExceptionsHandler's
	// MAX_NUMBER_EXCEPTION_TO_REPORT).
	defaultMaxExceptions = 20
	// exceptionName stands in for Flink's exception class: Weir reports a
	// failure's cause as text. It is the class failureCause reports for
	// errors that are not RPC statuses.
	exceptionName = "weir.Error"
	// unassigned is Flink's endpoint of an attempt no TaskManager holds.
	unassigned = "(unassigned)"
)

// maxExceptionsParam is Flink's maxExceptions query parameter: how many
// exceptions to report at most.
func maxExceptionsParam(r *http.Request) (int, error) {
	raw := r.URL.Query().Get("maxExceptions")
	if raw == "" {
		return defaultMaxExceptions, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		return 0, errorf(http.StatusBadRequest, "bad maxExceptions %q: want a positive integer", raw)
	}
	return n, nil
}

func (h *Handler) getJobExceptions(w http.ResponseWriter, r *http.Request) error {
	limit, err := maxExceptionsParam(r)
	if err != nil {
		return err
	}
	job, err := h.job(r)
	if err != nil {
		return err
	}
	addrs, err := h.taskManagerAddresses(r.Context())
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, toJobExceptions(job, addrs, limit))
	return nil
}

// toJobExceptions answers a job's failures, newest first as in Flink, at
// most limit of each list. addrs maps the registered TaskManagers' IDs to
// their addresses; a failure on a TaskManager that is gone has no
// endpoint.
func toJobExceptions(job *jobView, addrs map[string]string, limit int) jobExceptionsInfo {
	out := jobExceptionsInfo{
		AllExceptions:    []executionExceptionInfo{},
		ExceptionHistory: jobExceptionHistory{Entries: []rootExceptionInfo{}},
	}
	exs := job.info.GetExceptions() // oldest first
	for i := len(exs) - 1; i >= 0; i-- {
		if len(out.ExceptionHistory.Entries) == limit {
			out.ExceptionHistory.Truncated = true
			break
		}
		e := exs[i]
		endpoint := addrs[e.GetTaskmanagerId()]
		regions := e.GetRegions()
		if regions == nil {
			regions = []int32{}
		}
		out.ExceptionHistory.Entries = append(out.ExceptionHistory.Entries, rootExceptionInfo{
			exceptionInfo: exceptionInfo{
				ExceptionName: exceptionName, Stacktrace: e.GetCause(), Timestamp: e.GetTimestampMs(),
				TaskName: e.GetTask(), Location: endpoint, Endpoint: endpoint, TaskManagerID: e.GetTaskmanagerId(),
				FailureLabels: map[string]string{},
			},
			ConcurrentExceptions: []exceptionInfo{},
			Regions:              regions,
			FullRestart:          e.GetFullRestart(),
		})
	}
	// Flink's root exception is the cause of the latest failure.
	if len(exs) > 0 {
		latest := exs[len(exs)-1]
		cause, ts := latest.GetCause(), latest.GetTimestampMs()
		out.RootException, out.Timestamp = &cause, &ts
	} else if cause := job.info.GetFailureCause(); cause != "" {
		out.RootException = &cause
	}
	// all-exceptions are, as in Flink, the failures of the current
	// execution attempts; a restart replaces the attempts and so empties it.
	for _, v := range job.vertices {
		for _, st := range sortedSubtasks(v.info) {
			if st.GetFailureCause() == "" {
				continue
			}
			if len(out.AllExceptions) == limit {
				out.Truncated = true
				return out
			}
			endpoint := addrs[st.GetTaskmanagerId()]
			out.AllExceptions = append(out.AllExceptions, executionExceptionInfo{
				Exception: st.GetFailureCause(), Task: fmt.Sprintf("%s (%d/%d)", v.name, st.GetIndex()+1, v.parallelism),
				Location: endpoint, Endpoint: endpoint, Timestamp: msOrMinusOne(st.GetEndTimeMs()),
				TaskManagerID: st.GetTaskmanagerId(),
			})
		}
	}
	return out
}

func (h *Handler) getVertexDetails(w http.ResponseWriter, r *http.Request) error {
	job, err := h.job(r)
	if err != nil {
		return err
	}
	v, err := vertexParam(job, r)
	if err != nil {
		return err
	}
	addrs, err := h.taskManagerAddresses(r.Context())
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, toJobVertexDetails(job, v, addrs, h.now().UnixMilli()))
	return nil
}

// toJobVertexDetails answers vertex v's subtasks, by index.
func toJobVertexDetails(job *jobView, v vertexView, addrs map[string]string, now int64) jobVertexDetailsInfo {
	out := jobVertexDetailsInfo{
		ID: v.id, Name: v.name, Parallelism: int(v.parallelism),
		MaxParallelism: int(job.info.GetGraph().GetMaxParallelism()), Now: now,
		Subtasks: []subtaskExecutionAttemptDetailsInfo{},
	}
	for _, st := range sortedSubtasks(v.info) {
		start, end := msOrMinusOne(st.GetStartTimeMs()), msOrMinusOne(st.GetEndTimeMs())
		duration := int64(-1)
		switch {
		case start < 0: // not deployed yet: Flink's -1
		case end >= 0:
			duration = end - start
		default:
			duration = now - start
		}
		endpoint, host := unassigned, unassigned
		if tm := st.GetTaskmanagerId(); tm != "" {
			endpoint, host = addrs[tm], addrs[tm]
			if hst, _, err := net.SplitHostPort(endpoint); err == nil {
				host = hst
			}
		}
		out.Subtasks = append(out.Subtasks, subtaskExecutionAttemptDetailsInfo{
			Subtask: st.GetIndex(), Status: st.GetState().FlinkName(), Attempt: st.GetAttempt(),
			Host: host, Endpoint: endpoint, StartTime: start, EndTime: end, Duration: duration,
			Metrics: subtaskIOMetrics(st), TaskManagerID: st.GetTaskmanagerId(), Region: st.GetRegion(),
		})
	}
	return out
}

func (h *Handler) getJobPlan(w http.ResponseWriter, r *http.Request) error {
	job, err := h.job(r)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, jobPlanInfo{Plan: toJobPlan(job.info)})
	return nil
}

func (h *Handler) getJobConfig(w http.ResponseWriter, r *http.Request) error {
	job, err := h.job(r)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, toJobConfig(job))
	return nil
}

func toJobConfig(job *jobView) jobConfigInfo {
	out := jobConfigInfo{JID: job.info.GetId(), Name: job.info.GetName()}
	g := job.info.GetGraph()
	if g == nil {
		return out
	}
	parallelism := 0
	for _, v := range job.vertices {
		parallelism = max(parallelism, int(v.parallelism))
	}
	out.ExecutionConfig = &executionConfigInfo{
		ExecutionMode: "PIPELINED", RestartStrategy: restartStrategyText(g),
		JobParallelism: parallelism, UserConfig: map[string]string{},
	}
	return out
}

// restartStrategyText describes the job's restart strategy in the words of
// Flink's RestartStrategyConfiguration descriptions. A graph that names no
// strategy runs with jobgraph's defaults, so those are described.
func restartStrategyText(g *weirv1.JobGraph) string {
	g = proto.Clone(g).(*weirv1.JobGraph)
	jobgraph.ApplyDefaults(g)
	rs := g.GetRestartStrategy()
	ms := func(d *durationpb.Duration) int64 { return d.AsDuration().Milliseconds() }
	switch rs.GetKind() {
	case weirv1.RestartStrategy_KIND_NONE:
		return "Restart deactivated."
	case weirv1.RestartStrategy_KIND_FIXED_DELAY:
		return fmt.Sprintf("Restart with fixed delay (%d ms). #%d restart attempts.", ms(rs.GetDelay()), rs.GetAttempts())
	case weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY:
		s := fmt.Sprintf("Restart with exponential delay: starting at %d ms, increasing by %g, with maximum %d ms. Delay resets after %d ms.",
			ms(rs.GetInitialBackoff()), rs.GetMultiplier(), ms(rs.GetMaxBackoff()), ms(rs.GetResetBackoffThreshold()))
		// MaxInt32 attempts is jobgraph's "unlimited", Flink's default.
		if rs.GetAttempts() < math.MaxInt32 {
			s += fmt.Sprintf(" #%d restart attempts.", rs.GetAttempts())
		}
		return s
	}
	return "Cluster level default restart strategy"
}

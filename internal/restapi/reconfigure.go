package restapi

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Changing a running job: Flink's resource requirements of the adaptive
// scheduler (GET and PUT /jobs/{jobid}/resource-requirements), which
// rescale it, and Weir's PATCH /jobs/{jobid}/checkpoints/config, which
// changes its periodic checkpointing.

// Weir runs a vertex at exactly the parallelism it is given, so of
// Flink's bounds it reports the parallelism as upperBound and takes
// upperBound as the new parallelism; lowerBound is only checked.

func (h *Handler) getResourceRequirements(w http.ResponseWriter, r *http.Request) error {
	job, err := h.job(r)
	if err != nil {
		return err
	}
	out := jobResourceRequirements{}
	for _, v := range job.vertices {
		out[v.id] = jobVertexResourceRequirements{Parallelism: &parallelismBounds{LowerBound: 1, UpperBound: v.parallelism}}
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *Handler) putResourceRequirements(w http.ResponseWriter, r *http.Request) error {
	var body jobResourceRequirements
	if err := decodeBody(r, "JobResourceRequirementsBody", &body); err != nil {
		return err
	}
	job, err := h.job(r)
	if err != nil {
		return err
	}
	parallelism, changed, err := rescaleParallelism(job, body)
	if err != nil {
		return err
	}
	// A rescale takes a checkpoint and restarts the job: not for a body
	// that changes nothing, such as what GET answered.
	if changed {
		id := job.info.GetId()
		if _, err := h.api.RescaleJob(r.Context(), &weirv1.RescaleJobRequest{JobId: id, Parallelism: parallelism}); err != nil {
			return fmt.Errorf("rescaling job %s: %w", id, err)
		}
	}
	h.writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// rescaleParallelism translates a JobResourceRequirementsBody, keyed by
// vertex REST ID or name, to RescaleJob's new parallelisms by vertex name,
// and reports whether any differs from the current one.
func rescaleParallelism(job *jobView, body jobResourceRequirements) (map[string]int32, bool, error) {
	if len(body) == 0 {
		return nil, false, errorf(http.StatusBadRequest,
			`request body does not match JobResourceRequirementsBody: name at least one vertex, as {"<vertex ID>": {"parallelism": {"lowerBound": 1, "upperBound": <n>}}}; the job's vertices are: %s`,
			job.vertexList())
	}
	// Sorted, so that the first error is the same every time.
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parallelism := make(map[string]int32, len(body))
	changed := false
	for _, key := range keys {
		v, ok := job.vertex(key)
		if !ok {
			return nil, false, errorf(http.StatusBadRequest, "job %s has no vertex %q; its vertices are: %s", job.info.GetId(), key, job.vertexList())
		}
		p := body[key].Parallelism
		if p == nil {
			return nil, false, errorf(http.StatusBadRequest, "request body does not match JobResourceRequirementsBody: vertex %q has no \"parallelism\"", key)
		}
		if p.LowerBound < 1 || p.LowerBound > p.UpperBound {
			return nil, false, errorf(http.StatusBadRequest, "vertex %q: lowerBound %d must be between 1 and upperBound %d", key, p.LowerBound, p.UpperBound)
		}
		if prev, dup := parallelism[v.name]; dup && prev != p.UpperBound {
			return nil, false, errorf(http.StatusBadRequest, "vertex %q is named twice, by REST ID and by name, with upperBounds %d and %d", v.name, prev, p.UpperBound)
		}
		parallelism[v.name] = p.UpperBound
		changed = changed || p.UpperBound != v.parallelism
	}
	return parallelism, changed, nil
}

// maxDurationMs is the longest duration in ms a time.Duration holds.
const maxDurationMs = math.MaxInt64 / int64(time.Millisecond)

// durationParam converts field name's milliseconds to a Duration; unset
// stays nil.
func durationParam(name string, ms *int64) (*durationpb.Duration, error) {
	switch {
	case ms == nil:
		return nil, nil
	case *ms < 0:
		return nil, errorf(http.StatusBadRequest, "bad %s %d: want milliseconds, 0 or more", name, *ms)
	case *ms > maxDurationMs:
		return nil, errorf(http.StatusBadRequest, "bad %s %d: want at most %d milliseconds", name, *ms, maxDurationMs)
	}
	return durationpb.New(time.Duration(*ms) * time.Millisecond), nil
}

func (h *Handler) patchCheckpointConfig(w http.ResponseWriter, r *http.Request) error {
	var body checkpointConfigPatch
	if err := decodeBody(r, "CheckpointConfigPatch", &body); err != nil {
		return err
	}
	req := &weirv1.ConfigureCheckpointingRequest{}
	var err error
	if req.Interval, err = durationParam("interval", body.Interval); err != nil {
		return err
	}
	if req.Timeout, err = durationParam("timeout", body.Timeout); err != nil {
		return err
	}
	if req.MinPause, err = durationParam("min-pause", body.MinPause); err != nil {
		return err
	}
	if req.IntervalDuringBacklog, err = durationParam("interval-during-backlog", body.IntervalDuringBacklog); err != nil {
		return err
	}
	if req.Interval == nil && req.Timeout == nil && req.MinPause == nil && req.IntervalDuringBacklog == nil {
		return errorf(http.StatusBadRequest, `request body does not match CheckpointConfigPatch: set at least one of "interval", "timeout", "min-pause" and "interval-during-backlog" (milliseconds)`)
	}
	job, err := h.job(r)
	if err != nil {
		return err
	}
	id := job.info.GetId()
	if job.info.GetGraph() == nil {
		return errorf(http.StatusNotFound, "the checkpointing configuration of job %s is not available", id)
	}
	req.JobId = id
	resp, err := h.api.ConfigureCheckpointing(r.Context(), req)
	if err != nil {
		return fmt.Errorf("configuring the checkpointing of job %s: %w", id, err)
	}
	// The answer is GET's: the job's graph with the checkpointing the core
	// says it has now, or, when it does not say, as read back.
	var g *weirv1.JobGraph
	if cp := resp.GetCheckpointing(); cp != nil {
		g = proto.Clone(job.info.GetGraph()).(*weirv1.JobGraph)
		g.Checkpointing = cp
	} else {
		if job, err = h.job(r); err != nil {
			return fmt.Errorf("reading the checkpointing of job %s back: %w", id, err)
		}
		g = job.info.GetGraph()
	}
	h.writeJSON(w, http.StatusOK, toCheckpointConfig(g))
	return nil
}

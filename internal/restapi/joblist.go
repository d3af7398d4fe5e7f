package restapi

import (
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// ---------------------------------------------------------------------------
// Jobs

func (h *Handler) getJobs(w http.ResponseWriter, r *http.Request) error {
	resp, err := h.api.ListJobs(r.Context(), &weirv1.ListJobsRequest{})
	if err != nil {
		return err
	}
	out := jobIDsWithStatusOverview{Jobs: []jobIDWithStatus{}}
	for _, j := range resp.GetJobs() {
		out.Jobs = append(out.Jobs, jobIDWithStatus{ID: j.GetId(), Status: j.GetState().FlinkName()})
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *Handler) getJobsOverview(w http.ResponseWriter, r *http.Request) error {
	resp, err := h.api.ListJobs(r.Context(), &weirv1.ListJobsRequest{})
	if err != nil {
		return err
	}
	now := h.now().UnixMilli()
	out := multipleJobsDetails{Jobs: []jobDetails{}}
	for _, j := range resp.GetJobs() {
		out.Jobs = append(out.Jobs, toJobDetails(j, now))
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

// job fetches a job; an unknown job is a 404 naming it.
func (h *Handler) job(r *http.Request) (*jobView, error) {
	id, err := jobIDParam(r)
	if err != nil {
		return nil, err
	}
	resp, err := h.api.GetJob(r.Context(), &weirv1.GetJobRequest{JobId: id})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return nil, errorf(http.StatusNotFound, "Job %s not found", id)
		}
		return nil, err
	}
	return newJobView(resp.GetJob()), nil
}

func (h *Handler) getJob(w http.ResponseWriter, r *http.Request) error {
	job, err := h.job(r)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, toJobDetailsInfo(job.info, h.now().UnixMilli()))
	return nil
}

// patchJob is Flink's job termination: mode=cancel (the default) cancels.
func (h *Handler) patchJob(w http.ResponseWriter, r *http.Request) error {
	id, err := jobIDParam(r)
	if err != nil {
		return err
	}
	switch mode := strings.ToLower(r.URL.Query().Get("mode")); mode {
	case "", "cancel":
	case "stop":
		return errorf(http.StatusBadRequest, "mode=stop is not supported (as in Flink since 1.9); stop a job with POST /jobs/%s/stop", id)
	default:
		return errorf(http.StatusBadRequest, "bad mode %q: the only supported termination mode is cancel", mode)
	}
	if _, err := h.api.CancelJob(r.Context(), &weirv1.CancelJobRequest{JobId: id}); err != nil {
		if status.Code(err) == codes.NotFound {
			return errorf(http.StatusNotFound, "Job %s not found", id)
		}
		return err
	}
	h.writeJSON(w, http.StatusAccepted, struct{}{})
	return nil
}

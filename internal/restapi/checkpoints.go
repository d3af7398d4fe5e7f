package restapi

import (
	"context"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// ---------------------------------------------------------------------------
// Checkpoint statistics

func (h *Handler) getCheckpoints(w http.ResponseWriter, r *http.Request) error {
	job, err := h.job(r)
	if err != nil {
		return err
	}
	list, err := h.api.ListCheckpoints(r.Context(), &weirv1.ListCheckpointsRequest{JobId: job.info.GetId()})
	if err != nil {
		return err
	}
	// Per-subtask metrics (alignment, in-flight data) are only in the
	// details of each checkpoint.
	details := map[int64]*weirv1.GetCheckpointResponse{}
	fetch := func(c *weirv1.CheckpointStats) {
		if c == nil {
			return
		}
		if _, ok := details[c.GetId()]; ok {
			return
		}
		d, err := h.api.GetCheckpoint(r.Context(), &weirv1.GetCheckpointRequest{JobId: job.info.GetId(), CheckpointId: c.GetId()})
		if err == nil {
			details[c.GetId()] = d
		}
	}
	for _, c := range list.GetHistory() {
		fetch(c)
	}
	fetch(list.GetLatestCompleted())
	fetch(list.GetLatestSavepoint())
	fetch(list.GetLatestFailed())
	h.writeJSON(w, http.StatusOK, toCheckpointingStatistics(list, job, details))
	return nil
}

func (h *Handler) getCheckpointConfig(w http.ResponseWriter, r *http.Request) error {
	job, err := h.job(r)
	if err != nil {
		return err
	}
	if job.info.GetGraph() == nil {
		return errorf(http.StatusNotFound, "the checkpointing configuration of job %s is not available", job.info.GetId())
	}
	h.writeJSON(w, http.StatusOK, toCheckpointConfig(job.info.GetGraph()))
	return nil
}

func (h *Handler) checkpoint(ctx context.Context, job *jobView, id int64) (*weirv1.GetCheckpointResponse, error) {
	d, err := h.api.GetCheckpoint(ctx, &weirv1.GetCheckpointRequest{JobId: job.info.GetId(), CheckpointId: id})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return nil, errorf(http.StatusNotFound,
				"Could not find checkpointing statistics for checkpoint %d of job %s: it was never taken or is older than the retained history", id, job.info.GetId())
		}
		return nil, err
	}
	return d, nil
}

func (h *Handler) getCheckpointDetails(w http.ResponseWriter, r *http.Request) error {
	cid, err := checkpointIDParam(r)
	if err != nil {
		return err
	}
	job, err := h.job(r)
	if err != nil {
		return err
	}
	d, err := h.checkpoint(r.Context(), job, cid)
	if err != nil {
		return err
	}
	c, subs := d.GetCheckpoint(), d.GetSubtasks()
	h.writeJSON(w, http.StatusOK, toCheckpoint(c, sumInFlight(subs), taskStatsByID(c, job, subs), job, subs))
	return nil
}

func (h *Handler) getCheckpointSubtasks(w http.ResponseWriter, r *http.Request) error {
	cid, err := checkpointIDParam(r)
	if err != nil {
		return err
	}
	job, err := h.job(r)
	if err != nil {
		return err
	}
	v, err := vertexParam(job, r)
	if err != nil {
		return err
	}
	d, err := h.checkpoint(r.Context(), job, cid)
	if err != nil {
		return err
	}
	c, subs := d.GetCheckpoint(), d.GetSubtasks()
	if len(subs) == 0 && c.GetNumAcknowledgedSubtasks() > 0 {
		return errorf(http.StatusNotFound, "per-subtask statistics of checkpoint %d are no longer available: job %s has ended", cid, job.info.GetId())
	}
	h.writeJSON(w, http.StatusOK, toSubtaskDetails(c, v, subs))
	return nil
}

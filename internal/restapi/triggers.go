package restapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"google.golang.org/grpc/status"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// ---------------------------------------------------------------------------
// Asynchronous operations

// failureCause renders an error like Flink's SerializedThrowable.
func failureCause(err error) *serializedThrowable {
	class := "weir.Error"
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		class = "weir.rpc." + st.Code().String()
		msg = st.Message()
	}
	return &serializedThrowable{Class: class, StackTrace: class + ": " + msg}
}

// locationChecker is a client API that tells at once whether it would
// refuse a storage location a client names, as the JobManager does:
// a trigger naming one then answers 400 instead of 202 and an operation
// that fails.
type locationChecker interface {
	CheckStorageLocation(what, loc string) error
}

// checkLocation refuses loc (empty: the default) when the client API
// would.
func (h *Handler) checkLocation(what, loc string) error {
	c, ok := h.api.(locationChecker)
	if !ok || loc == "" {
		return nil
	}
	return c.CheckStorageLocation(what, loc)
}

// trigger starts an asynchronous operation on an existing job and answers
// 202 with its request-id.
func (h *Handler) trigger(w http.ResponseWriter, r *http.Request, group opGroup, triggerID *string, fn func(ctx context.Context, jobID string) (any, error)) error {
	job, err := h.job(r)
	if err != nil {
		return err
	}
	tid, err := optionalTriggerID(triggerID)
	if err != nil {
		return err
	}
	jobID := job.info.GetId()
	_, err = h.ops.start(opKey{job: jobID, group: group, trigger: tid}, func(ctx context.Context) (any, error) {
		return fn(ctx, jobID)
	})
	switch {
	case errors.Is(err, errStoreClosed), errors.Is(err, errStoreFull):
		return errorf(http.StatusServiceUnavailable, "%v", err)
	case err != nil:
		return err
	}
	h.writeJSON(w, http.StatusAccepted, triggerResponse{RequestID: tid})
	return nil
}

// status answers an operation's AsynchronousOperationResult.
func (h *Handler) status(w http.ResponseWriter, r *http.Request, group opGroup, what string, render func(opResult) any) error {
	jobID, err := jobIDParam(r)
	if err != nil {
		return err
	}
	tid, err := triggerIDParam(r)
	if err != nil {
		return err
	}
	notFound := errorf(http.StatusNotFound, "There is no %s operation with trigger ID %s for job %s (results are kept for %v after the operation finished)",
		what, tid, jobID, storeDuration)
	return h.writeOperation(w, opKey{job: jobID, group: group, trigger: tid}, notFound, render)
}

// writeOperation answers the AsynchronousOperationResult of key, or
// notFound.
func (h *Handler) writeOperation(w http.ResponseWriter, key opKey, notFound error, render func(opResult) any) error {
	found, done, res := h.ops.get(key)
	if !found {
		return notFound
	}
	if !done {
		h.writeJSON(w, http.StatusOK, asynchronousOperationResult{Status: queueStatus{ID: "IN_PROGRESS"}})
		return nil
	}
	h.writeJSON(w, http.StatusOK, asynchronousOperationResult{Status: queueStatus{ID: "COMPLETED"}, Operation: render(res)})
	return nil
}

func (h *Handler) postCheckpoint(w http.ResponseWriter, r *http.Request) error {
	var body checkpointTriggerRequest
	if err := decodeBody(r, "CheckpointTriggerRequestBody", &body); err != nil {
		return err
	}
	full := false
	if body.CheckpointType != nil {
		switch t := strings.ToUpper(*body.CheckpointType); t {
		case "CONFIGURED", "INCREMENTAL":
		case "FULL":
			full = true
		default:
			return errorf(http.StatusBadRequest, "bad checkpointType %q: want CONFIGURED, FULL or INCREMENTAL", *body.CheckpointType)
		}
	}
	return h.trigger(w, r, groupCheckpoint, body.TriggerID, func(ctx context.Context, jobID string) (any, error) {
		resp, err := h.api.TriggerCheckpoint(ctx, &weirv1.TriggerCheckpointRequest{JobId: jobID, Full: full})
		if err != nil {
			return nil, err
		}
		id := resp.GetCheckpointId()
		return checkpointInfo{CheckpointID: &id}, nil
	})
}

func (h *Handler) getCheckpointStatus(w http.ResponseWriter, r *http.Request) error {
	return h.status(w, r, groupCheckpoint, "checkpoint", func(res opResult) any {
		if res.err != nil {
			return checkpointInfo{FailureCause: failureCause(res.err)}
		}
		return res.value
	})
}

func (h *Handler) postSavepoint(w http.ResponseWriter, r *http.Request) error {
	var body savepointTriggerRequest
	if err := decodeBody(r, "SavepointTriggerRequestBody", &body); err != nil {
		return err
	}
	target := ""
	if body.TargetDirectory != nil {
		target = *body.TargetDirectory
	}
	if err := h.checkLocation("savepoint target directory", target); err != nil {
		return err
	}
	return h.trigger(w, r, groupSavepoint, body.TriggerID, func(ctx context.Context, jobID string) (any, error) {
		resp, err := h.api.TriggerSavepoint(ctx, &weirv1.TriggerSavepointRequest{JobId: jobID, TargetDirectory: target})
		if err != nil {
			return nil, err
		}
		loc := pointer(resp.GetExternalPath())
		if body.CancelJob {
			// Flink's cancel-job: savepoint, then cancel (the job ends
			// CANCELED; stop-with-savepoint ends it FINISHED).
			if _, err := h.api.CancelJob(ctx, &weirv1.CancelJobRequest{JobId: jobID}); err != nil {
				return nil, status.Errorf(status.Code(err), "savepoint %s was taken, but cancelling job %s failed: %s", loc, jobID, status.Convert(err).Message())
			}
		}
		return savepointInfo{Location: loc}, nil
	})
}

func (h *Handler) postStop(w http.ResponseWriter, r *http.Request) error {
	var body stopWithSavepointRequest
	if err := decodeBody(r, "StopWithSavepointRequestBody", &body); err != nil {
		return err
	}
	target := ""
	if body.TargetDirectory != nil {
		target = *body.TargetDirectory
	}
	if err := h.checkLocation("savepoint target directory", target); err != nil {
		return err
	}
	return h.trigger(w, r, groupSavepoint, body.TriggerID, func(ctx context.Context, jobID string) (any, error) {
		resp, err := h.api.StopWithSavepoint(ctx, &weirv1.StopWithSavepointRequest{JobId: jobID, TargetDirectory: target, Drain: body.Drain})
		if err != nil {
			return nil, err
		}
		return savepointInfo{Location: pointer(resp.GetExternalPath())}, nil
	})
}

func (h *Handler) getSavepointStatus(w http.ResponseWriter, r *http.Request) error {
	return h.status(w, r, groupSavepoint, "savepoint", func(res opResult) any {
		if res.err != nil {
			return savepointInfo{FailureCause: failureCause(res.err)}
		}
		return res.value
	})
}

func (h *Handler) postSavepointDisposal(w http.ResponseWriter, r *http.Request) error {
	var body savepointDisposalRequest
	if err := decodeBody(r, "SavepointDisposalRequest", &body); err != nil {
		return err
	}
	if body.SavepointPath == "" {
		return errorf(http.StatusBadRequest, "request body does not match SavepointDisposalRequest: \"savepoint-path\" is required")
	}
	if err := h.checkLocation("dispose savepoint", body.SavepointPath); err != nil {
		return err
	}
	// Disposals belong to no job; Flink polls them by request-id alone.
	tid := newTriggerID()
	_, err := h.ops.start(opKey{group: groupDisposal, trigger: tid}, func(ctx context.Context) (any, error) {
		_, err := h.api.DisposeSavepoint(ctx, &weirv1.DisposeSavepointRequest{Path: body.SavepointPath})
		return asynchronousOperationInfo{}, err
	})
	switch {
	case errors.Is(err, errStoreClosed), errors.Is(err, errStoreFull):
		return errorf(http.StatusServiceUnavailable, "%v", err)
	case err != nil:
		return err
	}
	h.writeJSON(w, http.StatusAccepted, triggerResponse{RequestID: tid})
	return nil
}

func (h *Handler) getSavepointDisposalStatus(w http.ResponseWriter, r *http.Request) error {
	tid, err := triggerIDParam(r)
	if err != nil {
		return err
	}
	notFound := errorf(http.StatusNotFound, "There is no savepoint disposal with request ID %s (results are kept for %v after the operation finished)", tid, storeDuration)
	return h.writeOperation(w, opKey{group: groupDisposal, trigger: tid}, notFound, func(res opResult) any {
		if res.err != nil {
			return asynchronousOperationInfo{FailureCause: failureCause(res.err)}
		}
		return res.value
	})
}

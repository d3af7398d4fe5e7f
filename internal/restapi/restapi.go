// Package restapi serves Flink's REST API (the 1.15 shapes of the
// endpoints Weir supports) from the JobManager's client API, so tools
// written for Flink's /jobs/{id}/checkpoints and friends work against Weir.
//
// Paths, methods, status codes and JSON field names follow Flink. Where
// Flink's answers confuse users, fields are added (each is marked "Weir
// addition" in model.go); Flink's fields are never renamed or repurposed.
// Flink's versioned prefix /v1 is accepted as well.
//
// Asynchronous operations (checkpoint and savepoint triggers, stop with
// savepoint) answer 202 with a request-id at once; the blocking core call
// runs on its own goroutine and its result is kept for storeDuration after
// it finished. Handler.Close cancels the calls still running and waits for
// them.
package restapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

const (
	// maxOperations bounds the asynchronous operations kept at once.
	maxOperations = 1024
	// storeDuration is how long a finished operation's result stays
	// available, Flink's rest.async.store-duration default.
	storeDuration = 5 * time.Minute
	// maxBodyBytes bounds request bodies.
	maxBodyBytes = 1 << 20
	// flinkVersion is the Flink release whose REST API this package follows.
	flinkVersion = "1.15"
)

// Handler serves the REST API. It is safe for concurrent use.
type Handler struct {
	api weirv1.ClientServiceServer
	log *slog.Logger
	ops *operations
	now func() time.Time
	mux *http.ServeMux

	closeOnce sync.Once
}

// New returns a Handler serving Flink's REST API from api, typically the
// *jobmanager.Server itself. Call Close when done with it.
func New(api weirv1.ClientServiceServer, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.Default()
	}
	h := &Handler{api: api, log: log.With("component", "restapi"), now: time.Now}
	h.ops = newOperations(maxOperations, storeDuration, func() time.Time { return h.now() })
	h.mux = http.NewServeMux()
	h.handle("GET /overview", h.getOverview)
	h.handle("GET /config", h.getDashboardConfig)
	h.handle("GET /jobmanager/config", h.getJobManagerConfig)
	h.handle("GET /taskmanagers", h.getTaskManagers)
	h.handle("GET /taskmanagers/{taskmanagerid}", h.getTaskManager)
	h.handle("GET /jobs", h.getJobs)
	h.handle("GET /jobs/overview", h.getJobsOverview)
	h.handle("GET /jobs/{jobid}", h.getJob)
	h.handle("PATCH /jobs/{jobid}", h.patchJob)
	h.handle("GET /jobs/{jobid}/config", h.getJobConfig)
	h.handle("GET /jobs/{jobid}/exceptions", h.getJobExceptions)
	h.handle("GET /jobs/{jobid}/plan", h.getJobPlan)
	h.handle("GET /jobs/{jobid}/resource-requirements", h.getResourceRequirements)
	h.handle("PUT /jobs/{jobid}/resource-requirements", h.putResourceRequirements)
	h.handle("GET /jobs/{jobid}/checkpoints", h.getCheckpoints)
	h.handle("POST /jobs/{jobid}/checkpoints", h.postCheckpoint)
	h.handle("GET /jobs/{jobid}/checkpoints/config", h.getCheckpointConfig)
	h.handle("PATCH /jobs/{jobid}/checkpoints/config", h.patchCheckpointConfig)
	h.handle("GET /jobs/{jobid}/checkpoints/details/{checkpointid}", h.getCheckpointDetails)
	h.handle("GET /jobs/{jobid}/checkpoints/details/{checkpointid}/subtasks/{vertexid}", h.getCheckpointSubtasks)
	h.handle("GET /jobs/{jobid}/checkpoints/{triggerid}", h.getCheckpointStatus)
	h.handle("POST /jobs/{jobid}/savepoints", h.postSavepoint)
	h.handle("GET /jobs/{jobid}/savepoints/{triggerid}", h.getSavepointStatus)
	h.handle("POST /jobs/{jobid}/stop", h.postStop)
	h.handle("POST /savepoint-disposal", h.postSavepointDisposal)
	h.handle("GET /savepoint-disposal/{triggerid}", h.getSavepointDisposalStatus)
	h.handle("GET /jobs/{jobid}/vertices/{vertexid}", h.getVertexDetails)
	h.handle("GET /jobs/{jobid}/vertices/{vertexid}/backpressure", h.getVertexBackPressure)
	h.handle("GET /jobs/{jobid}/vertices/{vertexid}/watermarks", h.getVertexWatermarks)
	h.handle("GET /jobs/{jobid}/watermarks", h.getJobWatermarks)
	return h
}

// Close stops accepting asynchronous operations, cancels the ones still
// running and waits for their goroutines. Requests that trigger an
// operation after Close get 503.
func (h *Handler) Close() {
	h.closeOnce.Do(h.ops.close)
}

// ---------------------------------------------------------------------------
// Routing

// handlerFunc serves a request the mux routed to it; the error it returns
// becomes Flink's error body.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (h *Handler) handle(pattern string, fn handlerFunc) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			code, msg := httpError(err)
			h.writeError(w, r, code, msg)
		}
	})
}

// ServeHTTP answers every error, routing's included, with Flink's JSON
// error body.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rr := routable(r)
	handler, pattern := h.mux.Handler(rr)
	if pattern != "" {
		// Handler only finds the route; ServeHTTP also sets the path
		// values the handlers read.
		h.mux.ServeHTTP(w, rr)
		return
	}
	// The mux answers an unknown path and a wrong method itself, in plain
	// text; its answer tells the two apart and carries the Allow header,
	// the body is Flink's.
	var ans muxAnswer
	handler.ServeHTTP(&ans, rr)
	if ans.code == http.StatusMethodNotAllowed {
		allowed := ans.Header().Get("Allow")
		w.Header().Set("Allow", allowed)
		h.writeError(w, r, http.StatusMethodNotAllowed,
			fmt.Sprintf("method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allowed))
		return
	}
	h.writeError(w, r, http.StatusNotFound, fmt.Sprintf("Not found: %s", r.URL.Path))
}

// routable returns r with the path the routes are registered under:
// without Flink's optional /v1 prefix and without a trailing slash, which
// Flink tolerates. The path is cleaned here because the mux would answer
// an unclean one with a redirect, which REST clients do not follow for
// PUT or PATCH.
func routable(r *http.Request) *http.Request {
	escaped := path.Clean("/" + r.URL.EscapedPath())
	switch {
	case escaped == "/v1":
		escaped = "/"
	case strings.HasPrefix(escaped, "/v1/"):
		escaped = strings.TrimPrefix(escaped, "/v1")
	}
	if escaped == r.URL.EscapedPath() {
		return r
	}
	unescaped, err := url.PathUnescape(escaped)
	if err != nil {
		// Cannot happen: escaped is a cleaned valid escaped path. The
		// mux answers the original path then.
		return r
	}
	u := *r.URL
	u.Path, u.RawPath = unescaped, escaped
	rr := r.WithContext(r.Context())
	rr.URL = &u
	return rr
}

// muxAnswer records the status and headers of the mux's own answer, and
// drops its body.
type muxAnswer struct {
	header http.Header
	code   int
}

func (a *muxAnswer) Header() http.Header {
	if a.header == nil {
		a.header = http.Header{}
	}
	return a.header
}

func (a *muxAnswer) WriteHeader(code int) {
	if a.code == 0 {
		a.code = code
	}
}

func (a *muxAnswer) Write(b []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return len(b), nil
}

// ---------------------------------------------------------------------------
// Errors

// restError is an error with the HTTP status to answer it with.
type restError struct {
	code int
	msg  string
}

func (e *restError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &restError{code: code, msg: fmt.Sprintf(format, args...)}
}

// httpStatus maps a gRPC status code to the HTTP status that answers it.
func httpStatus(c codes.Code) int {
	switch c {
	case codes.NotFound:
		return http.StatusNotFound
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.FailedPrecondition:
		return http.StatusConflict
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func httpError(err error) (int, string) {
	var re *restError
	if errors.As(err, &re) {
		return re.code, re.msg
	}
	if st, ok := status.FromError(err); ok {
		return httpStatus(st.Code()), st.Message()
	}
	return http.StatusInternalServerError, err.Error()
}

func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if code >= 500 {
		h.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "status", code, "err", msg)
	} else {
		h.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "status", code, "err", msg)
	}
	h.writeJSON(w, code, errorResponseBody{Errors: []string{msg}})
}

func (h *Handler) writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		h.log.Error("encoding response failed", "err", err)
		code = http.StatusInternalServerError
		b = []byte(`{"errors":["internal error: encoding the response failed"]}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// ---------------------------------------------------------------------------
// Parameters and bodies

var hex32 = regexp.MustCompile(`^[0-9a-fA-F]{32}$`)

func jobIDParam(r *http.Request) (string, error) {
	id := r.PathValue("jobid")
	if !hex32.MatchString(id) {
		return "", errorf(http.StatusBadRequest, "bad job ID %q: a job ID is a 32-character hexadecimal string", id)
	}
	return strings.ToLower(id), nil
}

func triggerIDParam(r *http.Request) (string, error) {
	id := r.PathValue("triggerid")
	if !hex32.MatchString(id) {
		return "", errorf(http.StatusBadRequest, "bad trigger ID %q: a trigger ID is the 32-character hexadecimal request-id a trigger returned", id)
	}
	return strings.ToLower(id), nil
}

func checkpointIDParam(r *http.Request) (int64, error) {
	raw := r.PathValue("checkpointid")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 0 {
		return 0, errorf(http.StatusBadRequest, "bad checkpoint ID %q: a checkpoint ID is a non-negative integer", raw)
	}
	return id, nil
}

// fieldHints point at the field a misspelt one most likely meant: Flink's
// savepoint and stop bodies spell the same things differently.
var fieldHints = map[string]string{
	"targetDirectory": "target-directory", "target-directory": "targetDirectory",
	"cancelJob": "cancel-job", "cancel_job": "cancel-job", "target_directory": "target-directory",
	"trigger-id": "triggerId", "checkpoint-type": "checkpointType", "type": "checkpointType",
	// GET .../checkpoints/config writes min_pause; Weir's PATCH of it
	// takes Flink's configuration key's spelling.
	"min_pause": "min-pause", "minPause": "min-pause",
}

// decodeBody decodes a JSON request body into v strictly: unknown fields
// and type mismatches are errors. An empty body is an empty object, as in
// Flink.
func decodeBody(r *http.Request, name string, v any) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return errorf(http.StatusBadRequest, "reading the request body: %v", err)
	}
	if len(data) > maxBodyBytes {
		return errorf(http.StatusRequestEntityTooLarge, "request body exceeds %d bytes", maxBodyBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("unexpected data after the JSON object")
	}
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return errorf(http.StatusBadRequest, "request body does not match %s: field %q must be %s, got a JSON %s",
			name, typeErr.Field, typeErr.Type.String(), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return errorf(http.StatusBadRequest, "request body is not valid JSON (%v at byte %d); expected %s", syntaxErr, syntaxErr.Offset, name)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "request body is not valid JSON (it ends early); expected %s", name)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		msg := fmt.Sprintf("request body does not match %s: unknown field %q", name, field)
		if hint, ok := fieldHints[field]; ok && hasJSONField(v, hint) {
			msg += fmt.Sprintf(" (did you mean %q?)", hint)
		}
		return errorf(http.StatusBadRequest, "%s", msg)
	}
	return errorf(http.StatusBadRequest, "request body does not match %s: %v", name, err)
}

// hasJSONField reports whether the struct v points at has a field with
// JSON name name.
func hasJSONField(v any, name string) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	_, ok := m[name]
	return ok
}

func optionalTriggerID(id *string) (string, error) {
	if id == nil || *id == "" {
		return newTriggerID(), nil
	}
	if !hex32.MatchString(*id) {
		return "", errorf(http.StatusBadRequest, "bad triggerId %q: a trigger ID is a 32-character hexadecimal string", *id)
	}
	return strings.ToLower(*id), nil
}

// ---------------------------------------------------------------------------
// Cluster

func buildInfo() (version, commit string) {
	version, commit = "unknown", "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, commit
	}
	if bi.Main.Version != "" {
		version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			commit = s.Value
		}
	}
	return version, commit
}

func (h *Handler) getOverview(w http.ResponseWriter, r *http.Request) error {
	tms, err := h.api.ListTaskManagers(r.Context(), &weirv1.ListTaskManagersRequest{})
	if err != nil {
		return err
	}
	jobs, err := h.api.ListJobs(r.Context(), &weirv1.ListJobsRequest{})
	if err != nil {
		return err
	}
	version, commit := buildInfo()
	out := clusterOverview{FlinkVersion: flinkVersion, FlinkCommit: commit, WeirVersion: version}
	for _, tm := range tms.GetTaskmanagers() {
		out.TaskManagers++
		out.SlotsTotal += int(tm.GetSlots())
		out.SlotsAvailable += int(tm.GetFreeSlots())
	}
	for _, j := range jobs.GetJobs() {
		switch j.GetState() {
		case weirv1.JobState_JOB_STATE_FINISHED:
			out.JobsFinished++
		case weirv1.JobState_JOB_STATE_CANCELED:
			out.JobsCancelled++
		case weirv1.JobState_JOB_STATE_FAILED:
			out.JobsFailed++
		default: // Flink counts every job that is not globally terminal
			out.JobsRunning++
		}
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *Handler) getTaskManagers(w http.ResponseWriter, r *http.Request) error {
	resp, err := h.api.ListTaskManagers(r.Context(), &weirv1.ListTaskManagersRequest{})
	if err != nil {
		return err
	}
	out := taskManagersInfo{TaskManagers: []taskManagerInfo{}}
	for _, tm := range resp.GetTaskmanagers() {
		out.TaskManagers = append(out.TaskManagers, toTaskManagerInfo(tm))
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

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

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
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

const (
	// maxOperations bounds the asynchronous operations kept at once.
	maxOperations = 1024
	// storeDuration is how long a finished operation's result stays
	// available, Flink's rest.async.store-duration default.
	storeDuration = 5 * time.Minute
	// maxBodyBytes bounds request bodies: a trigger, a disposal or a
	// checkpointing change is a few fields, a path and a trigger ID.
	maxBodyBytes = 64 << 10
	// maxRescaleBodyBytes bounds a resource-requirements body, which
	// has an entry per vertex.
	maxRescaleBodyBytes = 1 << 20
	// flinkVersion is the Flink release whose REST API this package follows.
	flinkVersion = "1.15"
)

// Handler serves the REST API. It is safe for concurrent use.
type Handler struct {
	api weirv1grpc.ClientServiceServer
	log *slog.Logger
	ops *operations
	now func() time.Time
	mux *http.ServeMux

	closeOnce sync.Once
}

// New returns a Handler serving Flink's REST API from api, typically the
// *jobmanager.Server itself. Call Close when done with it.
func New(api weirv1grpc.ClientServiceServer, log *slog.Logger) *Handler {
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
	h.handle("GET /jobs/{jobid}/autoscaler", h.getJobAutoscaler)
	h.handle("GET /jobs/{jobid}/plan", h.getJobPlan)
	h.handle("GET /jobs/{jobid}/resource-requirements", h.getResourceRequirements)
	h.handleLimit("PUT /jobs/{jobid}/resource-requirements", maxRescaleBodyBytes, h.putResourceRequirements)
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
	h.handleLimit(pattern, maxBodyBytes, fn)
}

// handleLimit routes pattern to fn, refusing request bodies over limit
// bytes with 413: one declared larger before anything is read, a chunked
// one when reading it passes the limit. The body is bounded for every
// route, so none can be made to buffer more.
func (h *Handler) handleLimit(pattern string, limit int64, fn handlerFunc) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			h.writeError(w, r, http.StatusRequestEntityTooLarge, bodyTooLarge(limit))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
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

// bodyTooLarge is the message of a 413.
func bodyTooLarge(limit int64) string {
	return fmt.Sprintf("request body too large: this endpoint accepts at most %d bytes", limit)
}

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

package restapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/restapi"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// fuzzAPI is the fixture's client API with the asynchronous operations
// answered at once, so a fuzzed trigger finishes and its goroutine ends.
type fuzzAPI struct{ *fakeAPI }

func (fuzzAPI) TriggerCheckpoint(context.Context, *weirv1.TriggerCheckpointRequest) (*weirv1.TriggerCheckpointResponse, error) {
	return &weirv1.TriggerCheckpointResponse{CheckpointId: 8}, nil
}

func (fuzzAPI) TriggerSavepoint(_ context.Context, req *weirv1.TriggerSavepointRequest) (*weirv1.TriggerSavepointResponse, error) {
	return &weirv1.TriggerSavepointResponse{CheckpointId: 8, ExternalPath: req.GetTargetDirectory() + "/savepoint-8"}, nil
}

func (fuzzAPI) StopWithSavepoint(_ context.Context, req *weirv1.StopWithSavepointRequest) (*weirv1.StopWithSavepointResponse, error) {
	return &weirv1.StopWithSavepointResponse{CheckpointId: 8, ExternalPath: req.GetTargetDirectory() + "/savepoint-8"}, nil
}

func (fuzzAPI) DisposeSavepoint(context.Context, *weirv1.DisposeSavepointRequest) (*weirv1.DisposeSavepointResponse, error) {
	return &weirv1.DisposeSavepointResponse{}, nil
}

func (fuzzAPI) CancelJob(context.Context, *weirv1.CancelJobRequest) (*weirv1.CancelJobResponse, error) {
	return &weirv1.CancelJobResponse{}, nil
}

// fuzzRoutes are the requests that carry a body (and PATCH /jobs/{id},
// which takes none but is sent one by some clients).
var fuzzRoutes = []struct{ method, path string }{
	{http.MethodPost, "/jobs/" + fakeJob + "/checkpoints"},
	{http.MethodPost, "/jobs/" + fakeJob + "/savepoints"},
	{http.MethodPost, "/jobs/" + fakeJob + "/stop"},
	{http.MethodPost, "/savepoint-disposal"},
	{http.MethodPut, "/jobs/" + fakeJob + "/resource-requirements"},
	{http.MethodPatch, "/jobs/" + fakeJob + "/checkpoints/config"},
	{http.MethodPatch, "/v1/jobs/" + fakeJob + "?mode=cancel"},
}

// FuzzRequestBodies sends arbitrary bodies to every endpoint that reads
// one, through the real handler: whatever the body, the answer is JSON,
// an error is Flink's {"errors": [...]} with a 4xx status, never a 5xx or
// a panic, and only a well-formed body is accepted.
func FuzzRequestBodies(f *testing.F) {
	sumID := restapi.VertexID(fakeJob, "sum")
	seeds := map[int][]string{
		0: {``, `{}`, `{"checkpointType": "FULL"}`, `{"checkpointType": "incremental", "triggerId": "0123456789abcdef0123456789abcdef"}`, `{"checkpointType": "SAVEPOINT"}`, `{"checkpoint-type": "FULL"}`},
		1: {`{"target-directory": "/savepoints", "cancel-job": false}`, `{"target-directory": "s3://bucket/sp", "cancel-job": true, "formatType": "CANONICAL"}`, `{"targetDirectory": "/tmp"}`, `{"triggerId": "not hex"}`, `{"cancel-job": "yes"}`},
		2: {`{"targetDirectory": "/savepoints", "drain": true}`, `{"targetDirectory": null}`, `{"target-directory": "/tmp"}`, `{"drain": 1}`},
		3: {`{"savepoint-path": "/savepoints/savepoint-0123ab-8"}`, `{"savepoint-path": "/savepoints/../../etc"}`, `{}`, `{"savepoint-path": ""}`, `[]`},
		4: {`{"` + sumID + `": {"parallelism": {"lowerBound": 1, "upperBound": 3}}}`, `{"sum": {"parallelism": {"lowerBound": 1, "upperBound": 2}}}`, `{"sum": {"parallelism": {"lowerBound": 0, "upperBound": -1}}}`, `{"nope": {}}`, `{"sum": {"parallelism": {"upperBound": 99999999999}}}`},
		5: {`{"interval": 1000}`, `{"interval": 0, "timeout": 60000, "min-pause": 10, "interval-during-backlog": 5000}`, `{"interval": -1}`, `{"timeout": 9223372036854775807}`, `{"min_pause": 1}`, `{"interval": 1.5}`},
		6: {``, `{}`, `garbage`},
	}
	for route, bodies := range seeds {
		for _, b := range bodies {
			f.Add(uint8(route), []byte(b))
		}
	}
	f.Add(uint8(1), []byte(`{"target-directory": "/a"} {"target-directory": "/b"}`))
	f.Add(uint8(4), []byte(`{"sum": {"parallelism": {"lowerBound": 1, "upperBound": 3}}, "sum": null}`))
	f.Add(uint8(5), []byte("\xef\xbb\xbf{\"interval\": 1000}"))
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		h := restapi.New(fuzzAPI{newFakeAPI()}, testLogger())
		defer h.Close()
		req := httptest.NewRequest(rt.method, rt.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		code, out := rec.Code, rec.Body.Bytes()
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("%s %s answered %d with Content-Type %q", rt.method, rt.path, code, ct)
		}
		if !json.Valid(out) {
			t.Fatalf("%s %s answered %d with invalid JSON %q", rt.method, rt.path, code, out)
		}
		if code >= 500 {
			t.Fatalf("%s %s with body %q answered %d: %s", rt.method, rt.path, body, code, out)
		}
		if code >= 400 {
			var e struct {
				Errors []string `json:"errors"`
			}
			if err := json.Unmarshal(out, &e); err != nil || len(e.Errors) == 0 || e.Errors[0] == "" {
				t.Fatalf("%s %s answered %d without Flink's error body: %s", rt.method, rt.path, code, out)
			}
			return
		}
		// PATCH /jobs/{id} reads no body; every other route accepted
		// what it decoded.
		if trimmed := bytes.TrimSpace(body); rt.method != http.MethodPatch || strings.Contains(rt.path, "/checkpoints/config") {
			if len(trimmed) > 0 && !json.Valid(trimmed) {
				t.Fatalf("%s %s accepted (%d) a body that is not JSON: %q", rt.method, rt.path, code, body)
			}
		}
	})
}

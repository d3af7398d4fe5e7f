package restapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/restapi"
)

// TestRequestBodyLimits: a body over its endpoint's limit answers 413 with
// Flink's error body naming the limit, whether its size is declared or it
// comes chunked; one at the limit is read as usual. Endpoints that read no
// body refuse an oversized one too.
func TestRequestBodyLimits(t *testing.T) {
	c := serve(t, fuzzAPI{newFakeAPI()})
	const small, rescale = 64 << 10, 1 << 20
	// pad makes body exactly n bytes long with trailing whitespace, which
	// JSON allows.
	pad := func(body string, n int) string { return body + strings.Repeat(" ", n-len(body)) }
	savepoint := `{"target-directory": "/savepoints"}`
	rescaleBody := `{"` + restapi.VertexID(fakeJob, "sum") + `": {"parallelism": {"lowerBound": 1, "upperBound": 2}}}`
	for _, tc := range []struct {
		name, method, path, body string
		chunked                  bool
		code                     int
	}{
		{"savepoint at the limit", "POST", "/jobs/" + fakeJob + "/savepoints", pad(savepoint, small), false, http.StatusAccepted},
		{"savepoint over the limit", "POST", "/jobs/" + fakeJob + "/savepoints", pad(savepoint, small+1), false, http.StatusRequestEntityTooLarge},
		{"savepoint over the limit, chunked", "POST", "/jobs/" + fakeJob + "/savepoints", pad(savepoint, small+1), true, http.StatusRequestEntityTooLarge},
		{"stop over the limit", "POST", "/jobs/" + fakeJob + "/stop", pad(`{}`, 4*small), false, http.StatusRequestEntityTooLarge},
		{"checkpoint over the limit, chunked", "POST", "/jobs/" + fakeJob + "/checkpoints", pad(`{}`, 4*small), true, http.StatusRequestEntityTooLarge},
		{"disposal over the limit", "POST", "/savepoint-disposal", pad(`{"savepoint-path": "/sp"}`, small+1), false, http.StatusRequestEntityTooLarge},
		{"checkpoint config over the limit", "PATCH", "/jobs/" + fakeJob + "/checkpoints/config", pad(`{"interval": 1000}`, small+1), false, http.StatusRequestEntityTooLarge},
		{"rescale above the small limit", "PUT", "/jobs/" + fakeJob + "/resource-requirements", pad(rescaleBody, 4*small), false, http.StatusOK},
		{"rescale over its limit", "PUT", "/jobs/" + fakeJob + "/resource-requirements", pad(rescaleBody, rescale+1), false, http.StatusRequestEntityTooLarge},
		{"rescale over its limit, chunked", "PUT", "/jobs/" + fakeJob + "/resource-requirements", pad(rescaleBody, rescale+1), true, http.StatusRequestEntityTooLarge},
		{"cancel with a body", "PATCH", "/jobs/" + fakeJob, pad(``, small+1), false, http.StatusRequestEntityTooLarge},
		{"a GET with a body", "GET", "/jobs/" + fakeJob, pad(``, small+1), false, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				// Without a known length the client sends it chunked.
				body = struct{ io.Reader }{body}
			}
			req, err := http.NewRequest(tc.method, c.url+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, raw)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			if tc.code != http.StatusRequestEntityTooLarge {
				return
			}
			var e struct {
				Errors []string `json:"errors"`
			}
			if err := json.Unmarshal(raw, &e); err != nil || len(e.Errors) != 1 {
				t.Fatalf("413 body %s (%v), want Flink's error body", raw, err)
			}
			limit := "65536"
			if strings.Contains(tc.path, "resource-requirements") {
				limit = "1048576"
			}
			if msg := e.Errors[0]; !strings.Contains(msg, "too large") || !strings.Contains(msg, limit+" bytes") {
				t.Errorf("error %q does not say the body is too large for the limit of %s bytes", msg, limit)
			}
		})
	}
}

// TestBodyWithTrailingData: a body is one JSON value; anything after it,
// a stray closing bracket included, is refused rather than ignored.
func TestBodyWithTrailingData(t *testing.T) {
	c := serve(t, fuzzAPI{newFakeAPI()})
	for _, body := range []string{`null}`, `{"drain": true}}`, `{"drain": true}]`, `{} {}`, `{"drain": true} x`} {
		r := c.do(http.MethodPost, "/jobs/"+fakeJob+"/stop", body)
		if r.code != http.StatusBadRequest || !strings.Contains(r.raw, "unexpected data after the JSON object") {
			t.Errorf("POST stop %s: %d %s, want 400 naming the trailing data", body, r.code, r.raw)
		}
	}
	if r := c.do(http.MethodPost, "/jobs/"+fakeJob+"/stop", "{\"drain\": true}\n\t "); r.code != http.StatusAccepted {
		t.Errorf("trailing whitespace: %d %s, want 202", r.code, r.raw)
	}
}

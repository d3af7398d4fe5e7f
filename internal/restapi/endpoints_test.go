package restapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirproject/weir/internal/restapi"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// fakeAPI is a client API answering from a fixed job and TaskManagers,
// recording the rescales and checkpointing changes asked of it: the
// answers of the core are exact, where a real cluster's depend on timing.
type fakeAPI struct {
	weirv1grpc.UnimplementedClientServiceServer

	mu         sync.Mutex
	job        *weirv1.JobInfo
	tms        []*weirv1.TaskManagerInfo
	rescales   []*weirv1.RescaleJobRequest
	configures []*weirv1.ConfigureCheckpointingRequest
	rescaleErr error
}

func (f *fakeAPI) GetJob(_ context.Context, req *weirv1.GetJobRequest) (*weirv1.GetJobResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.GetJobId() != f.job.GetId() {
		return nil, status.Errorf(codes.NotFound, "no job %s", req.GetJobId())
	}
	return &weirv1.GetJobResponse{Job: proto.Clone(f.job).(*weirv1.JobInfo)}, nil
}

func (f *fakeAPI) ListJobs(context.Context, *weirv1.ListJobsRequest) (*weirv1.ListJobsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &weirv1.ListJobsResponse{Jobs: []*weirv1.JobInfo{proto.Clone(f.job).(*weirv1.JobInfo)}}, nil
}

func (f *fakeAPI) ListTaskManagers(context.Context, *weirv1.ListTaskManagersRequest) (*weirv1.ListTaskManagersResponse, error) {
	return &weirv1.ListTaskManagersResponse{Taskmanagers: f.tms}, nil
}

func (f *fakeAPI) RescaleJob(_ context.Context, req *weirv1.RescaleJobRequest) (*weirv1.RescaleJobResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rescales = append(f.rescales, req)
	if f.rescaleErr != nil {
		return nil, f.rescaleErr
	}
	return &weirv1.RescaleJobResponse{CheckpointId: 7}, nil
}

func (f *fakeAPI) ConfigureCheckpointing(_ context.Context, req *weirv1.ConfigureCheckpointingRequest) (*weirv1.ConfigureCheckpointingResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configures = append(f.configures, req)
	cp := f.job.GetGraph().GetCheckpointing()
	if req.GetInterval() != nil {
		cp.Interval = req.GetInterval()
	}
	if req.GetTimeout() != nil {
		cp.Timeout = req.GetTimeout()
	}
	if req.GetMinPause() != nil {
		cp.MinPause = req.GetMinPause()
	}
	return &weirv1.ConfigureCheckpointingResponse{Checkpointing: proto.Clone(cp).(*weirv1.CheckpointConfig)}, nil
}

// configuredAPI is a fakeAPI that lists its configuration, as the
// JobManager does.
type configuredAPI struct {
	*fakeAPI
	config map[string]string
}

func (c configuredAPI) Configuration() map[string]string { return c.config }

const (
	fakeJob     = "0123456789abcdef0123456789abcdef"
	unknownJob  = "ffffffffffffffffffffffffffffffff"
	fakeStartMs = int64(1_700_000_000_000)
)

func running(index int32, tm string, region int32) *weirv1.SubtaskInfo {
	return &weirv1.SubtaskInfo{
		Index: index, State: weirv1.ExecutionState_EXECUTION_STATE_RUNNING, TaskmanagerId: tm, Region: region,
		StartTimeMs: fakeStartMs + 100,
	}
}

// newFakeAPI holds a running job of source (2) → hash → sum (2) →
// rebalance → sink (1), which failed three times, on TaskManagers tm-1
// and tm-2; tm-gone, where it failed once, has left.
func newFakeAPI() *fakeAPI {
	graph := &weirv1.JobGraph{
		Name: "fixture", MaxParallelism: 128,
		Vertices: []*weirv1.JobVertex{
			{Name: "source", Operator: "sequence-source", Parallelism: 2},
			{Name: "sum", Operator: "keyed-sum", Parallelism: 2, Inputs: []*weirv1.JobEdge{{Source: "source", Partitioner: weirv1.Partitioner_PARTITIONER_HASH}}},
			{Name: "sink", Operator: "file-sink", Parallelism: 1, Inputs: []*weirv1.JobEdge{{Source: "sum", Partitioner: weirv1.Partitioner_PARTITIONER_REBALANCE}}},
		},
		Checkpointing: &weirv1.CheckpointConfig{
			Interval: durationpb.New(time.Second), Timeout: durationpb.New(10 * time.Minute), MaxConcurrent: 1,
			Mode: weirv1.CheckpointingMode_CHECKPOINTING_MODE_EXACTLY_ONCE, Retained: 1,
		},
		RestartStrategy: &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_FIXED_DELAY, Attempts: 3, Delay: durationpb.New(2 * time.Second)},
	}
	sum1 := running(1, "tm-gone", 1)
	sum1.State, sum1.FailureCause, sum1.EndTimeMs = weirv1.ExecutionState_EXECUTION_STATE_FAILED, "sum: division by zero", fakeStartMs+900
	source0 := running(0, "tm-1", 0)
	source0.Attempt = 1
	source0.Load = &weirv1.SubtaskInfo_Load{RecordsIn: 0, RecordsOut: 42, RecordsOutPerSecond: 4.5, BusyMs: 9}
	job := &weirv1.JobInfo{
		Id: fakeJob, Name: "fixture", State: weirv1.JobState_JOB_STATE_RUNNING, StartTimeMs: fakeStartMs, Graph: graph, Restarts: 3,
		Vertices: []*weirv1.VertexInfo{
			// Subtasks out of order: the answers sort them.
			{Name: "source", Operator: "sequence-source", Parallelism: 2, Subtasks: []*weirv1.SubtaskInfo{running(1, "tm-2", 1), source0}},
			{Name: "sum", Operator: "keyed-sum", Parallelism: 2, Subtasks: []*weirv1.SubtaskInfo{running(0, "tm-1", 0), sum1}},
			{Name: "sink", Operator: "file-sink", Parallelism: 1, Subtasks: []*weirv1.SubtaskInfo{{Index: 0, State: weirv1.ExecutionState_EXECUTION_STATE_SCHEDULED}}},
		},
		Exceptions: []*weirv1.JobException{ // oldest first
			{TimestampMs: fakeStartMs + 10, Task: "sum (2/2)", TaskmanagerId: "tm-gone", Cause: "lost TaskManager tm-gone", Regions: []int32{1}},
			{TimestampMs: fakeStartMs + 20, Cause: "coordinator failure", FullRestart: true},
			{TimestampMs: fakeStartMs + 30, Task: "source (1/2)", TaskmanagerId: "tm-1", Cause: "source: connection refused", Regions: []int32{0}},
		},
	}
	return &fakeAPI{
		job: job,
		tms: []*weirv1.TaskManagerInfo{
			{Id: "tm-1", Address: "10.0.0.1:6121", Slots: 2, FreeSlots: 0, LastHeartbeatMs: fakeStartMs + 500, HttpAddress: "10.0.0.1:9249"},
			{Id: "tm-2", Address: "10.0.0.2:6121", Slots: 2, FreeSlots: 1, LastHeartbeatMs: fakeStartMs + 600},
		},
	}
}

// serve starts the REST handler in front of api; the cluster it returns
// has no JobManager, only the helpers that talk HTTP.
func serve(t *testing.T, api weirv1grpc.ClientServiceServer) *cluster {
	t.Helper()
	h := restapi.New(api, testLogger())
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.Close()
		h.Close()
	})
	return &cluster{t: t, url: ts.URL}
}

// getAny fetches path, requires 200 and JSON, and returns the decoded
// body, whatever its type.
func (c *cluster) getAny(path string) any {
	c.t.Helper()
	resp, err := http.Get(c.url + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		c.t.Fatalf("GET %s: %d %s %s, want 200 JSON", path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		c.t.Fatalf("GET %s: %v\n%s", path, err, raw)
	}
	return v
}

type errorCase struct {
	method, path, body string
	code               int
	mention            string
	// allow is the Allow header a 405 must carry.
	allow string
}

// checkErrors requires each case to fail with its status and Flink's
// error body alone, mentioning what it should.
func (c *cluster) checkErrors(cases []errorCase) {
	c.t.Helper()
	for _, tc := range cases {
		r := c.do(tc.method, tc.path, tc.body)
		if r.code != tc.code {
			c.t.Errorf("%s %s %s: status %d, want %d: %s", tc.method, tc.path, tc.body, r.code, tc.code, r.raw)
			continue
		}
		errs, _ := r.body["errors"].([]any)
		if len(r.body) != 1 || len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0]), tc.mention) {
			c.t.Errorf("%s %s %s: %s, want only errors mentioning %q", tc.method, tc.path, tc.body, r.raw, tc.mention)
		}
		if got := r.header.Get("Allow"); got != tc.allow {
			c.t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}
}

func TestRouting(t *testing.T) {
	c := serve(t, newFakeAPI())
	// Flink's /v1 prefix, a trailing slash and doubled slashes are
	// tolerated; the most specific pattern wins.
	for _, path := range []string{"/v1/jobs/" + fakeJob + "/plan", "/jobs/" + fakeJob + "/plan/", "/v1//jobs/" + fakeJob + "//plan/"} {
		if b := c.get(path, http.StatusOK); obj(t, path, b["plan"])["jid"] != fakeJob {
			t.Errorf("GET %s = %v", path, b)
		}
	}
	if jobs := arr(t, "jobs", c.get("/v1/jobs/overview/", http.StatusOK)["jobs"]); len(jobs) != 1 {
		t.Errorf("jobs/overview = %v, want the job's details", jobs)
	}
	c.checkErrors([]errorCase{
		{method: "GET", path: "/", code: 404, mention: "Not found: /"},
		{method: "GET", path: "/v1", code: 404, mention: "/v1"},
		{method: "GET", path: "/v2/overview", code: 404, mention: "/v2/overview"},
		{method: "GET", path: "/jobs/" + fakeJob + "/plan/extra", code: 404, mention: "/plan/extra"},
		{method: "DELETE", path: "/v1/jobs/" + fakeJob + "/", code: 405, mention: "DELETE", allow: "GET, HEAD, PATCH"},
		{method: "PUT", path: "/jobs/" + fakeJob + "/checkpoints/config", code: 405, mention: "PUT", allow: "GET, HEAD, PATCH"},
	})
}

func TestJobExceptions(t *testing.T) {
	c := serve(t, newFakeAPI())
	b := c.get("/jobs/"+fakeJob+"/exceptions", http.StatusOK)
	requireKeys(t, "JobExceptionsInfoWithHistory", b, "root-exception", "timestamp", "all-exceptions", "truncated", "exceptionHistory")
	if b["root-exception"] != "source: connection refused" || num(t, "timestamp", b["timestamp"]) != fakeStartMs+30 || b["truncated"] != false {
		t.Errorf("root exception = %v", b)
	}
	all := arr(t, "all-exceptions", b["all-exceptions"])
	if len(all) != 1 {
		t.Fatalf("all-exceptions = %v, want the failed attempt of sum", all)
	}
	e := obj(t, "all-exceptions[0]", all[0])
	requireKeys(t, "ExecutionExceptionInfo", e, "exception", "task", "location", "endpoint", "timestamp", "taskManagerId")
	if e["exception"] != "sum: division by zero" || e["task"] != "sum (2/2)" || e["endpoint"] != "" || num(t, "timestamp", e["timestamp"]) != fakeStartMs+900 {
		t.Errorf("all-exceptions[0] = %v", e)
	}

	history := obj(t, "exceptionHistory", b["exceptionHistory"])
	requireKeys(t, "exceptionHistory", history, "entries", "truncated")
	entries := arr(t, "entries", history["entries"])
	if len(entries) != 3 || history["truncated"] != false {
		t.Fatalf("exceptionHistory = %v, want 3 entries", history)
	}
	want := []struct {
		cause, task, endpoint, tm string
		ts                        int64
		regions                   []any
		full                      bool
	}{ // newest first
		{"source: connection refused", "source (1/2)", "10.0.0.1:6121", "tm-1", fakeStartMs + 30, []any{0.0}, false},
		{"coordinator failure", "", "", "", fakeStartMs + 20, []any{}, true},
		{"lost TaskManager tm-gone", "sum (2/2)", "", "tm-gone", fakeStartMs + 10, []any{1.0}, false},
	}
	for i, w := range want {
		m := obj(t, "entry", entries[i])
		requireKeys(t, fmt.Sprintf("entries[%d]", i), m, "exceptionName", "stacktrace", "timestamp", "taskName", "endpoint",
			"taskManagerId", "failureLabels", "concurrentExceptions", "regions", "full-restart")
		if m["stacktrace"] != w.cause || m["taskName"] != w.task || m["endpoint"] != w.endpoint || m["taskManagerId"] != w.tm ||
			num(t, "timestamp", m["timestamp"]) != w.ts || m["full-restart"] != w.full || !reflect.DeepEqual(m["regions"], w.regions) {
			t.Errorf("entries[%d] = %v, want %+v", i, m, w)
		}
		if m["exceptionName"] == "" || len(obj(t, "failureLabels", m["failureLabels"])) != 0 || len(arr(t, "concurrentExceptions", m["concurrentExceptions"])) != 0 {
			t.Errorf("entries[%d] = %v, want an exceptionName, no labels and no concurrent exceptions", i, m)
		}
	}

	// maxExceptions bounds both lists, as in Flink.
	b = c.get("/jobs/"+fakeJob+"/exceptions?maxExceptions=2", http.StatusOK)
	history = obj(t, "exceptionHistory", b["exceptionHistory"])
	if n := len(arr(t, "entries", history["entries"])); n != 2 || history["truncated"] != true {
		t.Errorf("exceptionHistory with maxExceptions=2 = %v, want 2 entries, truncated", history)
	}

	c.checkErrors([]errorCase{
		{method: "GET", path: "/jobs/" + unknownJob + "/exceptions", code: 404, mention: unknownJob},
		{method: "GET", path: "/jobs/" + fakeJob + "/exceptions?maxExceptions=0", code: 400, mention: "maxExceptions"},
		{method: "POST", path: "/jobs/" + fakeJob + "/exceptions", code: 405, mention: "POST", allow: "GET, HEAD"},
	})
}

func TestJobExceptionsOfAJobThatNeverFailed(t *testing.T) {
	api := newFakeAPI()
	api.job.Exceptions, api.job.Vertices[1].Subtasks[1] = nil, running(1, "tm-2", 1)
	b := serve(t, api).get("/jobs/"+fakeJob+"/exceptions", http.StatusOK)
	if b["root-exception"] != nil || b["timestamp"] != nil || len(arr(t, "all-exceptions", b["all-exceptions"])) != 0 {
		t.Errorf("exceptions = %v, want null root exception and none", b)
	}
	if entries := arr(t, "entries", obj(t, "exceptionHistory", b["exceptionHistory"])["entries"]); len(entries) != 0 {
		t.Errorf("entries = %v, want []", entries)
	}
}

func TestVertexDetails(t *testing.T) {
	c := serve(t, newFakeAPI())
	source := restapi.VertexID(fakeJob, "source")
	byID := c.get("/jobs/"+fakeJob+"/vertices/"+source, http.StatusOK)
	requireKeys(t, "JobVertexDetailsInfo", byID, "id", "name", "parallelism", "maxParallelism", "now", "subtasks")
	if byID["id"] != source || byID["name"] != "source" || num(t, "parallelism", byID["parallelism"]) != 2 ||
		num(t, "maxParallelism", byID["maxParallelism"]) != 128 || num(t, "now", byID["now"]) <= 0 {
		t.Errorf("vertex = %v", byID)
	}
	subtasks := arr(t, "subtasks", byID["subtasks"])
	if len(subtasks) != 2 {
		t.Fatalf("subtasks = %v", subtasks)
	}
	for i, s := range subtasks {
		m := obj(t, "subtask", s)
		requireKeys(t, fmt.Sprintf("subtasks[%d]", i), m, "subtask", "status", "attempt", "endpoint", "start-time", "end-time",
			"duration", "metrics", "taskmanager-id", "region")
		if num(t, "subtask", m["subtask"]) != int64(i) || m["status"] != "RUNNING" || num(t, "region", m["region"]) != int64(i) ||
			num(t, "start-time", m["start-time"]) != fakeStartMs+100 || num(t, "end-time", m["end-time"]) != -1 || num(t, "duration", m["duration"]) <= 0 {
			t.Errorf("subtasks[%d] = %v", i, m)
		}
		requireKeys(t, "metrics", obj(t, "metrics", m["metrics"]), "read-bytes", "read-bytes-complete", "write-bytes", "write-bytes-complete",
			"read-records", "read-records-complete", "write-records", "write-records-complete")
	}
	first := obj(t, "subtasks[0]", subtasks[0])
	metrics := obj(t, "metrics", first["metrics"])
	if first["endpoint"] != "10.0.0.1:6121" || first["taskmanager-id"] != "tm-1" || num(t, "attempt", first["attempt"]) != 1 ||
		num(t, "write-records", metrics["write-records"]) != 42 || metrics["write-records-complete"] != true {
		t.Errorf("subtasks[0] = %v", first)
	}
	if m := obj(t, "metrics", obj(t, "subtasks[1]", subtasks[1])["metrics"]); m["write-records-complete"] != false {
		t.Errorf("subtasks[1] metrics = %v, want incomplete without a report", m)
	}

	// A failed attempt on a TaskManager that left, and one not deployed.
	sum := obj(t, "sum subtask 1", arr(t, "subtasks", c.get("/jobs/"+fakeJob+"/vertices/sum", http.StatusOK)["subtasks"])[1])
	if sum["status"] != "FAILED" || sum["endpoint"] != "" || num(t, "duration", sum["duration"]) != 800 {
		t.Errorf("failed sum subtask = %v", sum)
	}
	sink := obj(t, "sink subtask 0", arr(t, "subtasks", c.get("/jobs/"+fakeJob+"/vertices/sink", http.StatusOK)["subtasks"])[0])
	if sink["status"] != "SCHEDULED" || sink["endpoint"] != "(unassigned)" || num(t, "start-time", sink["start-time"]) != -1 || num(t, "duration", sink["duration"]) != -1 {
		t.Errorf("scheduled sink subtask = %v", sink)
	}

	// By name, as the other vertex paths allow.
	byName := c.get("/jobs/"+fakeJob+"/vertices/source", http.StatusOK)
	if !reflect.DeepEqual(withoutNow(byID), withoutNow(byName)) {
		t.Errorf("by ID %v and by name %v differ", byID, byName)
	}

	c.checkErrors([]errorCase{
		{method: "GET", path: "/jobs/" + unknownJob + "/vertices/" + source, code: 404, mention: unknownJob},
		{method: "GET", path: "/jobs/" + fakeJob + "/vertices/nope", code: 404, mention: "nope"},
		{method: "GET", path: "/jobs/not-a-job/vertices/source", code: 400, mention: "not-a-job"},
		{method: "PATCH", path: "/jobs/" + fakeJob + "/vertices/source", code: 405, mention: "PATCH", allow: "GET, HEAD"},
	})
}

// withoutNow drops what a vertex's details measure against the clock;
// it changes m.
func withoutNow(m map[string]any) map[string]any {
	delete(m, "now")
	for _, s := range m["subtasks"].([]any) {
		delete(s.(map[string]any), "duration")
	}
	return m
}

// TestSQLJob: a job `weir sql` submitted shows its statement in its
// details, and each vertex's part of the plan as its plan node's
// description; other jobs have no statement and their vertices' names.
func TestSQLJob(t *testing.T) {
	const stmt = "INSERT INTO out\nSELECT k, v FROM s WHERE v < 10;"
	api := newFakeAPI()
	api.job.Graph.Sql = stmt
	api.job.Graph.Vertices[1].Description = "Calc(where=[v < 10], select=[k, v])"
	api.job.Graph.Vertices[1].ChangelogMode = "retract"
	c := serve(t, api)
	details := c.get("/jobs/"+fakeJob, http.StatusOK)
	if details["sql"] != stmt {
		t.Errorf("sql = %v, want the statement", details["sql"])
	}
	for _, b := range []map[string]any{details, c.get("/jobs/"+fakeJob+"/plan", http.StatusOK)} {
		nodes := arr(t, "nodes", obj(t, "plan", b["plan"])["nodes"])
		for i, want := range []string{"source", "Calc(where=[v < 10], select=[k, v])", "sink"} {
			if d := obj(t, "node", nodes[i])["description"]; d != want {
				t.Errorf("nodes[%d].description = %v, want %q", i, d, want)
			}
		}
		// A SQL vertex's changelog mode; none for others.
		if m := obj(t, "node", nodes[1])["changelog_mode"]; m != "retract" {
			t.Errorf("nodes[1].changelog_mode = %v, want retract", m)
		}
		if m, ok := obj(t, "node", nodes[0])["changelog_mode"]; ok {
			t.Errorf("nodes[0].changelog_mode = %v, want none", m)
		}
	}

	if _, ok := serve(t, newFakeAPI()).get("/jobs/"+fakeJob, http.StatusOK)["sql"]; ok {
		t.Error("a job with no SQL statement has a sql field")
	}
}

func TestJobPlan(t *testing.T) {
	c := serve(t, newFakeAPI())
	b := c.get("/jobs/"+fakeJob+"/plan", http.StatusOK)
	if len(b) != 1 {
		t.Errorf("JobPlanInfo = %v, want only plan", b)
	}
	plan := obj(t, "plan", b["plan"])
	requireKeys(t, "plan", plan, "jid", "name", "type", "nodes")
	if plan["jid"] != fakeJob || plan["name"] != "fixture" || plan["type"] != "STREAMING" {
		t.Errorf("plan = %v", plan)
	}
	nodes := arr(t, "nodes", plan["nodes"])
	if len(nodes) != 3 {
		t.Fatalf("nodes = %v", nodes)
	}
	for i, name := range []string{"source", "sum", "sink"} {
		n := obj(t, "node", nodes[i])
		requireKeys(t, "node "+name, n, "id", "parallelism", "operator", "operator_strategy", "description", "optimizer_properties")
		if n["id"] != restapi.VertexID(fakeJob, name) || n["description"] != name {
			t.Errorf("nodes[%d] = %v", i, n)
		}
	}
	if _, ok := obj(t, "source", nodes[0])["inputs"]; ok {
		t.Errorf("source node has inputs: %v", nodes[0])
	}
	for i, want := range map[int]struct{ from, ship string }{1: {"source", "HASH"}, 2: {"sum", "REBALANCE"}} {
		in := obj(t, "input", arr(t, "inputs", obj(t, "node", nodes[i])["inputs"])[0])
		requireKeys(t, "input", in, "num", "id", "ship_strategy", "exchange")
		if in["id"] != restapi.VertexID(fakeJob, want.from) || in["ship_strategy"] != want.ship || in["exchange"] != "pipelined_bounded" || num(t, "num", in["num"]) != 0 {
			t.Errorf("input of nodes[%d] = %v, want from %s by %s", i, in, want.from, want.ship)
		}
	}
	// The same plan as in the job's details.
	if details := c.get("/jobs/"+fakeJob, http.StatusOK); !reflect.DeepEqual(details["plan"], b["plan"]) {
		t.Errorf("plan %v differs from the job details' %v", b["plan"], details["plan"])
	}
	c.checkErrors([]errorCase{
		{method: "GET", path: "/jobs/" + unknownJob + "/plan", code: 404, mention: unknownJob},
		{method: "POST", path: "/jobs/" + fakeJob + "/plan", code: 405, mention: "POST", allow: "GET, HEAD"},
	})
}

func TestJobConfig(t *testing.T) {
	api := newFakeAPI()
	c := serve(t, api)
	b := c.get("/jobs/"+fakeJob+"/config", http.StatusOK)
	requireKeys(t, "JobConfigInfo", b, "jid", "name", "execution-config")
	ec := obj(t, "execution-config", b["execution-config"])
	requireKeys(t, "ExecutionConfigInfo", ec, "execution-mode", "restart-strategy", "job-parallelism", "object-reuse-mode", "user-config")
	if b["jid"] != fakeJob || b["name"] != "fixture" || ec["execution-mode"] != "PIPELINED" || num(t, "job-parallelism", ec["job-parallelism"]) != 2 ||
		ec["object-reuse-mode"] != false || len(obj(t, "user-config", ec["user-config"])) != 0 {
		t.Errorf("JobConfigInfo = %v", b)
	}
	if rs := ec["restart-strategy"]; rs != "Restart with fixed delay (2000 ms). #3 restart attempts." {
		t.Errorf("restart-strategy = %q", rs)
	}
	c.checkErrors([]errorCase{
		{method: "GET", path: "/jobs/" + unknownJob + "/config", code: 404, mention: unknownJob},
		{method: "PUT", path: "/jobs/" + fakeJob + "/config", code: 405, mention: "PUT", allow: "GET, HEAD"},
	})

	// A job that names no restart strategy runs with Weir's default:
	// exponential delay when it checkpoints.
	api.mu.Lock()
	api.job.Graph.RestartStrategy = nil
	api.mu.Unlock()
	ec = obj(t, "execution-config", c.get("/jobs/"+fakeJob+"/config", http.StatusOK)["execution-config"])
	if rs, _ := ec["restart-strategy"].(string); !strings.HasPrefix(rs, "Restart with exponential delay: starting at 1000 ms") {
		t.Errorf("default restart-strategy = %q", rs)
	}
}

func TestDashboardConfig(t *testing.T) {
	c := serve(t, newFakeAPI())
	b := c.get("/config", http.StatusOK)
	requireKeys(t, "DashboardConfiguration", b, "refresh-interval", "timezone-name", "timezone-offset", "flink-version", "flink-revision", "features")
	if num(t, "refresh-interval", b["refresh-interval"]) != 3000 || b["flink-version"] == "" || b["timezone-name"] == "" {
		t.Errorf("DashboardConfiguration = %v", b)
	}
	_, offset := time.Now().Zone()
	if num(t, "timezone-offset", b["timezone-offset"]) != int64(offset)*1000 {
		t.Errorf("timezone-offset = %v, want %d ms", b["timezone-offset"], offset*1000)
	}
	features := obj(t, "features", b["features"])
	want := map[string]any{"web-submit": false, "web-cancel": true, "web-rescale": true, "web-history": false}
	if !reflect.DeepEqual(features, want) {
		t.Errorf("features = %v, want %v", features, want)
	}
	c.checkErrors([]errorCase{{method: "POST", path: "/v1/config", code: 405, mention: "POST", allow: "GET, HEAD"}})
}

func TestJobManagerConfig(t *testing.T) {
	// The JobManager lists its configuration, sorted by key.
	c := serve(t, configuredAPI{fakeAPI: newFakeAPI(), config: map[string]string{
		"rest.address": "127.0.0.1:8081", "jobmanager.rpc.address": "127.0.0.1:6123", "heartbeat.timeout": "50s",
	}})
	got := c.getAny("/jobmanager/config")
	want := []any{
		map[string]any{"key": "heartbeat.timeout", "value": "50s"},
		map[string]any{"key": "jobmanager.rpc.address", "value": "127.0.0.1:6123"},
		map[string]any{"key": "rest.address", "value": "127.0.0.1:8081"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("/jobmanager/config = %v, want %v", got, want)
	}
	c.checkErrors([]errorCase{{method: "DELETE", path: "/jobmanager/config", code: 405, mention: "DELETE", allow: "GET, HEAD"}})

	// An API without a configuration lists none.
	if got := serve(t, newFakeAPI()).getAny("/jobmanager/config"); !reflect.DeepEqual(got, []any{}) {
		t.Errorf("/jobmanager/config without a configuration = %v, want []", got)
	}
}

func TestTaskManagerDetails(t *testing.T) {
	c := serve(t, newFakeAPI())
	b := c.get("/taskmanagers/tm-1", http.StatusOK)
	requireKeys(t, "TaskManagerDetailsInfo", b, "id", "path", "dataPort", "timeSinceLastHeartbeat", "slotsNumber", "freeSlots")
	if b["id"] != "tm-1" || b["path"] != "10.0.0.1:6121" || num(t, "slotsNumber", b["slotsNumber"]) != 2 ||
		num(t, "freeSlots", b["freeSlots"]) != 0 || num(t, "timeSinceLastHeartbeat", b["timeSinceLastHeartbeat"]) != fakeStartMs+500 {
		t.Errorf("TaskManagerDetailsInfo = %v", b)
	}
	// The same as its entry of the list.
	list := arr(t, "taskmanagers", c.get("/taskmanagers", http.StatusOK)["taskmanagers"])
	if !reflect.DeepEqual(list[0], any(b)) {
		t.Errorf("details %v differ from the list's entry %v", b, list[0])
	}
	c.checkErrors([]errorCase{
		{method: "GET", path: "/taskmanagers/tm-gone", code: 404, mention: "TaskManager tm-gone not found"},
		{method: "POST", path: "/taskmanagers/tm-1", code: 405, mention: "POST", allow: "GET, HEAD"},
	})
}

func TestResourceRequirements(t *testing.T) {
	api := newFakeAPI()
	c := serve(t, api)
	source, sum, sink := restapi.VertexID(fakeJob, "source"), restapi.VertexID(fakeJob, "sum"), restapi.VertexID(fakeJob, "sink")
	b := c.get("/jobs/"+fakeJob+"/resource-requirements", http.StatusOK)
	want := map[string]any{}
	for id, p := range map[string]float64{source: 2, sum: 2, sink: 1} {
		want[id] = map[string]any{"parallelism": map[string]any{"lowerBound": 1.0, "upperBound": p}}
	}
	if !reflect.DeepEqual(b, want) {
		t.Errorf("resource requirements = %v, want %v", b, want)
	}
	rescales := func() []*weirv1.RescaleJobRequest {
		api.mu.Lock()
		defer api.mu.Unlock()
		return append([]*weirv1.RescaleJobRequest(nil), api.rescales...)
	}

	// What GET answered changes nothing: no rescale, no restart.
	raw, _ := json.Marshal(b)
	if r := c.do(http.MethodPut, "/jobs/"+fakeJob+"/resource-requirements", string(raw)); r.code != http.StatusOK || len(r.body) != 0 {
		t.Fatalf("PUT of the current requirements: %d %s, want 200 {}", r.code, r.raw)
	}
	if got := rescales(); len(got) != 0 {
		t.Fatalf("PUT of the current requirements rescaled: %v", got)
	}

	// Vertices by REST ID or by name; the RPC gets names.
	body := fmt.Sprintf(`{%q: {"parallelism": {"lowerBound": 1, "upperBound": 4}}, "sink": {"parallelism": {"lowerBound": 2, "upperBound": 3}}}`, sum)
	if r := c.do(http.MethodPut, "/v1/jobs/"+fakeJob+"/resource-requirements", body); r.code != http.StatusOK || len(r.body) != 0 {
		t.Fatalf("PUT: %d %s, want 200 {}", r.code, r.raw)
	}
	got := rescales()
	if len(got) != 1 || got[0].GetJobId() != fakeJob || !reflect.DeepEqual(got[0].GetParallelism(), map[string]int32{"sum": 4, "sink": 3}) {
		t.Fatalf("RescaleJob requests = %v, want job %s with sum 4, sink 3", got, fakeJob)
	}

	// The core's refusal is the answer.
	api.mu.Lock()
	api.rescaleErr = status.Error(codes.InvalidArgument, "parallelism 400 is outside 1..128")
	api.mu.Unlock()
	c.checkErrors([]errorCase{
		{method: "PUT", path: "/jobs/" + fakeJob + "/resource-requirements", body: `{"sum": {"parallelism": {"lowerBound": 1, "upperBound": 400}}}`, code: 400, mention: "outside 1..128"},
		{method: "PUT", path: "/jobs/" + fakeJob + "/resource-requirements", body: `{"sum": {"parallelism": {"lowerBound": 0, "upperBound": 2}}}`, code: 400, mention: "lowerBound 0"},
		{method: "PUT", path: "/jobs/" + fakeJob + "/resource-requirements", body: `{"sum": {"parallelism": {"lowerBound": 3, "upperBound": 2}}}`, code: 400, mention: "lowerBound 3"},
		{method: "PUT", path: "/jobs/" + fakeJob + "/resource-requirements", body: `{"sum": {"parallelism": {"upperBound": 2}}}`, code: 400, mention: "lowerBound 0"},
		{method: "PUT", path: "/jobs/" + fakeJob + "/resource-requirements", body: `{"sum": {}}`, code: 400, mention: "parallelism"},
		{method: "PUT", path: "/jobs/" + fakeJob + "/resource-requirements", body: `{"sum": {"parallelism": {"lowerBound": 1, "upper-bound": 2}}}`, code: 400, mention: `unknown field "upper-bound"`},
		{method: "PUT", path: "/jobs/" + fakeJob + "/resource-requirements", body: `{"sum": {"parallelism": {"lowerBound": 1, "upperBound": "2"}}}`, code: 400, mention: "upperBound"},
		{method: "PUT", path: "/jobs/" + fakeJob + "/resource-requirements", body: `{"nope": {"parallelism": {"lowerBound": 1, "upperBound": 2}}}`, code: 400, mention: "nope"},
		{method: "PUT", path: "/jobs/" + fakeJob + "/resource-requirements", body: fmt.Sprintf(`{"sum": {"parallelism": {"lowerBound": 1, "upperBound": 3}}, %q: {"parallelism": {"lowerBound": 1, "upperBound": 4}}}`, sum), code: 400, mention: "named twice"},
		{method: "PUT", path: "/jobs/" + fakeJob + "/resource-requirements", body: "", code: 400, mention: "at least one vertex"},
		{method: "PUT", path: "/jobs/" + fakeJob + "/resource-requirements", body: "[", code: 400, mention: "JSON"},
		{method: "PUT", path: "/jobs/" + unknownJob + "/resource-requirements", body: `{"sum": {"parallelism": {"lowerBound": 1, "upperBound": 3}}}`, code: 404, mention: unknownJob},
		{method: "GET", path: "/jobs/" + unknownJob + "/resource-requirements", code: 404, mention: unknownJob},
		{method: "POST", path: "/jobs/" + fakeJob + "/resource-requirements", body: "{}", code: 405, mention: "POST", allow: "GET, HEAD, PUT"},
	})
	if n := len(rescales()); n != 2 {
		t.Errorf("%d RescaleJob calls, want 2: only the valid bodies reach the core", n)
	}
}

func TestPatchCheckpointConfig(t *testing.T) {
	api := newFakeAPI()
	c := serve(t, api)
	path := "/jobs/" + fakeJob + "/checkpoints/config"
	r := c.do(http.MethodPatch, path, `{"interval": 0, "min-pause": 250}`)
	if r.code != http.StatusOK {
		t.Fatalf("PATCH: %d %s", r.code, r.raw)
	}
	api.mu.Lock()
	reqs := append([]*weirv1.ConfigureCheckpointingRequest(nil), api.configures...)
	api.mu.Unlock()
	if len(reqs) != 1 || reqs[0].GetJobId() != fakeJob || reqs[0].GetInterval().AsDuration() != 0 || reqs[0].GetInterval() == nil ||
		reqs[0].GetMinPause().AsDuration() != 250*time.Millisecond || reqs[0].GetTimeout() != nil {
		t.Fatalf("ConfigureCheckpointing requests = %v, want interval 0, min pause 250ms and the timeout unset", reqs)
	}
	// The answer is what GET answers now.
	if get := c.get(path, http.StatusOK); !reflect.DeepEqual(r.body, get) {
		t.Errorf("PATCH answered %v, GET answers %v", r.body, get)
	}
	if r.body["periodic_checkpoints"] != false || num(t, "min_pause", r.body["min_pause"]) != 250 || num(t, "timeout", r.body["timeout"]) != 600000 {
		t.Errorf("CheckpointConfigInfo after PATCH = %v", r.body)
	}

	c.checkErrors([]errorCase{
		{method: "PATCH", path: path, body: `{"timeout": -1}`, code: 400, mention: "timeout -1"},
		{method: "PATCH", path: path, body: `{"min_pause": 5}`, code: 400, mention: `did you mean "min-pause"`},
		{method: "PATCH", path: path, body: `{"interval": "1s"}`, code: 400, mention: "interval"},
		{method: "PATCH", path: path, body: `{}`, code: 400, mention: "at least one"},
		{method: "PATCH", path: "/jobs/" + unknownJob + "/checkpoints/config", body: `{"interval": 1000}`, code: 404, mention: unknownJob},
		{method: "POST", path: path, body: `{"interval": 1000}`, code: 405, mention: "POST", allow: "GET, HEAD, PATCH"},
	})
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.configures) != 1 {
		t.Errorf("%d ConfigureCheckpointing calls, want 1: refused bodies do not reach the core", len(api.configures))
	}
}

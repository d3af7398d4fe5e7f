package restapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/jobmanager"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/restapi"
	"github.com/weirproject/weir/internal/testcluster"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// cluster is an in-process JobManager with two TaskManagers and the REST
// handler in front of the JobManager.
type cluster struct {
	t   *testing.T
	jm  *jobmanager.Server
	url string
	// ckpt is the JobManager's checkpoint directory, which savepoints
	// must be in.
	ckpt string
}

// savepointDir is a new directory for savepoints in the checkpoint
// directory.
func (c *cluster) savepointDir(t *testing.T) string {
	t.Helper()
	parent := filepath.Join(c.ckpt, "savepoints")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(parent, "test-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func startCluster(t *testing.T) *cluster {
	c, _ := startClusterWith(t, 2, 2)
	return c
}

// startClusterWith starts a JobManager and tms TaskManagers of slots
// slots each, with the built-in operators and those extra registers; it
// returns each TaskManager's /metrics URL too.
func startClusterWith(t *testing.T, tms, slots int, extra ...func(*sdk.Registry)) (*cluster, []string) {
	t.Helper()
	log := testLogger()
	tc := testcluster.Start(t, testcluster.Options{Logger: log})
	var metrics []string
	for i := range tms {
		reg := sdk.NewRegistry()
		for _, f := range extra {
			f(reg)
		}
		tm := tc.StartTaskManager(fmt.Sprintf("tm-%d", i), slots, reg)
		metrics = append(metrics, "http://"+tm.HTTPAddr+"/metrics")
	}
	h := restapi.New(tc.JobManager, log)
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		ts.Close()
	})
	return &cluster{t: t, jm: tc.JobManager, url: ts.URL, ckpt: filepath.Join(tc.Dir, "checkpoints")}, metrics
}

func runningSumSpec(name, sinkDir, checkpointing string) string {
	return fmt.Sprintf(`name: %s
checkpointing: %s
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: {count: 0, keys: 8, rate: 1000}}
  - {name: sum, operator: keyed-sum, parallelism: 2, inputs: [{from: source, partition: hash}]}
  - {name: sink, operator: file-sink, parallelism: 2, inputs: [{from: sum, partition: forward}], config: {path: %q}}
`, name, checkpointing, sinkDir)
}

func (c *cluster) submit(spec string) string {
	c.t.Helper()
	g, err := jobgraph.ParseSpec([]byte(spec))
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := c.jm.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.GetJobId()
}

type response struct {
	code   int
	header http.Header
	raw    string
	body   map[string]any
}

func (c *cluster) do(method, path, body string) response {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	out := response{code: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		c.t.Fatalf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	if err := json.Unmarshal(raw, &out.body); err != nil {
		c.t.Fatalf("%s %s: body is not a JSON object: %v\n%s", method, path, err, raw)
	}
	return out
}

// get fetches path and requires want as status.
func (c *cluster) get(path string, want int) map[string]any {
	c.t.Helper()
	r := c.do(http.MethodGet, path, "")
	if r.code != want {
		c.t.Fatalf("GET %s: status %d, want %d: %s", path, r.code, want, r.raw)
	}
	return r.body
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	poll.Until(t, timeout, 20*time.Millisecond, what, cond)
}

func requireKeys(t *testing.T, where string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			got := make([]string, 0, len(m))
			for k := range m {
				got = append(got, k)
			}
			sort.Strings(got)
			t.Errorf("%s: missing key %q (has %v)", where, k, got)
		}
	}
}

func obj(t *testing.T, where string, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: want a JSON object, got %T (%v)", where, v, v)
	}
	return m
}

func arr(t *testing.T, where string, v any) []any {
	t.Helper()
	a, ok := v.([]any)
	if !ok {
		t.Fatalf("%s: want a JSON array, got %T (%v)", where, v, v)
	}
	return a
}

func num(t *testing.T, where string, v any) int64 {
	t.Helper()
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("%s: want a number, got %T (%v)", where, v, v)
	}
	return int64(f)
}

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

var (
	checkpointKeys = []string{
		"className", "id", "status", "is_savepoint", "trigger_timestamp", "latest_ack_timestamp",
		"checkpointed_size", "state_size", "end_to_end_duration", "alignment_buffered", "processed_data",
		"persisted_data", "num_subtasks", "num_acknowledged_subtasks", "checkpoint_type", "tasks",
	}
	taskKeys = []string{
		"id", "status", "latest_ack_timestamp", "checkpointed_size", "state_size", "end_to_end_duration",
		"alignment_buffered", "processed_data", "persisted_data", "num_subtasks", "num_acknowledged_subtasks",
	}
	statsKeys = []string{"min", "max", "avg", "p50", "p90", "p95", "p99", "p999"}
)

// checkCheckpoint checks a CheckpointStatistics object and its subtype.
func checkCheckpoint(t *testing.T, where string, v any) map[string]any {
	t.Helper()
	m := obj(t, where, v)
	requireKeys(t, where, m, checkpointKeys...)
	switch class := m["className"]; class {
	case "completed":
		requireKeys(t, where, m, "external_path", "discarded")
		if m["status"] != "COMPLETED" {
			t.Errorf("%s: className completed with status %v", where, m["status"])
		}
	case "failed":
		requireKeys(t, where, m, "failure_timestamp", "failure_message")
		if m["status"] != "FAILED" {
			t.Errorf("%s: className failed with status %v", where, m["status"])
		}
	case "in_progress":
		if m["status"] != "IN_PROGRESS" {
			t.Errorf("%s: className in_progress with status %v", where, m["status"])
		}
	default:
		t.Errorf("%s: className %v, want completed, failed or in_progress", where, class)
	}
	return m
}

// nodeIDs lists the IDs of a JSON plan's nodes.
func nodeIDs(t *testing.T, plan any) []string {
	t.Helper()
	var ids []string
	for _, n := range arr(t, "nodes", obj(t, "plan", plan)["nodes"]) {
		ids = append(ids, obj(t, "node", n)["id"].(string))
	}
	return ids
}

func (c *cluster) jobState(id string) string {
	c.t.Helper()
	s, _ := c.get("/jobs/"+id, http.StatusOK)["state"].(string)
	return s
}

func (c *cluster) waitJobState(id, want string) {
	c.t.Helper()
	waitFor(c.t, 30*time.Second, "job "+id+" to be "+want, func() (bool, string) {
		s := c.jobState(id)
		return s == want, s
	})
}

// waitCompleted waits until the job completed n checkpoints.
func (c *cluster) waitCompleted(job string, n int64) {
	c.t.Helper()
	waitFor(c.t, 30*time.Second, fmt.Sprintf("%d completed checkpoints of job %s", n, job), func() (bool, string) {
		counts := obj(c.t, "counts", c.get("/jobs/"+job+"/checkpoints", http.StatusOK)["counts"])
		return num(c.t, "completed", counts["completed"]) >= n, fmt.Sprint(counts)
	})
}

// trigger POSTs body to path, requires 202 and returns the request-id.
func (c *cluster) trigger(path, body string) string {
	c.t.Helper()
	r := c.do(http.MethodPost, path, body)
	if r.code != http.StatusAccepted {
		c.t.Fatalf("POST %s: status %d, want 202: %s", path, r.code, r.raw)
	}
	requireKeys(c.t, "TriggerResponse", r.body, "request-id")
	id, _ := r.body["request-id"].(string)
	if !hex32.MatchString(id) {
		c.t.Fatalf("POST %s: request-id %q is not 32 hex", path, id)
	}
	return id
}

// awaitOperation polls an AsynchronousOperationResult until COMPLETED and
// returns its operation.
func (c *cluster) awaitOperation(path string) map[string]any {
	c.t.Helper()
	var op map[string]any
	waitFor(c.t, 30*time.Second, path+" to complete", func() (bool, string) {
		b := c.get(path, http.StatusOK)
		requireKeys(c.t, path, b, "status", "operation")
		st := obj(c.t, path+" status", b["status"])
		switch st["id"] {
		case "IN_PROGRESS":
			if b["operation"] != nil {
				c.t.Errorf("%s: operation %v while IN_PROGRESS, want null", path, b["operation"])
			}
			return false, "IN_PROGRESS"
		case "COMPLETED":
			op = obj(c.t, path+" operation", b["operation"])
			return true, ""
		}
		c.t.Fatalf("%s: status.id %v", path, st["id"])
		return false, ""
	})
	return op
}

func TestRESTAPI(t *testing.T) {
	c := startCluster(t)

	// TaskManagers register.
	waitFor(t, 20*time.Second, "two TaskManagers", func() (bool, string) {
		tms := arr(t, "taskmanagers", c.get("/taskmanagers", http.StatusOK)["taskmanagers"])
		return len(tms) == 2, fmt.Sprint(tms)
	})
	for i, tm := range arr(t, "taskmanagers", c.get("/taskmanagers", http.StatusOK)["taskmanagers"]) {
		m := obj(t, "taskmanager", tm)
		requireKeys(t, fmt.Sprintf("taskmanagers[%d]", i), m, "id", "path", "dataPort", "jmxPort", "timeSinceLastHeartbeat", "slotsNumber", "freeSlots")
		if num(t, "slotsNumber", m["slotsNumber"]) != 2 {
			t.Errorf("taskmanagers[%d].slotsNumber = %v, want 2", i, m["slotsNumber"])
		}
	}

	sinkDir := t.TempDir()
	job := c.submit(runningSumSpec("running-sum", sinkDir, "{interval: 200ms, retained: 3}"))
	c.waitJobState(job, "RUNNING")
	c.waitCompleted(job, 2)

	t.Run("overview", func(t *testing.T) {
		b := c.get("/overview", http.StatusOK)
		requireKeys(t, "overview", b, "taskmanagers", "slots-total", "slots-available", "jobs-running",
			"jobs-finished", "jobs-cancelled", "jobs-failed", "flink-version", "flink-commit")
		if num(t, "taskmanagers", b["taskmanagers"]) != 2 || num(t, "slots-total", b["slots-total"]) != 4 {
			t.Errorf("overview = %v, want 2 taskmanagers and 4 slots", b)
		}
		if num(t, "jobs-running", b["jobs-running"]) != 1 || num(t, "slots-available", b["slots-available"]) != 2 {
			t.Errorf("overview = %v, want 1 running job holding 2 of 4 slots", b)
		}
		// Flink's versioned prefix.
		c.get("/v1/overview", http.StatusOK)
	})

	t.Run("jobs", func(t *testing.T) {
		jobs := arr(t, "jobs", c.get("/jobs", http.StatusOK)["jobs"])
		if len(jobs) != 1 {
			t.Fatalf("jobs = %v", jobs)
		}
		j := obj(t, "jobs[0]", jobs[0])
		if j["id"] != job || j["status"] != "RUNNING" {
			t.Errorf("jobs[0] = %v, want {id:%s status:RUNNING}", j, job)
		}

		ov := arr(t, "jobs", c.get("/jobs/overview", http.StatusOK)["jobs"])
		d := obj(t, "jobs/overview[0]", ov[0])
		requireKeys(t, "JobDetails", d, "jid", "name", "start-time", "end-time", "duration", "last-modification", "state", "tasks")
		tasks := obj(t, "tasks", d["tasks"])
		requireKeys(t, "JobDetails.tasks", tasks, "total", "created", "scheduled", "deploying", "running",
			"finished", "canceling", "canceled", "failed", "reconciling", "initializing")
		if num(t, "total", tasks["total"]) != 6 || num(t, "running", tasks["running"]) != 6 {
			t.Errorf("tasks = %v, want 6 running of 6", tasks)
		}
		if d["name"] != "running-sum" || num(t, "end-time", d["end-time"]) != -1 {
			t.Errorf("JobDetails = %v", d)
		}
	})

	t.Run("job details", func(t *testing.T) {
		b := c.get("/jobs/"+job, http.StatusOK)
		requireKeys(t, "JobDetailsInfo", b, "jid", "name", "isStoppable", "state", "start-time", "end-time",
			"duration", "maxParallelism", "now", "timestamps", "vertices", "status-counts", "plan")
		if b["jid"] != job || b["state"] != "RUNNING" || num(t, "end-time", b["end-time"]) != -1 {
			t.Errorf("JobDetailsInfo = %v", b)
		}
		requireKeys(t, "timestamps", obj(t, "timestamps", b["timestamps"]), "CREATED", "RUNNING", "CANCELLING", "CANCELED", "FINISHED", "FAILED")
		if n := num(t, "status-counts.RUNNING", obj(t, "status-counts", b["status-counts"])["RUNNING"]); n != 6 {
			t.Errorf("status-counts.RUNNING = %d, want 6", n)
		}
		vertices := arr(t, "vertices", b["vertices"])
		if len(vertices) != 3 {
			t.Fatalf("vertices = %v", vertices)
		}
		for i, name := range []string{"source", "sum", "sink"} {
			v := obj(t, "vertex", vertices[i])
			requireKeys(t, "vertex "+name, v, "id", "name", "maxParallelism", "parallelism", "status",
				"start-time", "end-time", "duration", "tasks", "metrics")
			if v["id"] != restapi.VertexID(job, name) || v["name"] != name || v["status"] != "RUNNING" {
				t.Errorf("vertex %d = %v", i, v)
			}
			if !hex32.MatchString(v["id"].(string)) {
				t.Errorf("vertex id %v is not 32 hex", v["id"])
			}
		}
		nodes := arr(t, "plan.nodes", obj(t, "plan", b["plan"])["nodes"])
		sum := obj(t, "plan.nodes[1]", nodes[1])
		in := obj(t, "inputs[0]", arr(t, "inputs", sum["inputs"])[0])
		if in["id"] != restapi.VertexID(job, "source") || in["ship_strategy"] != "HASH" {
			t.Errorf("plan input of sum = %v", in)
		}
	})

	var latestID int64
	t.Run("checkpoint statistics", func(t *testing.T) {
		b := c.get("/jobs/"+job+"/checkpoints", http.StatusOK)
		requireKeys(t, "CheckpointingStatistics", b, "counts", "summary", "latest", "history")
		requireKeys(t, "counts", obj(t, "counts", b["counts"]), "restored", "total", "in_progress", "completed", "failed")
		summary := obj(t, "summary", b["summary"])
		for _, k := range []string{"checkpointed_size", "state_size", "end_to_end_duration", "alignment_buffered", "processed_data", "persisted_data"} {
			requireKeys(t, "summary."+k, obj(t, "summary."+k, summary[k]), statsKeys...)
		}
		if num(t, "summary.state_size.max", obj(t, "", summary["state_size"])["max"]) <= 0 {
			t.Errorf("summary.state_size = %v, want a positive max (keyed-sum has state)", summary["state_size"])
		}
		latest := obj(t, "latest", b["latest"])
		requireKeys(t, "latest", latest, "completed", "savepoint", "failed", "restored")
		completed := checkCheckpoint(t, "latest.completed", latest["completed"])
		if completed["className"] != "completed" || completed["external_path"] == nil || completed["checkpoint_type"] != "CHECKPOINT" {
			t.Errorf("latest.completed = %v", completed)
		}
		if latest["restored"] != nil {
			t.Errorf("latest.restored = %v, want null", latest["restored"])
		}
		latestID = num(t, "latest.completed.id", completed["id"])
		// Weir addition: the scheduler says when the next checkpoint comes.
		next := obj(t, "next_checkpoint", b["next_checkpoint"])
		requireKeys(t, "next_checkpoint", next, "state", "reason", "message", "due_timestamp", "queued")
		if st := next["state"]; st != "SCHEDULED" && st != "DELAYED" || next["message"] == "" {
			t.Errorf("next_checkpoint = %v, want a scheduled or delayed periodic checkpoint with a message", next)
		}
		history := arr(t, "history", b["history"])
		if len(history) == 0 {
			t.Fatal("empty history")
		}
		prev := int64(1 << 62)
		for i, h := range history {
			m := checkCheckpoint(t, fmt.Sprintf("history[%d]", i), h)
			id := num(t, "id", m["id"])
			if id >= prev {
				t.Errorf("history is not newest first: %d after %d", id, prev)
			}
			prev = id
		}
	})

	t.Run("checkpoint config", func(t *testing.T) {
		b := c.get("/jobs/"+job+"/checkpoints/config", http.StatusOK)
		requireKeys(t, "CheckpointConfigInfo", b, "mode", "interval", "timeout", "min_pause", "max_concurrent",
			"externalization", "state_backend", "checkpoint_storage", "unaligned_checkpoints",
			"tolerable_failed_checkpoints", "aligned_checkpoint_timeout", "checkpoints_after_tasks_finish")
		requireKeys(t, "externalization", obj(t, "externalization", b["externalization"]), "enabled", "delete_on_cancellation")
		if b["mode"] != "exactly_once" || num(t, "interval", b["interval"]) != 200 || num(t, "retained", b["retained_checkpoints"]) != 3 {
			t.Errorf("CheckpointConfigInfo = %v", b)
		}
	})

	t.Run("checkpoint details", func(t *testing.T) {
		path := fmt.Sprintf("/jobs/%s/checkpoints/details/%d", job, latestID)
		m := checkCheckpoint(t, "details", c.get(path, http.StatusOK))
		if m["className"] != "completed" || num(t, "num_acknowledged_subtasks", m["num_acknowledged_subtasks"]) != 6 {
			t.Errorf("details = %v", m)
		}
		tasks := obj(t, "tasks", m["tasks"])
		if len(tasks) != 3 {
			t.Fatalf("tasks = %v, want 3 vertices", tasks)
		}
		for _, name := range []string{"source", "sum", "sink"} {
			task := obj(t, "tasks."+name, tasks[restapi.VertexID(job, name)])
			requireKeys(t, "TaskCheckpointStatistics "+name, task, taskKeys...)
			if num(t, "num_subtasks", task["num_subtasks"]) != 2 || num(t, "num_acknowledged_subtasks", task["num_acknowledged_subtasks"]) != 2 || task["status"] != "COMPLETED" {
				t.Errorf("tasks[%s] = %v", name, task)
			}
		}

		byID := c.get(fmt.Sprintf("%s/subtasks/%s", path, restapi.VertexID(job, "sum")), http.StatusOK)
		byName := c.get(path+"/subtasks/sum", http.StatusOK)
		for _, b := range []map[string]any{byID, byName} {
			requireKeys(t, "TaskCheckpointStatisticsWithSubtaskDetails", b, append(slices.Clone(taskKeys), "summary", "subtasks")...)
			s := obj(t, "summary", b["summary"])
			requireKeys(t, "subtask summary", s, "checkpointed_size", "state_size", "end_to_end_duration", "checkpoint_duration", "alignment", "start_delay")
			requireKeys(t, "checkpoint_duration", obj(t, "checkpoint_duration", s["checkpoint_duration"]), "sync", "async")
			requireKeys(t, "alignment", obj(t, "alignment", s["alignment"]), "buffered", "processed", "persisted", "duration")
			requireKeys(t, "summary.state_size", obj(t, "state_size", s["state_size"]), statsKeys...)
			subtasks := arr(t, "subtasks", b["subtasks"])
			if len(subtasks) != 2 {
				t.Fatalf("subtasks = %v", subtasks)
			}
			for i, st := range subtasks {
				m := obj(t, "subtask", st)
				requireKeys(t, "CompletedSubtaskCheckpointStatistics", m, "className", "index", "status", "ack_timestamp",
					"end_to_end_duration", "checkpointed_size", "state_size", "checkpoint", "alignment", "start_delay",
					"unaligned_checkpoint", "aborted")
				if m["className"] != "completed" || m["status"] != "completed" || num(t, "index", m["index"]) != int64(i) {
					t.Errorf("subtasks[%d] = %v", i, m)
				}
			}
		}
		if byID["id"] != byName["id"] || byID["state_size"] != byName["state_size"] {
			t.Errorf("by ID %v and by name %v differ", byID, byName)
		}
	})

	t.Run("exceptions, vertex, plan and config", func(t *testing.T) {
		ex := c.get("/jobs/"+job+"/exceptions", http.StatusOK)
		requireKeys(t, "JobExceptionsInfoWithHistory", ex, "root-exception", "timestamp", "all-exceptions", "truncated", "exceptionHistory")
		if ex["root-exception"] != nil || len(arr(t, "entries", obj(t, "exceptionHistory", ex["exceptionHistory"])["entries"])) != 0 {
			t.Errorf("exceptions of a job that never failed = %v", ex)
		}

		tms := map[string]string{}
		for _, tm := range arr(t, "taskmanagers", c.get("/taskmanagers", http.StatusOK)["taskmanagers"]) {
			m := obj(t, "taskmanager", tm)
			tms[m["id"].(string)] = m["path"].(string)
			d := c.get("/taskmanagers/"+m["id"].(string), http.StatusOK)
			if d["id"] != m["id"] || d["path"] != m["path"] || d["slotsNumber"] != m["slotsNumber"] {
				t.Errorf("TaskManager details %v, list entry %v", d, m)
			}
		}
		v := c.get("/jobs/"+job+"/vertices/"+restapi.VertexID(job, "sum"), http.StatusOK)
		if v["name"] != "sum" || num(t, "parallelism", v["parallelism"]) != 2 {
			t.Errorf("vertex sum = %v", v)
		}
		for i, s := range arr(t, "subtasks", v["subtasks"]) {
			m := obj(t, "subtask", s)
			if m["status"] != "RUNNING" || m["endpoint"] != tms[m["taskmanager-id"].(string)] || m["endpoint"] == "" || num(t, "start-time", m["start-time"]) <= 0 {
				t.Errorf("sum subtasks[%d] = %v, want running on a registered TaskManager (%v)", i, m, tms)
			}
		}

		plan := c.get("/jobs/"+job+"/plan", http.StatusOK)
		if !slices.Equal(nodeIDs(t, plan["plan"]), nodeIDs(t, c.get("/jobs/"+job, http.StatusOK)["plan"])) {
			t.Errorf("plan %v differs from the job details' plan", plan)
		}
		ec := obj(t, "execution-config", c.get("/jobs/"+job+"/config", http.StatusOK)["execution-config"])
		if num(t, "job-parallelism", ec["job-parallelism"]) != 2 || !strings.HasPrefix(ec["restart-strategy"].(string), "Restart with exponential delay") {
			t.Errorf("execution-config = %v, want parallelism 2 and the default exponential delay", ec)
		}
		if d := c.get("/config", http.StatusOK); obj(t, "features", d["features"])["web-rescale"] != true {
			t.Errorf("/config = %v", d)
		}
		// The JobManager lists its configuration.
		found := false
		for _, e := range arr(t, "/jobmanager/config", c.getAny("/jobmanager/config")) {
			found = found || obj(t, "entry", e)["key"] == "jobmanager.rpc.address"
		}
		if !found {
			t.Errorf("/jobmanager/config lacks jobmanager.rpc.address")
		}
		rr := c.get("/jobs/"+job+"/resource-requirements", http.StatusOK)
		if p := obj(t, "parallelism", obj(t, "sum", rr[restapi.VertexID(job, "sum")])["parallelism"]); num(t, "upperBound", p["upperBound"]) != 2 {
			t.Errorf("resource requirements = %v", rr)
		}
	})

	t.Run("trigger checkpoint", func(t *testing.T) {
		tid := c.trigger("/jobs/"+job+"/checkpoints", "")
		op := c.awaitOperation("/jobs/" + job + "/checkpoints/" + tid)
		id := num(t, "checkpointId", op["checkpointId"])
		if id <= latestID {
			t.Errorf("checkpointId = %d, want > %d", id, latestID)
		}
		m := checkCheckpoint(t, "triggered", c.get(fmt.Sprintf("/jobs/%s/checkpoints/details/%d", job, id), http.StatusOK))
		if m["status"] != "COMPLETED" {
			t.Errorf("triggered checkpoint = %v", m)
		}

		// A client-chosen triggerId is idempotent.
		const mine = "0123456789abcdef0123456789abcdef"
		body := `{"checkpointType": "FULL", "triggerId": "` + mine + `"}`
		if got := c.trigger("/jobs/"+job+"/checkpoints", body); got != mine {
			t.Errorf("request-id = %s, want %s", got, mine)
		}
		if got := c.trigger("/jobs/"+job+"/checkpoints", body); got != mine {
			t.Errorf("request-id = %s, want %s", got, mine)
		}
		op = c.awaitOperation("/jobs/" + job + "/checkpoints/" + mine)
		requireKeys(t, "CheckpointInfo", op, "checkpointId")
	})

	t.Run("trigger savepoint", func(t *testing.T) {
		dir := c.savepointDir(t)
		tid := c.trigger("/jobs/"+job+"/savepoints", fmt.Sprintf(`{"target-directory": %q, "cancel-job": false}`, dir))
		op := c.awaitOperation("/jobs/" + job + "/savepoints/" + tid)
		loc, _ := op["location"].(string)
		if !strings.HasPrefix(loc, dir) {
			t.Fatalf("operation = %v, want a location under %s", op, dir)
		}
		if _, err := os.Stat(loc); err != nil {
			t.Errorf("savepoint location: %v", err)
		}
		latest := obj(t, "latest", c.get("/jobs/"+job+"/checkpoints", http.StatusOK)["latest"])
		sp := checkCheckpoint(t, "latest.savepoint", latest["savepoint"])
		if sp["is_savepoint"] != true || sp["checkpoint_type"] != "SAVEPOINT" || sp["external_path"] != loc {
			t.Errorf("latest.savepoint = %v, want the savepoint at %s", sp, loc)
		}
		if c.jobState(job) != "RUNNING" {
			t.Errorf("job is %s after a savepoint without cancel-job", c.jobState(job))
		}
	})

	t.Run("savepoint disposal", func(t *testing.T) {
		dir := c.savepointDir(t)
		tid := c.trigger("/jobs/"+job+"/savepoints", fmt.Sprintf(`{"target-directory": %q}`, dir))
		loc, _ := c.awaitOperation("/jobs/" + job + "/savepoints/" + tid)["location"].(string)
		tid = c.trigger("/savepoint-disposal", fmt.Sprintf(`{"savepoint-path": %q}`, loc))
		if op := c.awaitOperation("/savepoint-disposal/" + tid); op["failure-cause"] != nil {
			t.Fatalf("disposal failed: %v", op)
		}
		if _, err := os.Stat(loc); !os.IsNotExist(err) {
			t.Errorf("savepoint after disposal: %v, want it gone", err)
		}
		// Disposing of it again fails, and says why.
		tid = c.trigger("/savepoint-disposal", fmt.Sprintf(`{"savepoint-path": %q}`, loc))
		cause := obj(t, "failure-cause", c.awaitOperation("/savepoint-disposal/" + tid)["failure-cause"])
		if trace, _ := cause["stack-trace"].(string); !strings.Contains(trace, "no savepoint at") {
			t.Errorf("second disposal failure-cause = %v", cause)
		}
		if r := c.do(http.MethodPost, "/savepoint-disposal", `{}`); r.code != http.StatusBadRequest || !strings.Contains(r.raw, "savepoint-path") {
			t.Errorf("disposal without a path: %d %s, want 400 naming savepoint-path", r.code, r.raw)
		}
	})

	t.Run("errors", func(t *testing.T) {
		const unknown = "ffffffffffffffffffffffffffffffff"
		outside := t.TempDir()
		escape := filepath.Join(c.ckpt, "escape")
		if err := os.Symlink(outside, escape); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			method, path, body string
			code               int
			mention            string
		}{
			{"GET", "/jobs/" + unknown, "", 404, unknown},
			{"GET", "/jobs/" + unknown + "/checkpoints", "", 404, unknown},
			{"GET", "/jobs/" + unknown + "/checkpoints/config", "", 404, unknown},
			{"POST", "/jobs/" + unknown + "/savepoints", "{}", 404, unknown},
			{"PATCH", "/jobs/" + unknown, "", 404, unknown},
			{"GET", "/jobs/not-a-job-id", "", 400, "not-a-job-id"},
			{"GET", "/jobs/" + job + "/checkpoints/details/999999", "", 404, "999999"},
			{"GET", "/jobs/" + job + "/checkpoints/details/latest", "", 400, "latest"},
			{"GET", fmt.Sprintf("/jobs/%s/checkpoints/details/%d/subtasks/nope", job, latestID), "", 404, "nope"},
			{"GET", "/jobs/" + job + "/savepoints/" + unknown, "", 404, unknown},
			{"GET", "/jobs/" + job + "/checkpoints/" + unknown, "", 404, unknown},
			{"GET", "/jobs/" + job + "/savepoints/xyz", "", 400, "xyz"},
			{"DELETE", "/jobs/" + job, "", 405, "DELETE"},
			{"GET", "/jobs/" + job + "/stop", "", 405, "POST"},
			{"POST", "/jobs/" + job + "/savepoints", "{", 400, "JSON"},
			{"POST", "/jobs/" + job + "/savepoints", `{"targetDirectory": "/tmp"}`, 400, `did you mean "target-directory"`},
			{"POST", "/jobs/" + job + "/stop", `{"target-directory": "/tmp"}`, 400, `did you mean "targetDirectory"`},
			{"POST", "/jobs/" + job + "/savepoints", `{"cancel-job": "yes"}`, 400, "cancel-job"},
			{"POST", "/jobs/" + job + "/stop", `{"drain": 1}`, 400, "drain"},
			{"POST", "/jobs/" + job + "/checkpoints", `{"checkpointType": "SOMETIMES"}`, 400, "SOMETIMES"},
			{"POST", "/jobs/" + job + "/checkpoints", `{"triggerId": "short"}`, 400, "short"},
			{"PATCH", "/jobs/" + job + "?mode=pause", "", 400, "pause"},
			// Savepoints stay in the checkpoint directory: refused at
			// once, not as a failed operation.
			{"POST", "/jobs/" + job + "/savepoints", fmt.Sprintf(`{"target-directory": %q}`, outside), 400, "must be within the checkpoint directory"},
			{"POST", "/jobs/" + job + "/savepoints", fmt.Sprintf(`{"target-directory": %q}`, c.ckpt+"/../escaped"), 400, `".." element`},
			{"POST", "/jobs/" + job + "/stop", fmt.Sprintf(`{"targetDirectory": %q}`, filepath.Join(escape, "sp")), 400, "must be within the checkpoint directory"},
			{"POST", "/savepoint-disposal", fmt.Sprintf(`{"savepoint-path": %q}`, outside), 400, outside},
			{"POST", "/savepoint-disposal", fmt.Sprintf(`{"savepoint-path": %q}`, filepath.Join(escape, "sp")), 400, "must be within the checkpoint directory"},
			{"GET", "/nope", "", 404, "/nope"},
		}
		for _, tc := range cases {
			r := c.do(tc.method, tc.path, tc.body)
			if r.code != tc.code {
				t.Errorf("%s %s %s: status %d, want %d: %s", tc.method, tc.path, tc.body, r.code, tc.code, r.raw)
				continue
			}
			if len(r.body) != 1 {
				t.Errorf("%s %s: error body %s, want only \"errors\"", tc.method, tc.path, r.raw)
			}
			errs := arr(t, "errors", r.body["errors"])
			if len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0]), tc.mention) {
				t.Errorf("%s %s: errors %v, want one mentioning %q", tc.method, tc.path, errs, tc.mention)
			}
			if tc.code == 405 && r.header.Get("Allow") == "" {
				t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
			}
		}
		if c.jobState(job) != "RUNNING" {
			t.Fatalf("job is %s after the refused requests", c.jobState(job))
		}
	})

	t.Run("reconfigure and rescale", func(t *testing.T) {
		r := c.do(http.MethodPatch, "/jobs/"+job+"/checkpoints/config", `{"interval": 300, "min-pause": 50}`)
		if r.code != http.StatusOK || num(t, "interval", r.body["interval"]) != 300 || num(t, "min_pause", r.body["min_pause"]) != 50 {
			t.Fatalf("PATCH checkpoints/config: %d %s, want interval 300 and min pause 50", r.code, r.raw)
		}
		if b := c.get("/jobs/"+job+"/checkpoints/config", http.StatusOK); num(t, "interval", b["interval"]) != 300 {
			t.Errorf("checkpoint config after PATCH = %v", b)
		}

		// sum forwards to sink, so both change together.
		body := fmt.Sprintf(`{%q: {"parallelism": {"lowerBound": 1, "upperBound": 3}}, "sink": {"parallelism": {"lowerBound": 1, "upperBound": 3}}}`, restapi.VertexID(job, "sum"))
		if r := c.do(http.MethodPut, "/jobs/"+job+"/resource-requirements", body); r.code != http.StatusOK {
			t.Fatalf("PUT resource-requirements: %d %s", r.code, r.raw)
		}
		waitFor(t, 30*time.Second, "sum running at parallelism 3", func() (bool, string) {
			v := c.get("/jobs/"+job+"/vertices/sum", http.StatusOK)
			running := 0
			for _, s := range arr(t, "subtasks", v["subtasks"]) {
				if obj(t, "subtask", s)["status"] == "RUNNING" {
					running++
				}
			}
			return running == 3, fmt.Sprint(v)
		})
		rr := c.get("/jobs/"+job+"/resource-requirements", http.StatusOK)
		if p := obj(t, "parallelism", obj(t, "sum", rr[restapi.VertexID(job, "sum")])["parallelism"]); num(t, "upperBound", p["upperBound"]) != 3 {
			t.Errorf("resource requirements after the rescale = %v", rr)
		}
		c.waitJobState(job, "RUNNING")
	})

	t.Run("stop", func(t *testing.T) {
		dir := c.savepointDir(t)
		// The rescale's redeployment may still be starting a subtask:
		// a stop then fails as not running (as Flink's does), and is
		// asked again.
		var op map[string]any
		waitFor(t, 30*time.Second, "a stop with savepoint", func() (bool, string) {
			tid := c.trigger("/jobs/"+job+"/stop", fmt.Sprintf(`{"targetDirectory": %q, "drain": false}`, dir))
			op = c.awaitOperation("/jobs/" + job + "/savepoints/" + tid)
			return !strings.Contains(fmt.Sprint(op), "JOB_NOT_RUNNING"), fmt.Sprint(op)
		})
		if loc, _ := op["location"].(string); !strings.HasPrefix(loc, dir) {
			t.Fatalf("operation = %v, want a location under %s", op, dir)
		}
		// As in Flink, a job stopped with a savepoint ends FINISHED.
		c.waitJobState(job, "FINISHED")
		b := c.get("/jobs/"+job, http.StatusOK)
		if num(t, "end-time", b["end-time"]) <= 0 || num(t, "timestamps.FINISHED", obj(t, "timestamps", b["timestamps"])["FINISHED"]) <= 0 {
			t.Errorf("stopped job = %v, want its end time", b)
		}
		// The statistics of an ended job stay available.
		cp := c.get("/jobs/"+job+"/checkpoints", http.StatusOK)
		checkCheckpoint(t, "latest.savepoint after stop", obj(t, "latest", cp["latest"])["savepoint"])
		// A checkpoint of a stopped job fails in the operation's result.
		tid := c.trigger("/jobs/"+job+"/checkpoints", "")
		op = c.awaitOperation("/jobs/" + job + "/checkpoints/" + tid)
		cause := obj(t, "failureCause", op["failureCause"])
		requireKeys(t, "failureCause", cause, "class", "stack-trace")
		if !strings.Contains(cause["stack-trace"].(string), "FINISHED") {
			t.Errorf("failureCause = %v, want it to say the job is FINISHED", cause)
		}
		if _, ok := op["checkpointId"]; ok {
			t.Errorf("failed checkpoint operation has a checkpointId: %v", op)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		job2 := c.submit(runningSumSpec("to-cancel", t.TempDir(), "{interval: 200ms}"))
		c.waitJobState(job2, "RUNNING")
		r := c.do(http.MethodPatch, "/jobs/"+job2+"?mode=cancel", "")
		if r.code != http.StatusAccepted || len(r.body) != 0 {
			t.Fatalf("PATCH cancel: %d %s, want 202 {}", r.code, r.raw)
		}
		c.waitJobState(job2, "CANCELED")
		r = c.do(http.MethodPatch, "/jobs/"+job2, "")
		if r.code != http.StatusConflict {
			t.Errorf("cancelling a CANCELED job: %d %s, want 409", r.code, r.raw)
		}

		// A savepoint with cancel-job cancels the job after the savepoint.
		job3 := c.submit(runningSumSpec("cancel-with-savepoint", t.TempDir(), "{interval: 200ms}"))
		c.waitJobState(job3, "RUNNING")
		// A job is RUNNING once scheduled; its checkpoint coordinator
		// starts when every subtask runs.
		c.waitCompleted(job3, 1)
		dir := c.savepointDir(t)
		tid := c.trigger("/jobs/"+job3+"/savepoints", fmt.Sprintf(`{"target-directory": %q, "cancel-job": true}`, dir))
		op := c.awaitOperation("/jobs/" + job3 + "/savepoints/" + tid)
		if loc, _ := op["location"].(string); !strings.HasPrefix(loc, dir) {
			t.Fatalf("operation = %v, want a location under %s", op, dir)
		}
		c.waitJobState(job3, "CANCELED")

		b := c.get("/overview", http.StatusOK)
		if num(t, "jobs-cancelled", b["jobs-cancelled"]) != 2 || num(t, "jobs-finished", b["jobs-finished"]) != 1 || num(t, "jobs-running", b["jobs-running"]) != 0 {
			t.Errorf("overview = %v, want 2 cancelled, 1 finished and no running job", b)
		}
	})
}

// TestFailedCheckpoints runs a job whose checkpoints expire at once, so the
// failed shapes come from the real coordinator.
func TestFailedCheckpoints(t *testing.T) {
	c := startCluster(t)
	job := c.submit(runningSumSpec("expiring", t.TempDir(), "{interval: 100ms, timeout: 1ms, tolerable-failed-checkpoints: 1000000}"))
	c.waitJobState(job, "RUNNING")
	var failed map[string]any
	waitFor(t, 30*time.Second, "a failed checkpoint", func() (bool, string) {
		b := c.get("/jobs/"+job+"/checkpoints", http.StatusOK)
		latest := obj(t, "latest", b["latest"])
		if latest["failed"] == nil {
			return false, fmt.Sprint(b["counts"])
		}
		failed = checkCheckpoint(t, "latest.failed", latest["failed"])
		return true, ""
	})
	if failed["className"] != "failed" || failed["failure_reason"] != "CHECKPOINT_EXPIRED" {
		t.Errorf("latest.failed = %v, want an expired checkpoint", failed)
	}
	if msg, _ := failed["failure_message"].(string); msg == "" || num(t, "failure_timestamp", failed["failure_timestamp"]) <= 0 {
		t.Errorf("latest.failed = %v, want a failure message and time", failed)
	}
	id := num(t, "id", failed["id"])
	d := checkCheckpoint(t, "failed details", c.get(fmt.Sprintf("/jobs/%s/checkpoints/details/%d", job, id), http.StatusOK))
	if d["className"] != "failed" {
		t.Errorf("details of failed checkpoint %d = %v", id, d)
	}
	sub := c.get(fmt.Sprintf("/jobs/%s/checkpoints/details/%d/subtasks/source", job, id), http.StatusOK)
	for i, s := range arr(t, "subtasks", sub["subtasks"]) {
		m := obj(t, "subtask", s)
		if m["className"] == "pending" && m["status"] != "pending_or_failed" {
			t.Errorf("subtasks[%d] = %v", i, m)
		}
	}

	// A savepoint that cannot create its directory fails in its result.
	file := filepath.Join(c.savepointDir(t), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tid := c.trigger("/jobs/"+job+"/savepoints", fmt.Sprintf(`{"target-directory": %q}`, filepath.Join(file, "sub")))
	op := c.awaitOperation("/jobs/" + job + "/savepoints/" + tid)
	cause := obj(t, "failure-cause", op["failure-cause"])
	requireKeys(t, "failure-cause", cause, "class", "stack-trace")
	if _, ok := op["location"]; ok {
		t.Errorf("failed savepoint has a location: %v", op)
	}
}

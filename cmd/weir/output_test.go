package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

func sampleJob() *weirv1.JobInfo {
	return &weirv1.JobInfo{
		Id: "job-a", Name: "running-sum", State: weirv1.JobState_JOB_STATE_RUNNING,
		StartTimeMs: 1_700_000_000_000, Restarts: 1, FailureCause: "",
		Autoscaler: &weirv1.AutoscalerEntry{TimeMs: 1_700_000_002_000, LastMs: 1_700_000_012_000, Repeats: 5, Kind: "no-change",
			Reason: "every vertex is within its target utilization"},
		Vertices: []*weirv1.VertexInfo{{
			Name: "source", Operator: "sequence-source", Parallelism: 2,
			Subtasks: []*weirv1.SubtaskInfo{
				{Index: 0, Attempt: 1, State: weirv1.ExecutionState_EXECUTION_STATE_RUNNING, TaskmanagerId: "tm-1"},
				{Index: 1, Attempt: 0, State: weirv1.ExecutionState_EXECUTION_STATE_RUNNING, TaskmanagerId: "tm-2"},
			},
		}},
		Exceptions: []*weirv1.JobException{
			{TimestampMs: 1_700_000_001_000, Task: "source (1/2)", TaskmanagerId: "tm-0", Cause: "taskmanager tm-0 lost", Regions: []int32{0}},
			{TimestampMs: 1_700_000_002_000, Cause: "too many failed checkpoints", FullRestart: true, Regions: []int32{0, 1}},
		},
	}
}

func sampleCheckpoints() *weirv1.ListCheckpointsResponse {
	completed := &weirv1.CheckpointStats{
		Id: 4, Status: weirv1.CheckpointStatus_CHECKPOINT_STATUS_COMPLETED, TriggerTimestampMs: 1_700_000_004_000,
		LatestAckTimestampMs: 1_700_000_004_120, EndToEndDurationMs: 120, StateSize: 2048, CheckpointedSize: 1024,
		NumSubtasks: 4, NumAcknowledgedSubtasks: 4, ExternalPath: "/tmp/weir/job-a/chk-4",
	}
	failed := &weirv1.CheckpointStats{
		Id: 3, Status: weirv1.CheckpointStatus_CHECKPOINT_STATUS_FAILED, TriggerTimestampMs: 1_700_000_003_000,
		NumSubtasks: 4, NumAcknowledgedSubtasks: 2,
		FailureReason:      weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_EXPIRED,
		FailureTimestampMs: 1_700_000_003_500,
	}
	return &weirv1.ListCheckpointsResponse{
		Counts: &weirv1.CheckpointCounts{Restored: 1, Total: 5, InProgress: 1, Completed: 3, Failed: 1},
		History: []*weirv1.CheckpointStats{
			{Id: 5, Status: weirv1.CheckpointStatus_CHECKPOINT_STATUS_IN_PROGRESS, NumSubtasks: 4, NumAcknowledgedSubtasks: 1},
			completed, failed,
		},
		LatestCompleted: completed,
		LatestFailed:    failed,
		LatestRestored:  &weirv1.RestoredCheckpoint{Id: 2, RestoreTimestampMs: 1_700_000_002_000, ExternalPath: "/tmp/weir/job-a/chk-2"},
	}
}

// keys decodes JSON into a generic map and lists its keys sorted.
func keys(t *testing.T, v any) []string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%v is not a JSON object", v)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

func decode(t *testing.T, v any) any {
	t.Helper()
	var buf bytes.Buffer
	if err := writeJSON(&buf, v); err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, buf.String())
	}
	return out
}

func TestJobJSONFieldNames(t *testing.T) {
	j := decode(t, newJobView(sampleJob())).(map[string]any)
	if got, want := keys(t, j), sorted("id", "name", "state", "start_time", "end_time", "failure_cause", "restarts", "regions", "restarting_regions", "vertices", "autoscaler"); !slices.Equal(got, want) {
		t.Errorf("job keys = %v, want %v", got, want)
	}
	if j["state"] != "RUNNING" || j["start_time"] != 1_700_000_000_000.0 || j["end_time"] != 0.0 {
		t.Errorf("job = %v", j)
	}
	v := j["vertices"].([]any)[0]
	if got, want := keys(t, v), sorted("name", "operator", "parallelism", "subtasks"); !slices.Equal(got, want) {
		t.Errorf("vertex keys = %v, want %v", got, want)
	}
	st := v.(map[string]any)["subtasks"].([]any)[0]
	if got, want := keys(t, st), sorted("index", "attempt", "state", "taskmanager_id", "region"); !slices.Equal(got, want) {
		t.Errorf("subtask keys = %v, want %v", got, want)
	}
	if st.(map[string]any)["state"] != "RUNNING" {
		t.Errorf("subtask state = %v, want RUNNING", st)
	}

	empty := decode(t, newJobView(&weirv1.JobInfo{Id: "x", State: weirv1.JobState_JOB_STATE_CANCELED})).(map[string]any)
	if vs, ok := empty["vertices"].([]any); !ok || len(vs) != 0 {
		t.Errorf("vertices of a job without any = %v, want []", empty["vertices"])
	}
	if empty["state"] != "CANCELED" {
		t.Errorf("state = %v, want CANCELED", empty["state"])
	}
}

func TestJobStateNames(t *testing.T) {
	want := []string{"CREATED", "RUNNING", "FAILING", "FAILED", "CANCELLING", "CANCELED", "FINISHED", "RESTARTING", "SUSPENDED"}
	for i, w := range want {
		if got := weirv1.JobState(i + 1).FlinkName(); got != w {
			t.Errorf("%d.FlinkName() = %q, want %q", i+1, got, w)
		}
	}
}

var checkpointKeys = []string{"id", "status", "is_savepoint", "trigger_timestamp", "latest_ack_timestamp",
	"end_to_end_duration", "state_size", "checkpointed_size", "num_subtasks", "num_acknowledged_subtasks", "external_path"}

func TestCheckpointListJSON(t *testing.T) {
	l := decode(t, newCheckpointListView(sampleCheckpoints())).(map[string]any)
	if got, want := keys(t, l), sorted("counts", "history", "latest"); !slices.Equal(got, want) {
		t.Errorf("top-level keys = %v, want %v", got, want)
	}
	counts := l["counts"].(map[string]any)
	if got, want := keys(t, counts), sorted("restored", "total", "in_progress", "completed", "failed"); !slices.Equal(got, want) {
		t.Errorf("counts keys = %v, want %v", got, want)
	}
	if counts["total"] != 5.0 || counts["in_progress"] != 1.0 {
		t.Errorf("counts = %v", counts)
	}
	latest := l["latest"].(map[string]any)
	if got, want := keys(t, latest), sorted("completed", "savepoint", "failed", "restored"); !slices.Equal(got, want) {
		t.Errorf("latest keys = %v, want %v", got, want)
	}
	if latest["savepoint"] != nil {
		t.Errorf("latest.savepoint = %v, want null", latest["savepoint"])
	}
	if got, want := keys(t, latest["restored"]), sorted("id", "restore_timestamp", "is_savepoint", "external_path"); !slices.Equal(got, want) {
		t.Errorf("latest.restored keys = %v, want %v", got, want)
	}

	history := l["history"].([]any)
	if len(history) != 3 {
		t.Fatalf("history has %d entries, want 3", len(history))
	}
	// Failure keys belong to failed checkpoints only.
	for i, h := range history {
		want := slices.Clone(checkpointKeys)
		if h.(map[string]any)["status"] == "FAILED" {
			want = append(want, "failure_message", "failure_timestamp")
		}
		if got := keys(t, h); !slices.Equal(got, sorted(want...)) {
			t.Errorf("history[%d] keys = %v, want %v", i, got, sorted(want...))
		}
	}
	c := history[1].(map[string]any)
	if c["status"] != "COMPLETED" || c["end_to_end_duration"] != 120.0 || c["external_path"] != "/tmp/weir/job-a/chk-4" {
		t.Errorf("completed checkpoint = %v", c)
	}
	f := history[2].(map[string]any)
	if f["status"] != "FAILED" || f["failure_message"] != "CHECKPOINT_EXPIRED" {
		t.Errorf("failed checkpoint = %v", f)
	}
	if history[0].(map[string]any)["status"] != "IN_PROGRESS" {
		t.Errorf("history[0] = %v, want IN_PROGRESS", history[0])
	}

	empty := decode(t, newCheckpointListView(&weirv1.ListCheckpointsResponse{})).(map[string]any)
	if h, ok := empty["history"].([]any); !ok || len(h) != 0 {
		t.Errorf("empty history = %v, want []", empty["history"])
	}
}

func TestCheckpointDetailJSON(t *testing.T) {
	resp := &weirv1.GetCheckpointResponse{
		Checkpoint: sampleCheckpoints().GetLatestCompleted(),
		Subtasks: []*weirv1.SubtaskCheckpointStats{{
			Vertex: "sum", SubtaskIndex: 1, Acknowledged: true, AckTimestampMs: 5, EndToEndDurationMs: 90, StateSize: 100,
			Metrics: &weirv1.CheckpointMetrics{SyncDurationMs: 1, AsyncDurationMs: 2, AlignmentDurationMs: 3},
		}},
	}
	d := decode(t, newCheckpointDetailView(resp)).(map[string]any)
	if got, want := keys(t, d), sorted(append(slices.Clone(checkpointKeys), "subtasks")...); !slices.Equal(got, want) {
		t.Errorf("checkpoint detail keys = %v, want %v", got, want)
	}
	st := d["subtasks"].([]any)[0].(map[string]any)
	if st["status"] != "completed" || st["vertex"] != "sum" || st["checkpoint"].(map[string]any)["async"] != 2.0 {
		t.Errorf("subtask = %v", st)
	}
}

func TestTaskManagerJSON(t *testing.T) {
	tm := decode(t, newTaskManagerView(&weirv1.TaskManagerInfo{Id: "tm-1", Address: "h:1", Slots: 4, FreeSlots: 2})).(map[string]any)
	if got, want := keys(t, tm), sorted("id", "address", "http_address", "slots", "free_slots", "last_heartbeat"); !slices.Equal(got, want) {
		t.Errorf("taskmanager keys = %v, want %v", got, want)
	}
}

func TestTablesAreAligned(t *testing.T) {
	fixed := time.UnixMilli(1_700_000_025_500)
	now = func() time.Time { return fixed }
	t.Cleanup(func() { now = time.Now })

	jobs := []*weirv1.JobInfo{sampleJob(), {Id: "a-much-longer-job-id", Name: "x", State: weirv1.JobState_JOB_STATE_FAILED,
		StartTimeMs: 1_700_000_000_000, EndTimeMs: 1_700_000_090_000}}
	var buf bytes.Buffer
	if err := writeJobTable(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines:\n%s", len(lines), buf.String())
	}
	col := strings.Index(lines[0], "NAME")
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l[col:], "running-sum") && !strings.HasPrefix(l[col:], "x ") {
			t.Errorf("NAME column not aligned at %d:\n%s", col, buf.String())
		}
	}
	if !strings.Contains(lines[1], "25.5s") || !strings.Contains(lines[2], "1m30s") {
		t.Errorf("durations not human readable:\n%s", buf.String())
	}
}

func TestFormatHelpers(t *testing.T) {
	for ms, want := range map[int64]string{0: "0s", 850: "850ms", 2500: "2.5s", 65_000: "1m5s", 120_000: "2m", 3_600_000: "1h", 7_380_000: "2h3m"} {
		if got := formatMillis(ms); got != want {
			t.Errorf("formatMillis(%d) = %q, want %q", ms, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

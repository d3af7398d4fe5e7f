package restapi

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

func TestSummarize(t *testing.T) {
	var samples []int64
	for i := int64(10); i >= 1; i-- {
		samples = append(samples, i)
	}
	got := summarize(samples)
	// Commons Math's default estimator: position p·(n+1).
	want := statsSummary{Min: 1, Max: 10, Avg: 5, P50: 5.5, P90: 9.9, P95: 10, P99: 10, P999: 10}
	if got != want {
		t.Errorf("summarize(1..10) = %+v, want %+v", got, want)
	}
	if got := summarize([]int64{7}); got != (statsSummary{Min: 7, Max: 7, Avg: 7, P50: 7, P90: 7, P95: 7, P99: 7, P999: 7}) {
		t.Errorf("summarize(7) = %+v", got)
	}
	if got := summarize(nil); got != (statsSummary{}) {
		t.Errorf("summarize() = %+v, want zeros", got)
	}
}

func TestVertexID(t *testing.T) {
	a, b := VertexID("job1", "sum"), VertexID("job2", "sum")
	if len(a) != 32 || a == b || a != VertexID("job1", "sum") {
		t.Errorf("VertexID: %s %s", a, b)
	}
}

func TestPointer(t *testing.T) {
	for in, want := range map[string]string{
		"/cp/job/chk-3/_metadata": "/cp/job/chk-3",
		"/sp/savepoint-1":         "/sp/savepoint-1",
		"_metadata":               "_metadata",
		"":                        "",
	} {
		if got := pointer(in); got != want {
			t.Errorf("pointer(%q) = %q, want %q", in, got, want)
		}
	}
}

func roundTrip(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The core reports no unacknowledged subtasks yet, so the failed and
// pending shapes with them are checked on hand-built core answers.
func TestCheckpointSubtypes(t *testing.T) {
	job := newJobView(&weirv1.JobInfo{Id: "j", Vertices: []*weirv1.VertexInfo{
		{Name: "source", Parallelism: 2}, {Name: "sink", Parallelism: 2},
	}})
	subs := []*weirv1.SubtaskCheckpointStats{
		{Vertex: "source", SubtaskIndex: 0, Acknowledged: true, AckTimestampMs: 1010, StateSize: 5,
			Metrics: &weirv1.CheckpointMetrics{BytesBufferedDuringAlignment: 3, BytesPersistedDuringAlignment: 4, SyncDurationMs: 1}},
		{Vertex: "source", SubtaskIndex: 1, Acknowledged: false},
		{Vertex: "sink", SubtaskIndex: 1, Acknowledged: false},
	}
	failed := &weirv1.CheckpointStats{
		Id: 7, Status: weirv1.CheckpointStatus_CHECKPOINT_STATUS_FAILED, TriggerTimestampMs: 1000,
		NumSubtasks: 4, NumAcknowledgedSubtasks: 1, LatestAckTimestampMs: 1010, StateSize: 5,
		FailureReason:  weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED,
		FailureMessage: "declined by j/sink/1/0: disk full", FailureTimestampMs: 1020, EndToEndDurationMs: 20,
	}
	m := roundTrip(t, toCheckpoint(failed, sumInFlight(subs), taskStatsByID(failed, job, subs), job, subs))
	if m["className"] != "failed" || m["status"] != "FAILED" || m["failure_message"] != failed.FailureMessage ||
		m["failure_reason"] != "CHECKPOINT_DECLINED" || m["failure_timestamp"] != 1020.0 || m["end_to_end_duration"] != 20.0 {
		t.Errorf("failed = %v", m)
	}
	if m["alignment_buffered"] != 3.0 || m["processed_data"] != 3.0 || m["persisted_data"] != 4.0 {
		t.Errorf("in-flight data of failed = %v", m)
	}
	pending, _ := m["pending_subtasks"].([]any)
	if len(pending) != 2 {
		t.Fatalf("pending_subtasks = %v, want source#1 and sink#1", m["pending_subtasks"])
	}
	first := pending[0].(map[string]any)
	if first["vertex"] != "source" || first["subtask"] != 1.0 || first["vertex_id"] != VertexID("j", "source") {
		t.Errorf("pending_subtasks[0] = %v", first)
	}
	if _, ok := m["declined_subtasks"]; ok {
		t.Errorf("declined_subtasks = %v without data from the core", m["declined_subtasks"])
	}
	tasks := m["tasks"].(map[string]any)
	src := tasks[VertexID("j", "source")].(map[string]any)
	if src["num_acknowledged_subtasks"] != 1.0 || src["num_subtasks"] != 2.0 || src["end_to_end_duration"] != 10.0 {
		t.Errorf("tasks.source = %v", src)
	}
	sink := tasks[VertexID("j", "sink")].(map[string]any)
	if sink["latest_ack_timestamp"] != -1.0 || sink["end_to_end_duration"] != -1.0 {
		t.Errorf("tasks.sink = %v, want -1 times without acks", sink)
	}

	inProgress := &weirv1.CheckpointStats{Id: 8, Status: weirv1.CheckpointStatus_CHECKPOINT_STATUS_IN_PROGRESS, NumSubtasks: 4}
	m = roundTrip(t, toCheckpoint(inProgress, inFlight{}, nil, job, nil))
	if m["className"] != "in_progress" || m["status"] != "IN_PROGRESS" || m["latest_ack_timestamp"] != -1.0 || m["end_to_end_duration"] != -1.0 {
		t.Errorf("in progress = %v", m)
	}
	for _, k := range []string{"external_path", "failure_message", "pending_subtasks"} {
		if _, ok := m[k]; ok {
			t.Errorf("in progress has %q: %v", k, m)
		}
	}

	d := roundTrip(t, toSubtaskDetails(failed, job.vertices[0], subs))
	st := d["subtasks"].([]any)
	if st[0].(map[string]any)["className"] != "completed" || st[1].(map[string]any)["className"] != "pending" ||
		st[1].(map[string]any)["status"] != "pending_or_failed" {
		t.Errorf("subtasks = %v", st)
	}
}

func TestOperations(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
	}
	ops := newOperations(2, time.Minute, clock)
	key := func(id string) opKey { return opKey{job: "j", group: groupSavepoint, trigger: id} }

	release := make(chan struct{})
	if _, err := ops.start(key("a"), func(ctx context.Context) (any, error) {
		<-release
		return "done", nil
	}); err != nil {
		t.Fatal(err)
	}
	if existing, err := ops.start(key("a"), func(context.Context) (any, error) { panic("started twice") }); !existing || err != nil {
		t.Fatalf("second start of a: existing=%v err=%v", existing, err)
	}
	if found, done, _ := ops.get(key("a")); !found || done {
		t.Fatalf("a: found=%v done=%v, want in progress", found, done)
	}
	// b blocks until the store is closed.
	if _, err := ops.start(key("b"), func(ctx context.Context) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	// Full of operations in progress: refused, nothing evicted.
	if _, err := ops.start(key("c"), func(context.Context) (any, error) { return nil, nil }); !errors.Is(err, errStoreFull) {
		t.Fatalf("start c on a full store: %v", err)
	}
	close(release)
	waitDone := func(k opKey) opResult {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if _, done, res := ops.get(k); done {
				return res
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("%v did not finish", k)
		return opResult{}
	}
	if res := waitDone(key("a")); res.value != "done" || res.err != nil {
		t.Fatalf("a = %+v", res)
	}
	// Full again, but a finished: c evicts it.
	if _, err := ops.start(key("c"), func(context.Context) (any, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	if found, _, _ := ops.get(key("a")); found {
		t.Error("a survived eviction")
	}
	waitDone(key("c"))
	// Finished results expire after the store duration.
	advance(2 * time.Minute)
	if found, _, _ := ops.get(key("c")); found {
		t.Error("c did not expire")
	}
	if n := ops.len(); n != 1 {
		t.Errorf("%d operations left, want only b", n)
	}
	// close cancels b and waits for it; afterwards nothing starts.
	ops.close()
	if res := waitDone(key("b")); !errors.Is(res.err, context.Canceled) {
		t.Errorf("b = %+v, want cancelled", res)
	}
	if _, err := ops.start(key("d"), func(context.Context) (any, error) { return nil, nil }); !errors.Is(err, errStoreClosed) {
		t.Errorf("start after close: %v", err)
	}
}

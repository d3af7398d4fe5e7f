package restapi

import (
	"testing"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

func TestBackPressureLevel(t *testing.T) {
	// Flink's thresholds: up to 10% ok, up to 50% low, above high.
	for ratio, want := range map[float64]string{0: "ok", 0.1: "ok", 0.1001: "low", 0.5: "low", 0.5001: "high", 1: "high"} {
		if got := backPressureLevel(ratio); got != want {
			t.Errorf("backPressureLevel(%v) = %s, want %s", ratio, got, want)
		}
	}
}

func TestBackPressureInfo(t *testing.T) {
	load := func(bp, idle float64, in, out int64) *weirv1.SubtaskInfo_Load {
		return &weirv1.SubtaskInfo_Load{
			BackpressuredMsPerSecond: bp, IdleMsPerSecond: idle, BusyMsPerSecond: 1000 - bp - idle,
			RecordsInPerSecond: 10, RecordsOutPerSecond: 20, RecordsIn: in, RecordsOut: out,
			BackpressuredMs: 5, IdleMs: 6, BusyMs: 7, TimestampMs: 1000 + in,
		}
	}
	v := &weirv1.VertexInfo{Name: "sum", Parallelism: 3, Subtasks: []*weirv1.SubtaskInfo{
		{Index: 2, Attempt: 1, Load: load(300, 100, 2, 20)},
		{Index: 0, Load: load(50, 900, 1, 10)},
		{Index: 1}, // not reported (yet)
	}}
	job := newJobView(&weirv1.JobInfo{Id: "j", Vertices: []*weirv1.VertexInfo{v}})
	m := roundTrip(t, toBackPressureInfo(job.vertices[0]))
	if m["status"] != "ok" || m["backpressure-level"] != "low" || m["backpressureLevel"] != "low" || m["end-timestamp"] != 1002.0 {
		t.Errorf("back-pressure = %v, want ok, low (the worst subtask) at 1002", m)
	}
	subs := m["subtasks"].([]any)
	if len(subs) != 2 {
		t.Fatalf("subtasks = %v, want the two that reported", subs)
	}
	first, second := subs[0].(map[string]any), subs[1].(map[string]any)
	if first["subtask"] != 0.0 || first["backpressure-level"] != "ok" || first["ratio"] != 0.05 || first["idleRatio"] != 0.9 || first["busyRatio"] != 0.05 {
		t.Errorf("subtasks[0] = %v", first)
	}
	if second["subtask"] != 2.0 || second["attempt-number"] != 1.0 || second["backpressure-level"] != "low" || second["numRecordsOutPerSecond"] != 20.0 {
		t.Errorf("subtasks[1] = %v", second)
	}

	// Without any report, Flink's answer for a vertex it has no metrics of.
	none := newJobView(&weirv1.JobInfo{Id: "j", Vertices: []*weirv1.VertexInfo{{Name: "x", Parallelism: 1, Subtasks: []*weirv1.SubtaskInfo{{}}}}})
	if m := roundTrip(t, toBackPressureInfo(none.vertices[0])); len(m) != 1 || m["status"] != "deprecated" {
		t.Errorf("back-pressure without reports = %v, want only status deprecated", m)
	}
}

func TestIOMetrics(t *testing.T) {
	sum := &weirv1.SubtaskInfo_Load{RecordsIn: 3, RecordsOut: 30, RecordsInPerSecond: 1.5, RecordsOutPerSecond: 15, BackpressuredMs: 4, IdleMs: 5, BusyMs: 6}
	partial := newJobView(&weirv1.JobInfo{Id: "j", Vertices: []*weirv1.VertexInfo{{Name: "v", Parallelism: 2, Load: sum, LoadReported: 1}}})
	m := roundTrip(t, toIOMetrics(partial.vertices[0]))
	if m["read-records"] != 3.0 || m["write-records"] != 30.0 || m["read-records-complete"] != false || m["write-records-complete"] != false ||
		m["accumulated-backpressured-time"] != 4.0 || m["accumulated-idle-time"] != 5.0 || m["accumulated-busy-time"] != 6.0 ||
		m["read-records-per-second"] != 1.5 || m["write-records-per-second"] != 15.0 || m["read-bytes-complete"] != false {
		t.Errorf("metrics with one of two subtasks reported = %v", m)
	}
	full := newJobView(&weirv1.JobInfo{Id: "j", Vertices: []*weirv1.VertexInfo{{Name: "v", Parallelism: 2, Load: sum, LoadReported: 2}}})
	if m := roundTrip(t, toIOMetrics(full.vertices[0])); m["read-records-complete"] != true || m["write-records-complete"] != true {
		t.Errorf("metrics with every subtask reported = %v, want complete records", m)
	}
	none := newJobView(&weirv1.JobInfo{Id: "j", Vertices: []*weirv1.VertexInfo{{Name: "v", Parallelism: 2}}})
	if m := roundTrip(t, toIOMetrics(none.vertices[0])); m["read-records"] != 0.0 || m["read-records-complete"] != false {
		t.Errorf("metrics without reports = %v", m)
	}
}

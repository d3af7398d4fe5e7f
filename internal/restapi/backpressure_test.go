package restapi_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/restapi"
	"github.com/weirproject/weir/sdk"
)

// slowSink takes a millisecond per record, so whatever feeds it faster is
// back-pressured.
type slowSink struct{}

func (slowSink) Open(sdk.Context) error { return nil }
func (slowSink) ProcessRecord(sdk.Record, sdk.Collector) error {
	time.Sleep(time.Millisecond) // the work a slow sink does, not a wait
	return nil
}
func (slowSink) Close() error { return nil }

// startSlowCluster is a cluster of one TaskManager with four slots, so
// the whole job runs there, with the slow-sink operator registered (and
// those extra registers); it returns the TaskManager's /metrics URL too.
func startSlowCluster(t *testing.T, extra ...func(*sdk.Registry)) (c *cluster, metricsURL string) {
	t.Helper()
	slow := func(r *sdk.Registry) { r.RegisterOperator("slow-sink", func() sdk.Operator { return slowSink{} }) }
	c, metrics := startClusterWith(t, 1, 4, append(extra, slow)...)
	waitFor(t, 20*time.Second, "the TaskManager", func() (bool, string) {
		tms := arr(t, "taskmanagers", c.get("/taskmanagers", http.StatusOK)["taskmanagers"])
		return len(tms) == 1, fmt.Sprint(tms)
	})
	return c, metrics[0]
}

func TestBackPressure(t *testing.T) {
	c, metricsURL := startSlowCluster(t)
	job := c.submit(`name: slow-sink
checkpointing: {interval: 1h}
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: {count: 0, keys: 8, rate: 0}}
  - {name: sink, operator: slow-sink, parallelism: 2, inputs: [{from: source, partition: hash}]}
`)
	c.waitJobState(job, "RUNNING")
	source, sink := restapi.VertexID(job, "source"), restapi.VertexID(job, "sink")

	// The source emits as fast as it can into a sink that takes a
	// millisecond per record: within a few heartbeats the source reports
	// being back-pressured most of the time.
	var bp map[string]any
	start := time.Now()
	waitFor(t, 30*time.Second, "the source back-pressured high", func() (bool, string) {
		bp = c.get("/jobs/"+job+"/vertices/"+source+"/backpressure", http.StatusOK)
		return bp["status"] == "ok" && bp["backpressure-level"] == "high", fmt.Sprint(bp)
	})
	t.Logf("source back-pressured high after %v: %v", time.Since(start), bp)
	requireKeys(t, "JobVertexBackPressureInfo", bp, "status", "backpressure-level", "backpressureLevel", "end-timestamp", "subtasks")
	if bp["backpressureLevel"] != "high" {
		t.Errorf("backpressureLevel = %v, want high like backpressure-level", bp["backpressureLevel"])
	}
	if end := num(t, "end-timestamp", bp["end-timestamp"]); time.Since(time.UnixMilli(end)) > time.Minute {
		t.Errorf("end-timestamp = %d, want a recent time", end)
	}
	subtasks := arr(t, "subtasks", bp["subtasks"])
	if len(subtasks) != 2 {
		t.Fatalf("subtasks = %v, want both source subtasks", subtasks)
	}
	high := 0
	for i, s := range subtasks {
		m := obj(t, "subtask", s)
		requireKeys(t, "SubtaskBackPressureInfo", m, "subtask", "attempt-number", "backpressure-level", "backpressureLevel",
			"ratio", "idleRatio", "busyRatio", "numRecordsInPerSecond", "numRecordsOutPerSecond")
		if num(t, "subtask", m["subtask"]) != int64(i) {
			t.Errorf("subtasks[%d] = %v, want them by index", i, m)
		}
		ratio, idle, busy := m["ratio"].(float64), m["idleRatio"].(float64), m["busyRatio"].(float64)
		if sum := ratio + idle + busy; sum < 0.99 || sum > 1.01 {
			t.Errorf("subtasks[%d]: ratio %v + idleRatio %v + busyRatio %v = %v, want 1", i, ratio, idle, busy, sum)
		}
		if m["backpressure-level"] == "high" {
			high++
		}
	}
	if high == 0 {
		t.Errorf("no source subtask is back-pressured high: %v", subtasks)
	}

	// The sink does the work: busy, not back-pressured (it has no output).
	waitFor(t, 30*time.Second, "the sink busy", func() (bool, string) {
		b := c.get("/jobs/"+job+"/vertices/"+sink+"/backpressure", http.StatusOK)
		if b["status"] != "ok" || b["backpressure-level"] != "ok" {
			return false, fmt.Sprint(b)
		}
		for _, s := range arr(t, "subtasks", b["subtasks"]) {
			if obj(t, "subtask", s)["busyRatio"].(float64) < 0.5 {
				return false, fmt.Sprint(b)
			}
		}
		return true, ""
	})

	// The job details carry the vertices' records and times as Flink's
	// IOMetricsInfo, plus Weir's records per second.
	waitFor(t, 30*time.Second, "records in the job details", func() (bool, string) {
		d := c.get("/jobs/"+job, http.StatusOK)
		vs := arr(t, "vertices", d["vertices"])
		src := obj(t, "source metrics", obj(t, "source", vs[0])["metrics"])
		snk := obj(t, "sink metrics", obj(t, "sink", vs[1])["metrics"])
		for _, m := range []map[string]any{src, snk} {
			requireKeys(t, "IOMetricsInfo", m, "read-bytes", "read-bytes-complete", "write-bytes", "write-bytes-complete",
				"read-records", "read-records-complete", "write-records", "write-records-complete",
				"accumulated-backpressured-time", "accumulated-idle-time", "accumulated-busy-time",
				"read-records-per-second", "write-records-per-second")
		}
		ok := src["write-records-complete"] == true && num(t, "write-records", src["write-records"]) > 0 &&
			src["write-records-per-second"].(float64) > 0 && num(t, "accumulated-backpressured-time", src["accumulated-backpressured-time"]) > 0 &&
			snk["read-records-complete"] == true && num(t, "read-records", snk["read-records"]) > 0 &&
			snk["read-records-per-second"].(float64) > 0 && snk["accumulated-busy-time"].(float64) > 0
		return ok, fmt.Sprintf("source %v, sink %v", src, snk)
	})

	// The TaskManager exports the time split as Prometheus counters.
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"weir_task_idle_seconds_total", "weir_task_busy_seconds_total", "weir_task_backpressured_seconds_total"} {
		if !strings.Contains(string(body), "# TYPE "+name+" counter") || !strings.Contains(string(body), name+`{job_id="`+job+`",subtask_index="0",task_name="sink"}`) {
			t.Errorf("/metrics lacks the counter %s of the sink", name)
		}
	}

	t.Run("errors", func(t *testing.T) {
		const unknown = "ffffffffffffffffffffffffffffffff"
		for _, tc := range []struct {
			path    string
			code    int
			mention string
		}{
			{"/jobs/" + unknown + "/vertices/" + source + "/backpressure", 404, unknown},
			{"/jobs/" + job + "/vertices/nope/backpressure", 404, "nope"},
			{"/jobs/not-a-job/vertices/" + source + "/backpressure", 400, "not-a-job"},
		} {
			r := c.do(http.MethodGet, tc.path, "")
			if r.code != tc.code {
				t.Errorf("GET %s: status %d, want %d: %s", tc.path, r.code, tc.code, r.raw)
				continue
			}
			errs := arr(t, "errors", r.body["errors"])
			if len(r.body) != 1 || len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0]), tc.mention) {
				t.Errorf("GET %s: %s, want only errors mentioning %q", tc.path, r.raw, tc.mention)
			}
		}
		// By name, as the other vertex paths allow.
		if b := c.get("/v1/jobs/"+job+"/vertices/source/backpressure", http.StatusOK); b["status"] != "ok" {
			t.Errorf("back-pressure by vertex name = %v", b)
		}
	})
}

// TestFinishedVertexKeepsItsTotals runs a bounded job to the end: its
// vertices' record counts stay complete after the subtasks stopped sending
// heartbeats, from the totals each reported as it finished.
func TestFinishedVertexKeepsItsTotals(t *testing.T) {
	c := startCluster(t)
	job := c.submit(`name: bounded
checkpointing: {interval: 100ms}
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: {count: 2000, keys: 4}}
  - {name: sum, operator: keyed-sum, parallelism: 2, inputs: [{from: source, partition: hash}]}
  - {name: sink, operator: file-sink, parallelism: 2, inputs: [{from: sum, partition: forward}], config: {path: ` + fmt.Sprintf("%q", t.TempDir()) + `}}
`)
	c.waitJobState(job, "FINISHED")
	for _, v := range arr(t, "vertices", c.get("/jobs/"+job, http.StatusOK)["vertices"]) {
		vm := obj(t, "vertex", v)
		m := obj(t, "metrics", vm["metrics"])
		if m["read-records-complete"] != true || m["write-records-complete"] != true {
			t.Errorf("vertex %v of the finished job: metrics %v, want complete", vm["name"], m)
		}
		in, out := num(t, "read-records", m["read-records"]), num(t, "write-records", m["write-records"])
		switch vm["name"] {
		case "source":
			if out != 2000 {
				t.Errorf("source wrote %d records, want 2000", out)
			}
		case "sink":
			if in != 2000 {
				t.Errorf("sink read %d records, want 2000", in)
			}
		}
	}
}

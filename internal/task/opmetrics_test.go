package task

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestOperatorMetrics: an operator's gauges are exported with the
// subtask's labels before its own, shared across subtasks by name, and
// removed with the subtask; a second definition that disagrees panics
// (failing that subtask).
func TestOperatorMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	a := m.forSubtask(&weirv1.ExecutionAttemptID{JobId: "j", Vertex: "src", SubtaskIndex: 0})
	b := m.forSubtask(&weirv1.ExecutionAttemptID{JobId: "j", Vertex: "src", SubtaskIndex: 1})
	const help = "records behind"
	a.ops.Gauge("weir_kafka_source_lag_records", help, "topic", "partition").Set(5, "in", "0")
	g := b.ops.Gauge("weir_kafka_source_lag_records", help, "topic", "partition")
	g.Set(7, "in", "1")
	g.Set(9, "in", "3")
	g.Delete("in", "3")

	want := `
# HELP weir_kafka_source_lag_records records behind
# TYPE weir_kafka_source_lag_records gauge
weir_kafka_source_lag_records{job_id="j",partition="0",subtask_index="0",task_name="src",topic="in"} 5
weir_kafka_source_lag_records{job_id="j",partition="1",subtask_index="1",task_name="src",topic="in"} 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "weir_kafka_source_lag_records"); err != nil {
		t.Fatal(err)
	}
	a.release()
	want = `
# HELP weir_kafka_source_lag_records records behind
# TYPE weir_kafka_source_lag_records gauge
weir_kafka_source_lag_records{job_id="j",partition="1",subtask_index="1",task_name="src",topic="in"} 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "weir_kafka_source_lag_records"); err != nil {
		t.Fatal(err)
	}
	b.release()
	if n, err := testutil.GatherAndCount(reg, "weir_kafka_source_lag_records"); err != nil || n != 0 {
		t.Fatalf("after both subtasks ended: %d series (%v)", n, err)
	}

	for name, f := range map[string]func(){
		"other labels":      func() { b.ops.Gauge("weir_kafka_source_lag_records", help, "topic") },
		"wrong label count": func() { g.Set(1, "in") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

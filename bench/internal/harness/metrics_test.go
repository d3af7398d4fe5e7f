package harness

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	in := `# HELP weir_task_records_in_total Records a subtask received.
# TYPE weir_task_records_in_total counter
weir_task_records_in_total{job_id="j1",subtask_index="0",task_name="sink"} 1.5e+06
weir_task_records_in_total{job_id="j1",subtask_index="1",task_name="sink"} 500000
weir_task_records_in_total{job_id="j2",subtask_index="0",task_name="sink"} 7
go_goroutines 12
odd{a="x\"y,z",b="2"} 3
`
	m, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Sum("weir_task_records_in_total", map[string]string{"job_id": "j1", "task_name": "sink"}); got != 2e6 {
		t.Errorf("sum j1 = %v", got)
	}
	if got := m.Sum("go_goroutines", nil); got != 12 {
		t.Errorf("go_goroutines = %v", got)
	}
	if got := m.Sum("odd", map[string]string{"a": `x"y,z`, "b": "2"}); got != 3 {
		t.Errorf("escaped labels: %v", got)
	}
}

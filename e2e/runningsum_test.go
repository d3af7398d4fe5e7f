package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
)

// TestRunningSumExactlyOnce runs the bounded running-sum job on a
// JobManager and two TaskManagers, with sum and sink chained and not, and
// checks the committed output holds every running sum exactly once.
func TestRunningSumExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, chained := range []bool{true, false} {
		name := "chained"
		if !chained {
			name = "unchained"
		}
		t.Run(name, func(t *testing.T) { runningSumExactlyOnce(t, chained) })
	}
}

// runningSumExactlyOnce is TestRunningSumExactlyOnce with sum and sink
// chained or not.
func runningSumExactlyOnce(t *testing.T, chained bool) {
	const count, keys = 20000, 16
	c := startCluster(t, 2)
	out := filepath.Join(c.dir, "out")
	spec := writeSpec(t, c.dir, out, count, keys, 2500, "300ms")
	if !chained && *chaining { // -chaining=false turned it off already
		f, err := os.OpenFile(spec, os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("chaining: false\n")
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	idOut, err := c.weir("job", "submit", "-f", spec)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(idOut))
	job := c.waitJob(id, 2*time.Minute)
	if job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}

	var cps struct {
		Counts struct {
			Completed int `json:"completed"`
			Failed    int `json:"failed"`
		} `json:"counts"`
		History []struct {
			ID       int64  `json:"id"`
			Status   string `json:"status"`
			Duration int64  `json:"end_to_end_duration"`
			Acked    int    `json:"num_acknowledged_subtasks"`
			Subtasks int    `json:"num_subtasks"`
		} `json:"history"`
	}
	if err := c.weirJSON(&cps, "checkpoint", "list", id); err != nil {
		t.Fatal(err)
	}
	if cps.Counts.Completed < 3 {
		t.Fatalf("%d checkpoints completed, want at least 3", cps.Counts.Completed)
	}
	for _, h := range cps.History {
		if h.Status == "COMPLETED" && (h.Acked != 6 || h.Subtasks != 6) {
			t.Errorf("checkpoint %d completed with %d/%d acks", h.ID, h.Acked, h.Subtasks)
		}
	}
	t.Logf("%d checkpoints completed, %d failed", cps.Counts.Completed, cps.Counts.Failed)

	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
	hidden, _ := filepath.Glob(filepath.Join(out, ".*"))
	if len(hidden) > 0 {
		t.Errorf("uncommitted files left after the job finished: %v", hidden)
	}

	// The checker must catch a sink that commits an epoch twice: commit
	// one of this run's files again under another name.
	parts, _ := filepath.Glob(filepath.Join(out, "part-*"))
	if len(parts) == 0 {
		t.Fatal("no committed files")
	}
	b, err := os.ReadFile(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "part-9-9"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	broken, _ := check.ReadCommitted(out)
	if err := check.RunningSum(broken, count, keys); err == nil {
		t.Fatal("checker accepted output with a duplicated epoch")
	}

	resp, err := http.Get("http://" + c.jmHTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(metrics, []byte(`weir_job_checkpoints_completed_total{job_id="`+id)) {
		t.Errorf("JobManager metrics lack the job's completed checkpoints")
	}
}

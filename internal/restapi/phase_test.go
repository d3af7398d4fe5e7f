package restapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/weirproject/weir/sdk"
)

// stuckSnapshot is a sink whose snapshot does not return until released:
// a subtask stuck in the synchronous part of a checkpoint.
type stuckSnapshot struct{ release <-chan struct{} }

func (stuckSnapshot) Open(sdk.Context) error                        { return nil }
func (stuckSnapshot) ProcessRecord(sdk.Record, sdk.Collector) error { return nil }
func (stuckSnapshot) Close() error                                  { return nil }
func (s stuckSnapshot) SnapshotState(int64) error {
	<-s.release
	return nil
}

// TestExpiredCheckpointNamesPhases lets a checkpoint expire while the sink
// is stuck in its snapshot: the failed checkpoint names the sink among the
// subtasks that never acknowledged, with the phase its TaskManager last
// reported (Flink only says "pending_or_failed").
func TestExpiredCheckpointNamesPhases(t *testing.T) {
	release := make(chan struct{})
	c, _ := startSlowCluster(t, func(r *sdk.Registry) {
		r.RegisterOperator("stuck-snapshot", func() sdk.Operator { return stuckSnapshot{release: release} })
	})
	// Cleanups run last-in first-out: the sink lets go before the cluster stops.
	t.Cleanup(func() { close(release) })
	job := c.submit(`name: stuck
checkpointing: {interval: 1h, timeout: 3s}
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: {count: 0, keys: 8, rate: 1000}}
  - {name: sink, operator: stuck-snapshot, parallelism: 1, inputs: [{from: source, partition: hash}]}
`)
	c.waitJobState(job, "RUNNING")
	// The job is RUNNING before its tasks all are; next_checkpoint says
	// when checkpoints can start.
	waitFor(t, 20*time.Second, "checkpoints to be scheduled", func() (bool, string) {
		next := obj(t, "next_checkpoint", c.get("/jobs/"+job+"/checkpoints", http.StatusOK)["next_checkpoint"])
		return next["state"] == "SCHEDULED", fmt.Sprint(next)
	})
	tid := c.trigger("/jobs/"+job+"/checkpoints", "")
	op := c.awaitOperation("/jobs/" + job + "/checkpoints/" + tid)
	if op["failureCause"] == nil {
		t.Fatalf("checkpoint with a stuck sink completed: %v", op)
	}
	var failed map[string]any
	waitFor(t, 10*time.Second, "the failed checkpoint", func() (bool, string) {
		b := c.get("/jobs/"+job+"/checkpoints", http.StatusOK)
		latest := obj(t, "latest", b["latest"])
		if latest["failed"] == nil {
			return false, fmt.Sprintf("op %v; checkpoints %v", op, b)
		}
		failed = obj(t, "latest.failed", latest["failed"])
		return true, ""
	})
	pending := arr(t, "pending_subtasks", failed["pending_subtasks"])
	if len(pending) != 1 {
		t.Fatalf("pending_subtasks = %v, want the sink alone (the sources acknowledged)", pending)
	}
	p := obj(t, "pending_subtasks[0]", pending[0])
	requireKeys(t, "pending_subtasks[0]", p, "vertex_id", "vertex", "subtask", "phase", "phase_timestamp")
	if p["vertex"] != "sink" || p["phase"] != "SNAPSHOTTING" || num(t, "phase_timestamp", p["phase_timestamp"]) <= 0 {
		t.Errorf("pending_subtasks[0] = %v, want the sink reported SNAPSHOTTING", p)
	}
	id := num(t, "id", failed["id"])
	sub := c.get(fmt.Sprintf("/jobs/%s/checkpoints/details/%d/subtasks/sink", job, id), http.StatusOK)
	s := obj(t, "sink subtask 0", arr(t, "subtasks", sub["subtasks"])[0])
	if s["className"] != "pending" || s["status"] != "pending_or_failed" || s["phase"] != "SNAPSHOTTING" {
		t.Errorf("sink subtask 0 = %v, want Flink's pending entry with phase SNAPSHOTTING", s)
	}
}

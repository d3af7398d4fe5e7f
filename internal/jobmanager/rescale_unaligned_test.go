package jobmanager_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// slowOp forwards every record after a pause: its input backs up, so the
// job's unaligned checkpoints hold in-flight records.
type slowOp struct{}

func (slowOp) Open(sdk.Context) error { return nil }
func (slowOp) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	time.Sleep(200 * time.Microsecond)
	out.Collect(r)
	return nil
}
func (slowOp) Close() error { return nil }

// TestRescaleUnalignedUnderBackpressure: a job with unaligned checkpoints
// under back-pressure is rescaled. Its checkpoints carry in-flight records
// of channels at the old parallelism; the rescale's checkpoint is
// unaligned too, and the restore redistributes those records, so the job
// runs at the new parallelism instead of failing on every restart.
func TestRescaleUnalignedUnderBackpressure(t *testing.T) {
	c := startInProcess(t)
	reg := sdk.NewRegistry()
	reg.RegisterOperator("slow", func() sdk.Operator { return slowOp{} })
	c.StartTaskManager("tm-1", 4, reg)
	g := &weirv1.JobGraph{
		Name: "unaligned-rescale",
		Checkpointing: &weirv1.CheckpointConfig{
			Interval: durationpb.New(50 * time.Millisecond), Unaligned: true, Timeout: durationpb.New(time.Minute),
		},
		RestartStrategy: &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_FIXED_DELAY, Attempts: 2, Delay: durationpb.New(10 * time.Millisecond)},
		Vertices: []*weirv1.JobVertex{
			{Name: "src", Operator: "sequence-source", Parallelism: 2, Config: c.config(map[string]any{"count": 0, "keys": 64, "rate": 0})},
			{Name: "slow", Operator: "slow", Parallelism: 2,
				Inputs: []*weirv1.JobEdge{{Source: "src", Partitioner: weirv1.Partitioner_PARTITIONER_HASH}}},
		},
	}
	r, err := c.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetJobId()
	c.wait(id, "all running", allRunning(0))
	// Unaligned checkpoints with in-flight records have completed.
	deadline := time.Now().Add(30 * time.Second)
	for {
		stats, err := c.Client.ListCheckpoints(context.Background(), &weirv1.ListCheckpointsRequest{JobId: id})
		if err != nil {
			t.Fatal(err)
		}
		if stats.GetCounts().GetCompleted() >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoints completed: %v", stats.GetCounts())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.Client.RescaleJob(context.Background(), &weirv1.RescaleJobRequest{JobId: id, Parallelism: map[string]int32{"slow": 3}}); err != nil {
		t.Fatal(err)
	}
	j := c.wait(id, "running at the new parallelism", func(j *weirv1.JobInfo) bool {
		return j.GetState() == weirv1.JobState_JOB_STATE_RUNNING && len(j.GetVertices()[1].GetSubtasks()) == 3 && allRunning(1)(j)
	})
	if j.GetRestarts() != 0 {
		t.Fatalf("the rescaled job failed over %d times: %v", j.GetRestarts(), j.GetExceptions())
	}
}

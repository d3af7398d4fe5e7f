package coordinator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

const benchTasks = 1000

// benchJob is a job of benchTasks subtasks (the first one a source) and one
// ack per subtask, each with state and metrics as a real ack has.
func benchJob() ([]Task, []*weirv1.AcknowledgeCheckpointRequest) {
	tasks := make([]Task, benchTasks)
	acks := make([]*weirv1.AcknowledgeCheckpointRequest, benchTasks)
	for i := range benchTasks {
		a := &weirv1.ExecutionAttemptID{JobId: "job-1", Vertex: "map", SubtaskIndex: int32(i)}
		tasks[i] = Task{Attempt: a, Source: i == 0}
		acks[i] = &weirv1.AcknowledgeCheckpointRequest{
			Attempt: a,
			State: &weirv1.SubtaskState{
				Vertex: "map", SubtaskIndex: int32(i),
				KeyedState: &weirv1.StateHandle{Path: fmt.Sprintf("/ckpt/map-%d", i), Size: 1024},
				StateSize:  1024, CheckpointedSize: 1024,
			},
			Metrics: &weirv1.CheckpointMetrics{SyncDurationMs: 1, AsyncDurationMs: 2},
		}
	}
	return tasks, acks
}

// BenchmarkAcknowledge1000Tasks measures the state machine taking the 1,000
// acks of a checkpoint of 1,000 subtasks through to its Finalize effect
// (the metadata listing every subtask's state). Triggering, preparing and
// completing each checkpoint is outside the timer.
func BenchmarkAcknowledge1000Tasks(b *testing.B) {
	tasks, acks := benchJob()
	c := New(Config{JobID: "job-1", Timeout: time.Hour, MaxConcurrent: 1, Tolerable: -1, MaxParallelism: 128},
		&fakeClock{now: epoch}, rand.New(constSource(math.MaxUint64)))
	c.Start(tasks)
	var id int64
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		id++
		req := c.Trigger(Manual, false, "")
		c.IDAllocated(req, id, nil)
		c.LocationReady(id, fmt.Sprintf("/ckpt/chk-%d", id), nil)
		c.Ready()
		for _, ack := range acks {
			ack.CheckpointId = id
		}
		b.StartTimer()

		for _, ack := range acks {
			if r := c.Acknowledge(ack); r != AckSuccess {
				b.Fatalf("ack of %s: %s", ack.GetAttempt().Key(), r)
			}
		}
		effects := c.Ready()

		b.StopTimer()
		if f, ok := effects[len(effects)-1].(Finalize); !ok || len(f.Metadata.GetSubtasks()) != benchTasks {
			b.Fatalf("after the last ack: %v, want a Finalize of %d subtask states", effects, benchTasks)
		}
		c.Finalized(id, fmt.Sprintf("/ckpt/chk-%d/_metadata", id), 0, nil)
		c.Ready()
		b.StartTimer()
	}
	b.ReportMetric(float64(benchTasks*b.N)/b.Elapsed().Seconds(), "acks/s")
}

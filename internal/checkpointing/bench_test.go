package checkpointing

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/coordinator"
	"github.com/weirproject/weir/internal/ha"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

const benchTasks = 1000

// benchJob is a job of benchTasks subtasks (the first one a source) and one
// ack per subtask, each with state and metrics as a real ack has.
func benchJob() ([]coordinator.Task, []*weirv1.AcknowledgeCheckpointRequest) {
	tasks := make([]coordinator.Task, benchTasks)
	acks := make([]*weirv1.AcknowledgeCheckpointRequest, benchTasks)
	for i := range benchTasks {
		a := &weirv1.ExecutionAttemptID{JobId: "job-1", Vertex: "map", SubtaskIndex: int32(i)}
		tasks[i] = coordinator.Task{Attempt: a, Source: i == 0}
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

// nopGateway triggers by signalling triggered; notifications go nowhere.
type nopGateway struct{ triggered chan int64 }

func (g nopGateway) TriggerCheckpoint(_ context.Context, _ []*weirv1.ExecutionAttemptID, id int64, _ time.Time, _ *weirv1.CheckpointOptions) error {
	g.triggered <- id
	return nil
}

func (nopGateway) NotifyCheckpointComplete(context.Context, []*weirv1.ExecutionAttemptID, int64, int64, bool) error {
	return nil
}

func (nopGateway) NotifyCheckpointAborted(context.Context, []*weirv1.ExecutionAttemptID, int64) error {
	return nil
}

// memStorage is checkpoint storage that keeps nothing.
type memStorage struct{}

func (memStorage) InitLocation(_ context.Context, id int64, _ bool, _ string) (string, error) {
	return fmt.Sprintf("/mem/chk-%d", id), nil
}

func (memStorage) ReserveMetadata(context.Context, string) error { return nil }

func (memStorage) WriteMetadata(_ context.Context, dir string, _ *weirv1.CheckpointMetadata, _ bool) (string, error) {
	return dir + "/_metadata", nil
}

func (memStorage) Discard(context.Context, string) error                       { return nil }
func (memStorage) DiscardShared(context.Context, []string) error               { return nil }
func (memStorage) DiscardStates(context.Context, []*weirv1.SubtaskState) error { return nil }

// BenchmarkDriverAcknowledge1000Tasks is the same through the Driver, on
// the wall clock: 1,000 Driver.Acknowledge calls from one goroutine, each a
// trip through the loop (which re-arms its timer only when the deadline
// changed), up to the checkpoint's completion returned to Trigger. It includes the trigger,
// the in-memory ID counter, store and storage, and the 1,000 completion
// notifications.
func BenchmarkDriverAcknowledge1000Tasks(b *testing.B) {
	tasks, acks := benchJob()
	gw := nopGateway{triggered: make(chan int64, 1)}
	d := New(coordinator.Config{JobID: "job-1", Timeout: time.Hour, MaxConcurrent: 1, Tolerable: -1, MaxParallelism: 128}, Deps{
		Counter: ha.NewStandaloneCounter(0), Store: ha.NewStandaloneStore(1), Storage: memStorage{}, Tasks: gw,
		Metrics: NewMetrics(nil), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	go d.Run()
	defer d.Close()
	d.Start(tasks)
	b.ReportAllocs()
	for b.Loop() {
		res := make(chan Result, 1)
		go func() { res <- d.Trigger(context.Background(), coordinator.Manual, "") }()
		id := <-gw.triggered
		for _, ack := range acks {
			ack.CheckpointId = id
			d.Acknowledge(ack)
		}
		if r := <-res; r.Err != nil || r.ID != id {
			b.Fatalf("checkpoint %d: %+v", id, r)
		}
	}
	b.ReportMetric(float64(benchTasks*b.N)/b.Elapsed().Seconds(), "acks/s")
}

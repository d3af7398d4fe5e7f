package jobmanager

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/weirproject/weir/internal/freeport"
	"github.com/weirproject/weir/internal/operators"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/internal/taskmanager"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// TestMain fails the package's tests when a goroutine outlives them: every
// job's loop, its I/O and its coordinator must be gone once the JobManager
// stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestJobLifecycleInProcess runs a real JobManager and TaskManager over
// loopback gRPC: a bounded job of two independent pipelines finishes, a
// second one is cancelled, and the JobManager stops with nothing left
// running.
func TestJobLifecycleInProcess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	jm, err := New(Config{
		RPCAddr: freeport.Addr(t), HTTPAddr: freeport.Addr(t), CheckpointDir: filepath.Join(dir, "checkpoints"),
		HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Second, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	jmDone := make(chan error, 1)
	go func() { jmDone <- jm.Run(ctx) }()
	reg := sdk.NewRegistry()
	operators.Register(reg)
	tmDone := make(chan error, 1)
	go func() {
		tmDone <- taskmanager.Run(ctx, taskmanager.Config{
			ID: "tm-1", JobManager: jm.cfg.RPCAddr, RPCAddr: freeport.Addr(t), HTTPAddr: freeport.Addr(t),
			Slots: 2, Operators: reg, Logger: log, StateDir: filepath.Join(dir, "state"),
		})
	}()
	defer func() {
		cancel()
		for _, ch := range []chan error{jmDone, tmDone} {
			if err := <-ch; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("daemon: %v", err)
			}
		}
	}()

	conn, err := rpc.Dial(jm.cfg.RPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := weirv1.NewClientServiceClient(conn)

	pipeline := func(name string, count int) []*weirv1.JobVertex {
		cfg := func(m map[string]any) *structpb.Struct {
			s, err := structpb.NewStruct(m)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		return []*weirv1.JobVertex{
			{Name: name + "-source", Operator: "sequence-source", Parallelism: 1, SlotSharingGroup: name,
				Config: cfg(map[string]any{"count": count, "keys": 4, "rate": 0})},
			{Name: name + "-sink", Operator: "file-sink", Parallelism: 1, SlotSharingGroup: name,
				Config: cfg(map[string]any{"path": filepath.Join(dir, name)}),
				Inputs: []*weirv1.JobEdge{{Source: name + "-source", Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD}}},
		}
	}
	submit := func(name string, count int) string {
		g := &weirv1.JobGraph{
			Name:          name,
			Checkpointing: &weirv1.CheckpointConfig{Interval: durationpb.New(100 * time.Millisecond)},
			Vertices:      append(pipeline(name+"-a", count), pipeline(name+"-b", count)...),
		}
		var id string
		poll.UntilNoError(t, 10*time.Second, 20*time.Millisecond, "job submitted", func() (bool, error) {
			r, err := client.SubmitJob(ctx, &weirv1.SubmitJobRequest{Job: g})
			if err != nil {
				return false, nil // the JobManager may not listen yet
			}
			id = r.GetJobId()
			return true, nil
		})
		return id
	}
	wait := func(id string, want weirv1.JobState) *weirv1.JobInfo {
		var info *weirv1.JobInfo
		poll.UntilNoError(t, 30*time.Second, 20*time.Millisecond, "job "+want.String(), func() (bool, error) {
			r, err := client.GetJob(ctx, &weirv1.GetJobRequest{JobId: id})
			if err != nil {
				return false, err
			}
			info = r.GetJob()
			return info.GetState() == want, nil
		})
		return info
	}

	finished := wait(submit("bounded", 200), weirv1.JobState_JOB_STATE_FINISHED)
	if finished.GetRegions() != 2 {
		t.Errorf("bounded job has %d regions, want 2", finished.GetRegions())
	}
	for _, v := range finished.GetVertices() {
		for _, st := range v.GetSubtasks() {
			if st.GetState() != weirv1.ExecutionState_EXECUTION_STATE_FINISHED || st.GetStartTimeMs() == 0 || st.GetEndTimeMs() == 0 {
				t.Errorf("%s/%d: %v, start %d, end %d", v.GetName(), st.GetIndex(), st.GetState(), st.GetStartTimeMs(), st.GetEndTimeMs())
			}
		}
	}

	unbounded := submit("unbounded", 0)
	wait(unbounded, weirv1.JobState_JOB_STATE_RUNNING)
	if _, err := client.CancelJob(ctx, &weirv1.CancelJobRequest{JobId: unbounded}); err != nil {
		t.Fatal(err)
	}
	wait(unbounded, weirv1.JobState_JOB_STATE_CANCELED)
	if _, err := client.CancelJob(ctx, &weirv1.CancelJobRequest{JobId: unbounded}); err == nil {
		t.Error("a cancelled job was cancelled again")
	}
}

package taskmanager

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/weirproject/weir/internal/freeport"
	"github.com/weirproject/weir/internal/jmcmd"
	"github.com/weirproject/weir/internal/jobmanager"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/rpc"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// asLeader runs a JobManager and a TaskManager registered with it, and
// returns a client of the TaskManager that calls as that JobManager does:
// the test plays a JobManager whose messages race each other.
func asLeader(t *testing.T, tmID string) weirv1grpc.TaskExecutorServiceClient {
	t.Helper()
	addr := freeport.Addr(t)
	jmCfg := jobmanager.Config{
		RPCAddr: addr, HTTPAddr: freeport.Addr(t), CheckpointDir: t.TempDir(),
		HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: time.Second, Logger: discard,
	}
	jm, err := jobmanager.New(jmCfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- jmcmd.Serve(ctx, jm, jmCfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("jobmanager: %v", err)
		}
	})
	cfg := Config{ID: tmID, JobManager: addr}
	startTaskManager(t, cfg, nil)
	poll.UntilNoError(t, 20*time.Second, 20*time.Millisecond, "registered", listed(t, addr, tmID))

	var tmAddr string
	lc := weirv1grpc.NewClientServiceClient(dial(t, addr, ""))
	poll.UntilNoError(t, 10*time.Second, 20*time.Millisecond, "taskmanager address", func() (bool, error) {
		r, err := lc.ListTaskManagers(context.Background(), &weirv1.ListTaskManagersRequest{})
		for _, tm := range r.GetTaskmanagers() {
			if tm.GetId() == tmID {
				tmAddr = tm.GetAddress()
			}
		}
		return tmAddr != "", err
	})
	return weirv1grpc.NewTaskExecutorServiceClient(dial(t, tmAddr, jm.Configuration()["jobmanager.id"]))
}

func dial(t *testing.T, addr, asJobManager string) *grpc.ClientConn {
	t.Helper()
	var c *grpc.ClientConn
	var err error
	if asJobManager != "" {
		c, err = rpc.Dial(addr, rpc.Credentials(nil, nil), rpc.StampJobManager(asJobManager))
	} else {
		c, err = rpc.Dial(addr, rpc.Credentials(nil, nil))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sourceTask is a subtask of a job the JobManager does not run: an
// endless source.
func sourceTask(t *testing.T, job string) *weirv1.TaskDeploymentDescriptor {
	cfg, err := structpb.NewStruct(map[string]any{"rate": 100.0})
	if err != nil {
		t.Fatal(err)
	}
	return &weirv1.TaskDeploymentDescriptor{
		Attempt:  &weirv1.ExecutionAttemptID{JobId: job, Vertex: "src", Attempt: 0, Session: "s1"},
		Operator: "sequence-source", Config: cfg, Parallelism: 1, MaxParallelism: 128,
		CheckpointOptions: &weirv1.CheckpointOptions{ExactlyOnce: true}, CheckpointDir: t.TempDir(),
	}
}

// TestCancelOvertakesDeploy: a cancel that arrives before its deploy
// finds nothing and says so; the deploy that follows is refused, so no
// attempt runs that the JobManager believes cancelled.
func TestCancelOvertakesDeploy(t *testing.T) {
	tm := asLeader(t, "tm-overtake")
	d := sourceTask(t, "job-overtake")
	ctx := context.Background()
	if _, err := tm.CancelTask(ctx, &weirv1.CancelTaskRequest{Attempt: d.GetAttempt()}); status.Code(err) != codes.NotFound {
		t.Fatalf("cancel before deploy: %v, want NotFound", err)
	}
	_, err := tm.DeployTask(ctx, &weirv1.DeployTaskRequest{Task: d})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("deploy after its cancel: %v, want FailedPrecondition", err)
	}
	if _, err := tm.NotifyCheckpointAborted(ctx, &weirv1.NotifyCheckpointAbortedRequest{Attempt: d.GetAttempt(), CheckpointId: 1}); status.Code(err) != codes.NotFound {
		t.Fatalf("the refused attempt runs: %v", err)
	}
}

// TestStrayAttemptCancelled: an attempt runs that no job of the
// JobManager has (here deployed by hand, as a deploy that overtook its
// cancel on an older TaskManager would): the TaskManager lists it in its
// heartbeat and the JobManager cancels it.
func TestStrayAttemptCancelled(t *testing.T) {
	tm := asLeader(t, "tm-stray")
	d := sourceTask(t, "job-stray")
	ctx := context.Background()
	if _, err := tm.DeployTask(ctx, &weirv1.DeployTaskRequest{Task: d}); err != nil {
		t.Fatal(err)
	}
	poll.UntilNoError(t, 20*time.Second, 20*time.Millisecond, "the stray attempt is cancelled", func() (bool, error) {
		_, err := tm.NotifyCheckpointAborted(ctx, &weirv1.NotifyCheckpointAbortedRequest{Attempt: d.GetAttempt(), CheckpointId: 1})
		return status.Code(err) == codes.NotFound, nil
	})
}

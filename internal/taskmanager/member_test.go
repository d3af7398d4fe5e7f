package taskmanager

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/freeport"
	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/jmcmd"
	"github.com/weirproject/weir/internal/jobmanager"
	"github.com/weirproject/weir/internal/operators/all"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/rpc"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
	"github.com/weirproject/weir/sdk"
)

// These tests run the real registration path over loopback gRPC: an
// in-process JobManager and a TaskManager started by run, as the daemons
// are. The state machine's rules are tested step by step in
// internal/registration; here the driver must carry them out.

var discard = slog.New(slog.DiscardHandler)

// startJobManager runs a JobManager at rpcAddr until the returned stop is
// called; stop waits until it returned.
func startJobManager(t *testing.T, rpcAddr string) (stop func()) {
	t.Helper()
	cfg := jobmanager.Config{
		RPCAddr: rpcAddr, HTTPAddr: freeport.Addr(t), CheckpointDir: t.TempDir(),
		HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Second, Logger: discard,
	}
	jm, err := jobmanager.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- jmcmd.Serve(ctx, jm, cfg) }()
	return func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("jobmanager %s: %v", rpcAddr, err)
		}
	}
}

// startTaskManager runs a TaskManager following leaders (nil: cfg's
// JobManager) until the test ends.
func startTaskManager(t *testing.T, cfg Config, leaders leaderSource) {
	t.Helper()
	reg := sdk.NewRegistry()
	all.Register(reg)
	cfg.RPCAddr, cfg.HTTPAddr, cfg.Slots, cfg.Operators = freeport.Addr(t), freeport.Addr(t), 2, reg
	cfg.Logger, cfg.StateDir = discard, t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, leaders) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("taskmanager: %v", err)
		}
	})
}

// listed reports whether the JobManager at addr lists the TaskManager id
// with all its slots free: it registered, and a heartbeat confirmed the
// registration (the JobManager offers no slot of an unconfirmed one).
func listed(t *testing.T, addr, id string) func() (bool, error) {
	conn, err := rpc.Dial(addr, rpc.Credentials(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := weirv1grpc.NewClientServiceClient(conn)
	return func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := client.ListTaskManagers(ctx, &weirv1.ListTaskManagersRequest{})
		if err != nil {
			return false, nil // not listening yet
		}
		for _, tm := range r.GetTaskmanagers() {
			if tm.GetId() == id {
				return tm.GetFreeSlots() == tm.GetSlots(), nil
			}
		}
		return false, nil
	}
}

// TestRegistersWithRestartedJobManager: a TaskManager registers and
// heartbeats; its JobManager stops and a new one starts at the same
// address, knowing nothing of it; the TaskManager registers with the new
// one.
func TestRegistersWithRestartedJobManager(t *testing.T) {
	addr := freeport.Addr(t)
	stop := startJobManager(t, addr)
	startTaskManager(t, Config{ID: "tm-restart", JobManager: addr}, nil)
	poll.UntilNoError(t, 20*time.Second, 20*time.Millisecond, "registered with the first jobmanager", listed(t, addr, "tm-restart"))

	stop()
	stop = startJobManager(t, addr)
	defer stop()
	poll.UntilNoError(t, 20*time.Second, 20*time.Millisecond, "registered with the restarted jobmanager", listed(t, addr, "tm-restart"))
}

// chanLeader is a leader source a test moves by hand.
type chanLeader chan ha.LeaderInfo

func (c chanLeader) follow(ctx context.Context) <-chan ha.LeaderInfo {
	out := make(chan ha.LeaderInfo)
	go func() {
		defer close(out)
		for {
			select {
			case info := <-c:
				select {
				case out <- info:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// TestFollowsLeaderChange: the leader moves to another JobManager; the
// TaskManager registers there at once, and stops heartbeating the old
// one, which then declares it lost.
func TestFollowsLeaderChange(t *testing.T) {
	a, b := freeport.Addr(t), freeport.Addr(t)
	t.Cleanup(startJobManager(t, a))
	t.Cleanup(startJobManager(t, b))
	leaders := make(chanLeader)
	startTaskManager(t, Config{ID: "tm-follow", JobManager: a}, leaders)

	// No leader known: the TaskManager waits.
	leaders <- ha.LeaderInfo{}
	leaders <- ha.LeaderInfo{ID: "jm-a", RPCAddr: a}
	poll.UntilNoError(t, 20*time.Second, 20*time.Millisecond, "registered with jobmanager a", listed(t, a, "tm-follow"))

	leaders <- ha.LeaderInfo{ID: "jm-b", RPCAddr: b}
	poll.UntilNoError(t, 20*time.Second, 20*time.Millisecond, "registered with jobmanager b", listed(t, b, "tm-follow"))
	inA := listed(t, a, "tm-follow")
	poll.UntilNoError(t, 20*time.Second, 50*time.Millisecond, "jobmanager a lost the taskmanager", func() (bool, error) {
		ok, err := inA()
		return !ok, err
	})
}

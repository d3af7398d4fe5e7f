package taskmanager

import (
	"context"
	"time"

	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/leaderlink"
	"github.com/weirproject/weir/internal/registration"
	"github.com/weirproject/weir/internal/rpc"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// member drives the registration state machine (internal/registration)
// through a leaderlink.Link: one goroutine owns it and feeds it leader
// changes, its deadlines and the answers of the calls it asked for, which
// run on goroutines of their own so that the loop never waits on the
// network.
type member struct {
	s    *Server
	sm   *registration.Member
	link *leaderlink.Link
	// answers carries call outcomes to the loop, as functions run there.
	answers chan func()
	// prev is every running subtask's load at the last heartbeat, so each
	// heartbeat reports rates over its own interval. Only the loop uses it.
	prev map[string]loadMark
}

// stayRegistered registers with the JobManager leader and heartbeats until
// ctx ends. When the leader changes or stays unreachable, the subtasks run
// on and the next registration reports them: the leader adopts those its
// jobs still have and the others are cancelled. Without a registration
// for the orphan timeout, they are all cancelled.
func (s *Server) stayRegistered(ctx context.Context, leaders <-chan ha.LeaderInfo) {
	m := &member{s: s, sm: registration.New(wallClock{}, s.cfg.OrphanTimeout), answers: make(chan func()), prev: map[string]loadMark{}}
	m.link = leaderlink.New(m.sm, leaderlink.Deps{
		Context:  ctx,
		Executor: m,
		Post: func(f func()) {
			select {
			case m.answers <- f:
			case <-ctx.Done():
			}
		},
		JobManager:  m,
		TaskManager: m,
		Logger:      s.log,
	})
	defer m.link.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	defer func() {
		// Run returns only once etcd's observer is gone: it ends with ctx
		// and then closes the channel.
		for leaders != nil {
			if _, ok := <-leaders; !ok {
				leaders = nil
			}
		}
	}()
	var wake <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case info, ok := <-leaders:
			if !ok {
				// Nothing will change any more: keep the last leader.
				leaders = nil
				continue
			}
			s.log.Debug("jobmanager leader", "address", info.RPCAddr, "jobmanager_id", info.ID)
			m.sm.LeaderChanged(info.RPCAddr)
		case f := <-m.answers:
			f()
		case <-wake:
			wake = nil
			m.sm.Tick()
		}
		m.link.Drain()
		wake = nil
		if next := m.sm.NextDeadline(); !next.IsZero() {
			// Since Go 1.23 Reset also drops an expiry the channel still
			// held, so a stale one never fires for the new deadline.
			timer.Reset(max(time.Until(next), 0))
			wake = timer.C
		} else {
			timer.Stop()
		}
	}
}

// Go runs a call on a goroutine of the Server's.
func (m *member) Go(ctx context.Context, io func(context.Context)) {
	m.s.wg.Add(1)
	go func() {
		defer m.s.wg.Done()
		io(ctx)
	}()
}

func (m *member) Unregistered(reason string) {
	m.s.log.Warn("no longer registered with the jobmanager", "reason", reason)
}

func (m *member) CancelAll(reason string, keep []string) {
	if n := m.s.cancelAll(keep); n > 0 {
		m.s.log.Warn("cancelled subtasks", "count", n, "reason", reason)
	}
	if len(keep) > 0 {
		m.s.log.Info("subtasks adopted by the jobmanager run on", "count", len(keep))
	}
}

func (m *member) Fence(e registration.Fence) {
	s := m.s
	s.mu.Lock()
	s.mu.jobManagerID = e.JobManagerID
	s.mu.Unlock()
	s.log.Info("registered with jobmanager", "jobmanager_id", e.JobManagerID, "registration_id", e.Registration)
}

// Register and Heartbeat take the JobManager's client when they are
// prepared, on the loop, in the order of the leader changes: a call
// abandoned with its leader must not switch the connection back to it.
func (m *member) Register(e registration.Register) func(context.Context) (registration.Registration, error) {
	s := m.s
	req := &weirv1.RegisterTaskManagerRequest{
		TaskmanagerId: s.cfg.ID, RpcAddress: s.addr, Slots: int32(s.cfg.Slots), HttpAddress: s.httpAddr,
		Attempts: s.attemptReports(),
	}
	jm, err := s.jobManager(e.Addr)
	return func(ctx context.Context) (registration.Registration, error) {
		if err != nil {
			return registration.Registration{}, err
		}
		ctx, cancel := context.WithTimeout(ctx, e.Timeout)
		defer cancel()
		resp, err := jm.RegisterTaskManager(ctx, req)
		keep := make([]string, 0, len(resp.GetKeep()))
		for _, a := range resp.GetKeep() {
			keep = append(keep, a.Key())
		}
		return registration.Registration{
			ID: resp.GetRegistrationId(), JobManagerID: resp.GetJobmanagerId(),
			Interval: time.Duration(resp.GetHeartbeatIntervalMs()) * time.Millisecond,
			Timeout:  time.Duration(resp.GetHeartbeatTimeoutMs()) * time.Millisecond,
			Keep:     keep,
		}, err
	}
}

// Heartbeat measures the subtasks' loads when it is prepared, on the loop,
// which owns the marks of the last one.
func (m *member) Heartbeat(e registration.Heartbeat) func(context.Context) (bool, error) {
	s := m.s
	req := &weirv1.HeartbeatRequest{
		TaskmanagerId: s.cfg.ID, RegistrationId: e.Registration, Loads: s.measureLoads(time.Now(), m.prev),
		Running: s.live(),
	}
	jm, err := s.jobManager(e.Addr)
	return func(ctx context.Context) (bool, error) {
		if err != nil {
			return false, err
		}
		ctx, cancel := context.WithTimeout(ctx, e.Timeout)
		defer cancel()
		resp, err := jm.Heartbeat(ctx, req)
		return resp.GetReregister(), err
	}
}

// jobManager returns a client of the JobManager at addr, redialling when
// the connection goes elsewhere: a new leader's.
func (s *Server) jobManager(addr string) (weirv1grpc.JobManagerGatewayServiceClient, error) {
	s.jmMu.Lock()
	defer s.jmMu.Unlock()
	if addr == s.jmAddr && s.jmClient != nil {
		return s.jmClient, nil
	}
	conn, err := rpc.Dial(addr, s.creds)
	if err != nil {
		return nil, err
	}
	if s.jmConn != nil {
		// An RPC still running on it was abandoned with its leader.
		s.jmConn.Close()
	}
	s.jmConn, s.jmAddr, s.jmClient = conn, addr, weirv1grpc.NewJobManagerGatewayServiceClient(conn)
	return s.jmClient, nil
}

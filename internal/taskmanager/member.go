package taskmanager

import (
	"context"
	"time"

	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/registration"
	"github.com/weirproject/weir/internal/rpc"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// member drives the registration state machine (internal/registration):
// one goroutine owns it and feeds it leader changes, its deadlines and the
// answers of the RPCs it asked for, which run on goroutines of their own
// so that the loop never waits on the network.
type member struct {
	s  *Server
	sm *registration.Member
	// answers carries RPC outcomes to the loop, as functions run there.
	answers chan func()
	// cancelRPC abandons the newest RPC; the state machine sends one only
	// when it no longer waits for the one before.
	cancelRPC context.CancelFunc
	// prev is every running subtask's load at the last heartbeat, so each
	// heartbeat reports rates over its own interval. Only the loop uses it.
	prev map[string]loadMark
}

// stayRegistered registers with the JobManager leader and heartbeats until
// ctx ends. When the leader stays unreachable for its heartbeat timeout,
// or another JobManager leads, the subtasks are cancelled: their
// checkpoints can no longer complete, and the leader redeploys the jobs
// from checkpoints.
func (s *Server) stayRegistered(ctx context.Context, leaders <-chan ha.LeaderInfo) {
	m := &member{s: s, sm: registration.New(wallClock{}), answers: make(chan func()), prev: map[string]loadMark{}}
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
		// Carrying out an effect may feed the state machine at once (a
		// dial that fails); what that decides is carried out too.
		for effects := m.sm.Ready(); len(effects) > 0; effects = m.sm.Ready() {
			for _, e := range effects {
				m.apply(ctx, e)
			}
		}
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

func (m *member) apply(ctx context.Context, e registration.Effect) {
	s := m.s
	switch e := e.(type) {
	case registration.Unregistered:
		s.log.Warn("no longer registered with the jobmanager", "reason", e.Reason)
	case registration.CancelSubtasks:
		// On the loop, and waited for: a Register after it must not let a
		// new leader deploy next to subtasks of the old one.
		if n := s.cancelAll(); n > 0 {
			s.log.Warn("cancelled subtasks", "count", n, "reason", e.Reason)
		}
	case registration.Register:
		m.register(ctx, e)
	case registration.Fence:
		s.mu.Lock()
		s.mu.jobManagerID = e.JobManagerID
		s.mu.Unlock()
		s.log.Info("registered with jobmanager", "jobmanager_id", e.JobManagerID, "registration_id", e.Registration)
	case registration.Heartbeat:
		m.heartbeat(ctx, e)
	}
}

func (m *member) register(ctx context.Context, e registration.Register) {
	s := m.s
	jm, err := s.jobManager(e.Addr)
	if err != nil {
		s.log.Debug("registration failed; retrying", "jobmanager", e.Addr, "err", err)
		m.sm.Registered(e.Seq, registration.Registration{}, err)
		return
	}
	req := &weirv1.RegisterTaskManagerRequest{
		TaskmanagerId: s.cfg.ID, RpcAddress: s.addr, Slots: int32(s.cfg.Slots), HttpAddress: s.httpAddr,
	}
	m.call(ctx, e.Timeout, func(ctx context.Context) func() {
		resp, err := jm.RegisterTaskManager(ctx, req)
		return func() {
			r := registration.Registration{
				ID: resp.GetRegistrationId(), JobManagerID: resp.GetJobmanagerId(),
				Interval: time.Duration(resp.GetHeartbeatIntervalMs()) * time.Millisecond,
				Timeout:  time.Duration(resp.GetHeartbeatTimeoutMs()) * time.Millisecond,
			}
			if !m.sm.Registered(e.Seq, r, err) {
				s.log.Debug("late registration answer ignored", "jobmanager", e.Addr, "err", err)
			} else if err != nil {
				s.log.Debug("registration failed; retrying", "jobmanager", e.Addr, "err", err)
			}
		}
	})
}

func (m *member) heartbeat(ctx context.Context, e registration.Heartbeat) {
	s := m.s
	jm, err := s.jobManager(e.Addr)
	if err != nil {
		m.sm.HeartbeatDone(e.Seq, false, err)
		return
	}
	req := &weirv1.HeartbeatRequest{
		TaskmanagerId: s.cfg.ID, RegistrationId: e.Registration, Loads: s.measureLoads(time.Now(), m.prev),
		Running: s.live(),
	}
	m.call(ctx, e.Timeout, func(ctx context.Context) func() {
		resp, err := jm.Heartbeat(ctx, req)
		return func() {
			if !m.sm.HeartbeatDone(e.Seq, err == nil && resp.GetReregister(), err) {
				s.log.Debug("late heartbeat answer ignored", "jobmanager", e.Addr, "err", err)
			} else if err != nil {
				s.log.Debug("heartbeat failed", "jobmanager", e.Addr, "err", err)
			}
		}
	})
}

// call runs rpc on a goroutine of the Server's, bounded by timeout, and
// hands the function it returns to the loop. A call abandons the one
// before it: the state machine no longer waits for that answer.
func (m *member) call(ctx context.Context, timeout time.Duration, rpc func(context.Context) func()) {
	if m.cancelRPC != nil {
		m.cancelRPC()
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	m.cancelRPC = cancel
	m.s.wg.Add(1)
	go func() {
		defer m.s.wg.Done()
		defer cancel()
		answer := rpc(cctx)
		select {
		case m.answers <- answer:
		case <-ctx.Done():
		}
	}()
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

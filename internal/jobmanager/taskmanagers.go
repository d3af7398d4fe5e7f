package jobmanager

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/rpc"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// taskManager is the JobManager's side of a registration (a
// members.Member's Data): the connection to the TaskManager.
type taskManager struct {
	id             string
	registration   string
	addr, httpAddr string
	conn           *grpc.ClientConn
	client         weirv1grpc.TaskExecutorServiceClient
	// identity names the certificate it registered with (mutual TLS;
	// "" without): only that certificate may report for its subtasks.
	identity string
	// loads are the subtask loads of the latest heartbeat.
	loads subtaskLoads
}

// RegisterTaskManager admits a TaskManager or renews its registration.
func (s *Server) RegisterTaskManager(ctx context.Context, req *weirv1.RegisterTaskManagerRequest) (*weirv1.RegisterTaskManagerResponse, error) {
	if req.GetTaskmanagerId() == "" || req.GetRpcAddress() == "" || req.GetSlots() < 1 {
		return nil, status.Error(codes.InvalidArgument, "jobmanager: registration needs taskmanager_id, rpc_address and slots >= 1")
	}
	identity := peerIdentity(ctx)
	s.mu.Lock()
	var old *taskManager
	if m := s.mu.tms.Get(req.GetTaskmanagerId()); m != nil {
		old = m.Data
	}
	s.mu.Unlock()
	if old != nil && old.identity != identity {
		// Taking over a registered TaskManager's ID would fail its
		// subtasks and receive its next ones.
		s.foreignReports.WithLabelValues("register").Inc()
		s.log.Warn("registration under another TaskManager's ID refused", "taskmanager_id", old.id,
			"taskmanager_identity", old.identity, "caller_identity", identity)
		return nil, status.Errorf(codes.PermissionDenied, "jobmanager: TaskManager %s is registered with another certificate", old.id)
	}
	conn, err := rpc.Dial(req.GetRpcAddress(), s.creds, rpc.StampJobManager(s.id))
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	tm := &taskManager{
		id: req.GetTaskmanagerId(), registration: newID(), addr: req.GetRpcAddress(), httpAddr: req.GetHttpAddress(),
		conn: conn, client: weirv1grpc.NewTaskExecutorServiceClient(conn), identity: identity,
	}
	s.mu.Lock()
	replaced := s.mu.tms.Register(tm.id, tm.registration, int(req.GetSlots()), tm, s.now())
	s.tmGauge.Set(float64(s.mu.tms.Len()))
	s.mu.Unlock()
	if replaced != nil {
		// A TaskManager registering again restarted or lost us: whatever it
		// ran for us is gone.
		replaced.Data.conn.Close()
		s.taskManagerLost(tm.id, "taskmanager registered again")
	}
	go s.watchConnection(tm)
	keep := s.adoptReported(tm, req.GetAttempts())
	s.log.Info("taskmanager registered", "taskmanager_id", tm.id, "address", tm.addr, "slots", req.GetSlots(), "identity", tm.identity,
		"subtasks_reported", len(req.GetAttempts()), "subtasks_kept", len(keep))
	return &weirv1.RegisterTaskManagerResponse{
		RegistrationId: tm.registration, JobmanagerId: s.id,
		HeartbeatIntervalMs: s.cfg.HeartbeatInterval.Milliseconds(), HeartbeatTimeoutMs: s.cfg.HeartbeatTimeout.Milliseconds(),
		Keep: keep,
	}, nil
}

// adoptReported hands a registering TaskManager's reports to their jobs
// and returns the attempts it is to go on running: those a job adopts
// from the previous leader, or still has as current there. The
// TaskManager cancels the others before its first heartbeat.
func (s *Server) adoptReported(tm *taskManager, reports []*weirv1.AttemptReport) []*weirv1.ExecutionAttemptID {
	byJob := map[string][]*weirv1.AttemptReport{}
	for _, r := range reports {
		byJob[r.GetAttempt().GetJobId()] = append(byJob[r.GetAttempt().GetJobId()], r)
	}
	var keep []*weirv1.ExecutionAttemptID
	for _, id := range slices.Sorted(maps.Keys(byJob)) {
		j, ok := s.job(id)
		if !ok || j.isClosed() {
			continue
		}
		kept := j.adopt(tm, byJob[id])
		keep = append(keep, kept...)
		s.adopted.Add(float64(len(kept)))
	}
	return keep
}

// Heartbeat renews a TaskManager's lease; an unknown one must register.
func (s *Server) Heartbeat(_ context.Context, req *weirv1.HeartbeatRequest) (*weirv1.HeartbeatResponse, error) {
	s.mu.Lock()
	m, confirmed := s.mu.tms.Heartbeat(req.GetTaskmanagerId(), req.GetRegistrationId(), s.now())
	if m == nil {
		s.mu.Unlock()
		return &weirv1.HeartbeatResponse{Reregister: true}, nil
	}
	tm := m.Data
	tm.loads.replace(req.GetLoads())
	for _, r := range req.GetLoads() {
		if len(r.GetCheckpoints()) == 0 && r.Backlog == nil {
			continue
		}
		// Held s.mu: the job map is read directly; these only post.
		j, ok := s.mu.jobs[r.GetAttempt().GetJobId()]
		if !ok {
			continue
		}
		if len(r.GetCheckpoints()) > 0 {
			j.coord.Progress(r.GetAttempt(), r.GetCheckpoints())
		}
		if r.Backlog != nil {
			j.coord.SourceBacklog(r.GetAttempt(), r.GetBacklog())
		}
	}
	byJob := map[string][]*weirv1.ExecutionAttemptID{}
	var strays []*weirv1.ExecutionAttemptID
	for _, a := range req.GetRunning() {
		if j, ok := s.mu.jobs[a.GetJobId()]; ok && !j.isClosed() {
			byJob[a.GetJobId()] = append(byJob[a.GetJobId()], a)
		} else {
			strays = append(strays, a)
		}
	}
	jobs := make(map[string]*jobMaster, len(byJob))
	for id := range byJob {
		jobs[id] = s.mu.jobs[id]
	}
	s.mu.Unlock()
	// Reconciliation: attempts the TaskManager runs that no job here has
	// as current (a deploy that arrived after its cancel on an older
	// TaskManager, a job that ended) are cancelled there.
	s.cancelStrays(tm, strays)
	for id, as := range byJob {
		jobs[id].reconcile(tm, as)
	}
	if confirmed {
		// Its slots are new: jobs waiting for slots may take them.
		s.scheduleWaiting()
	}
	return &weirv1.HeartbeatResponse{}, nil
}

// cancelStrays cancels attempts a TaskManager runs that no job here
// knows, without waiting: the next heartbeat shows whether they stopped.
func (s *Server) cancelStrays(tm *taskManager, strays []*weirv1.ExecutionAttemptID) {
	for _, a := range strays {
		s.strays.Inc()
		s.log.Warn("cancelling a subtask attempt no job runs", "taskmanager_id", tm.id, "attempt", a.Key())
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RPCTimeout)
			defer cancel()
			if _, err := tm.client.CancelTask(ctx, &weirv1.CancelTaskRequest{Attempt: a}); err != nil && status.Code(err) != codes.NotFound {
				s.log.Info("cancelling a stray attempt failed; the next heartbeat retries", "attempt", a.Key(), "err", err)
			}
		}()
	}
}

// watchHeartbeats declares TaskManagers lost when their heartbeats stop.
func (s *Server) watchHeartbeats(ctx context.Context) {
	t := time.NewTicker(s.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, tm := range s.dropSilent(s.now()) {
				s.tmLost.WithLabelValues("heartbeat_timeout").Inc()
				s.log.Warn("taskmanager lost", "taskmanager_id", tm.id, "cause", "heartbeat timeout", "timeout", s.cfg.HeartbeatTimeout)
				tm.conn.Close()
				s.taskManagerLost(tm.id, fmt.Sprintf("taskmanager %s lost: no heartbeat for %v", tm.id, s.cfg.HeartbeatTimeout))
			}
		}
	}
}

// dropSilent unregisters and returns the TaskManagers whose last heartbeat
// is more than the heartbeat timeout before now. Both times come from
// s.now with their monotonic readings, so the JobManager's clock being set
// neither drops TaskManagers that heartbeat nor keeps silent ones.
func (s *Server) dropSilent(now time.Time) []*taskManager {
	var lost []*taskManager
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.mu.tms.Expire(now, s.cfg.HeartbeatTimeout) {
		lost = append(lost, m.Data)
	}
	s.tmGauge.Set(float64(s.mu.tms.Len()))
	return lost
}

func (s *Server) taskManagerLost(id, cause string) {
	for _, j := range s.jobsSorted() {
		j.taskManagerLost(id, cause)
	}
}

func (s *Server) taskManager(id string) (*taskManager, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.mu.tms.Get(id); m != nil {
		return m.Data, true
	}
	return nil, false
}

// freeSlots lists a free slot per entry, spread across TaskManagers so
// consecutive subtasks land on different TaskManagers.
func (s *Server) freeSlots() []*taskManager {
	s.mu.Lock()
	defer s.mu.Unlock()
	used := map[string]int{}
	for _, j := range s.mu.jobs {
		for tm, n := range j.current().held {
			used[tm] += n
		}
	}
	var slots []*taskManager
	for _, id := range s.mu.tms.FreeSlots(used) {
		slots = append(slots, s.mu.tms.Get(id).Data)
	}
	return slots
}

// scheduleWaiting places jobs that waited for slots.
func (s *Server) scheduleWaiting() {
	for _, j := range s.jobsSorted() {
		j.trySchedule()
	}
}

// ListTaskManagers lists the registered TaskManagers.
func (s *Server) ListTaskManagers(context.Context, *weirv1.ListTaskManagersRequest) (*weirv1.ListTaskManagersResponse, error) {
	free := map[string]int{}
	for _, tm := range s.freeSlots() {
		free[tm.id]++
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &weirv1.ListTaskManagersResponse{}
	for _, m := range s.mu.tms.All() {
		out.Taskmanagers = append(out.Taskmanagers, &weirv1.TaskManagerInfo{
			Id: m.ID, Address: m.Data.addr, HttpAddress: m.Data.httpAddr, Slots: int32(m.Slots),
			FreeSlots: int32(free[m.ID]), LastHeartbeatMs: m.LastHeartbeat.UnixMilli(),
		})
	}
	return out, nil
}

// watchConnection declares the TaskManager lost as soon as the connection
// to it fails: a killed process refuses the reconnect at once, seconds
// before its heartbeats are missed. A TaskManager whose subtasks exchange
// data with no other TaskManager (a region of its own) would otherwise
// only be noticed at the heartbeat timeout. It ends when the connection is
// closed (the TaskManager lost, registered again, or the JobManager
// stopping).
func (s *Server) watchConnection(tm *taskManager) {
	conn := tm.conn
	conn.Connect()
	for {
		st := conn.GetState()
		switch st {
		case connectivity.Shutdown:
			return
		case connectivity.TransientFailure:
			s.connectionLost(tm, fmt.Errorf("connection to %s failed", tm.addr))
			return
		case connectivity.Idle:
			// The connection dropped: reconnecting tells whether the
			// process is still there.
			conn.Connect()
		}
		conn.WaitForStateChange(context.Background(), st)
	}
}

// connectionLost declares a TaskManager lost because a call to it failed
// at the connection: a killed process is noticed at once rather than after
// the heartbeat timeout.
func (s *Server) connectionLost(tm *taskManager, err error) {
	s.mu.Lock()
	if s.mu.tms.Remove(tm.id, tm.registration) == nil {
		s.mu.Unlock()
		return // already gone, or registered again since
	}
	s.tmGauge.Set(float64(s.mu.tms.Len()))
	s.mu.Unlock()
	s.tmLost.WithLabelValues("connection").Inc()
	s.log.Warn("taskmanager lost", "taskmanager_id", tm.id, "cause", "connection failed", "err", err)
	tm.conn.Close()
	s.taskManagerLost(tm.id, fmt.Sprintf("taskmanager %s lost: %v", tm.id, err))
}

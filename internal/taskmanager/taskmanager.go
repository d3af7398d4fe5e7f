// Package taskmanager is the TaskManager daemon: it registers with the
// JobManager, runs the subtasks deployed to it, serves their result
// partitions to other TaskManagers and reports checkpoints.
package taskmanager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/attempts"
	"github.com/weirproject/weir/internal/exchange"
	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/kubeha"
	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/internal/rpcpolicy"
	"github.com/weirproject/weir/internal/state"
	"github.com/weirproject/weir/internal/task"
	"github.com/weirproject/weir/internal/tlsconfig"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
	"github.com/weirproject/weir/sdk"
)

// Config configures a TaskManager.
type Config struct {
	ID string
	// JobManager is the JobManager's RPC address.
	JobManager string
	RPCAddr    string
	// AdvertiseAddr is how others reach RPCAddr; derived when empty.
	AdvertiseAddr string
	HTTPAddr      string
	// RPCListener and HTTPListener, when set, are served instead of
	// listening on RPCAddr and HTTPAddr (see jobmanager.Config).
	RPCListener, HTTPListener net.Listener
	Slots                     int
	Operators                 *sdk.Registry
	Logger                    *slog.Logger
	// Etcd, when its Client is set, finds the JobManager leader through
	// etcd instead of the fixed JobManager address.
	Etcd ha.Config
	// Kube, when its Client is set, finds the JobManager leader through
	// the cluster's Lease on the Kubernetes API server.
	Kube kubeha.Config
	// Credits bounds in-flight buffers per remote input channel.
	Credits int
	// QueueCapacity bounds each output subpartition, in buffers.
	QueueCapacity int
	// StateDir is where subtasks keep local state (embedded stores);
	// <os temp dir>/weir-<id> when empty. Leftovers of an earlier run with
	// the same directory are removed at start.
	StateDir string
	// LocalRecovery keeps local copies of subtasks' newest completed
	// incremental snapshots under StateDir, so a subtask restarted here
	// restores without downloading (Flink's local recovery).
	LocalRecovery bool
	// StateCacheBytes bounds each subtask's Pebble write-back cache
	// (state.DefaultStateCacheBytes when 0, none when negative).
	StateCacheBytes int
	// OrphanTimeout is how long subtasks run on without a registration
	// with a JobManager leader, for a new leader to adopt them;
	// registration.DefaultOrphanTimeout when 0.
	OrphanTimeout time.Duration
	// StateInlineThreshold: a subtask's keyed, operator or channel state
	// smaller than this many bytes goes inline into its acknowledgement
	// and the checkpoint's _metadata instead of a file of its own (Flink's
	// state.storage.fs.memory-threshold); 0 writes every file. The
	// --state-inline-threshold flag defaults to
	// storage.DefaultInlineThreshold.
	StateInlineThreshold int
	// TLS, when set, secures every gRPC connection with mutual TLS (the
	// server, the JobManager's client and other TaskManagers' for the data
	// exchange) and serves the HTTP address with HTTPS; nil is plaintext.
	TLS *tlsconfig.Reloader
}

// Validate checks the configuration and fills defaults.
func (c *Config) Validate() error {
	if c.JobManager == "" && c.Etcd.Client == nil && c.Kube.Client == nil {
		return errors.New("taskmanager: a JobManager address, etcd endpoints or a Kubernetes API server are required")
	}
	if c.Kube.Client != nil {
		if err := c.Kube.Validate(); err != nil {
			return fmt.Errorf("taskmanager: %w", err)
		}
	}
	if c.Slots < 1 {
		return fmt.Errorf("taskmanager: slots must be at least 1, got %d", c.Slots)
	}
	if c.Operators == nil {
		return errors.New("taskmanager: operator registry is required")
	}
	if c.Etcd.Client != nil {
		// Refused at start: an invalid cluster ID would leave the
		// TaskManager waiting for a leader it can never find.
		if _, err := ha.NewKeys(c.Etcd.ClusterID); err != nil {
			return fmt.Errorf("taskmanager: %w", err)
		}
	}
	if c.ID == "" {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		c.ID = "tm-" + hex.EncodeToString(b)
	}
	if c.StateDir == "" {
		c.StateDir = filepath.Join(os.TempDir(), "weir-"+c.ID)
	}
	if c.Credits <= 0 {
		c.Credits = 4
	}
	if c.QueueCapacity <= 0 {
		c.QueueCapacity = 4
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Server is a TaskManager.
type Server struct {
	weirv1grpc.UnimplementedTaskExecutorServiceServer

	cfg        Config
	log        *slog.Logger
	creds      credentials.TransportCredentials
	partitions *exchange.Registry
	conns      *connPool
	metrics    *task.Metrics
	addr       string
	httpAddr   string
	jmMu       sync.Mutex // guards the connection to the JobManager leader
	jmConn     *grpc.ClientConn
	jmAddr     string
	jmClient   weirv1grpc.JobManagerGatewayServiceClient

	// exchangeMetrics counts the remote channels' traffic.
	exchangeMetrics *exchange.Metrics
	// acks sends the subtasks' checkpoint acks, several per call.
	acks ackSender

	wg sync.WaitGroup
	// ctx ends when the TaskManager shuts down; reports stop retrying.
	ctx context.Context
	mu  struct {
		sync.Mutex
		// attempts is what is deployed here: what a cancel finds, and
		// what a deploy cancelled before it arrived is refused by.
		attempts *attempts.Table
		tasks    map[string]*running
		// jobManagerID is the leader this TaskManager registered with; only
		// its calls are obeyed, so a deposed leader cannot act here.
		jobManagerID string
		// ended are the attempts that ended here whose end no JobManager
		// took yet: a registration reports them, so a new leader learns
		// that a subtask finished (or failed) while there was none.
		ended map[string]*weirv1.AttemptReport
	}
}

type running struct {
	task   *task.Task
	cancel context.CancelFunc
	done   chan struct{}
	// subtask is job/vertex/index: attempts of one subtask share it.
	subtask string
	// reported is what a registration reports of it: RUNNING once it
	// reported running, and whether its input ended.
	reported   atomic.Int32
	endOfInput atomic.Bool
}

// localRecoveryGrace is how long a subtask's local recovery copies
// outlive the last attempt of its vertex here: a failover redeploys it
// within its restart delay; a job that ended, or a vertex placed
// elsewhere, does not come back, and its copies go. While the vertex runs
// here they stay, as a subtask rescaled to another index restores from
// them; its subtasks drop the copies older than each checkpoint they
// complete.
const localRecoveryGrace = 2 * time.Minute

// dropLocalRecoveryLater removes the local copies of a's subtask after
// the grace period, unless an attempt of its vertex runs here by then.
func (s *Server) dropLocalRecoveryLater(a *weirv1.ExecutionAttemptID) {
	if !s.cfg.LocalRecovery {
		return
	}
	dir := state.LocalRecoveryDir(s.cfg.StateDir, a.GetJobId(), a.GetVertex(), int(a.GetSubtaskIndex()))
	vertex := a.GetJobId() + "/" + a.GetVertex() + "/"
	time.AfterFunc(localRecoveryGrace, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, r := range s.mu.tasks {
			if strings.HasPrefix(r.subtask, vertex) {
				return
			}
		}
		if err := state.RemoveLocalRecovery(dir); err != nil {
			s.log.Warn("local recovery copies not removed", "dir", dir, "err", err)
		}
	})
}

// Run serves until ctx ends, then cancels every subtask and stops.
func Run(ctx context.Context, cfg Config) error { return run(ctx, cfg, nil) }

// run is Run following leaders, or the leader cfg names when nil.
func run(ctx context.Context, cfg Config, leaders leaderSource) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	// A TaskManager killed before its subtasks closed their stores left
	// them behind; nothing restores from local files, so they go.
	removed, err := state.CleanLocalDir(cfg.StateDir)
	if err != nil {
		return fmt.Errorf("taskmanager: %w", err)
	}
	cfg.Logger.Info("local state directory ready", "dir", cfg.StateDir, "leftovers_removed", removed)
	rpcLis, httpLis, err := rpc.Listen(cfg.RPCListener, cfg.RPCAddr, cfg.HTTPListener, cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("taskmanager: %w", err)
	}
	reg := rpc.NewRegistry()
	log := cfg.Logger.With("taskmanager_id", cfg.ID)
	creds := rpc.Credentials(cfg.TLS, log)
	s := &Server{
		cfg: cfg, log: log, creds: creds, partitions: exchange.NewRegistry(), conns: newConnPool(creds),
		metrics: task.NewMetrics(reg), addr: advertise(cfg.AdvertiseAddr, rpcLis.Addr()),
	}
	s.acks.gateway = func() (ackGateway, error) { return s.gateway() }
	if cfg.TLS != nil {
		httpLis = rpc.HTTPS(httpLis, cfg.TLS)
	}
	defer s.closeJobManager()
	// The HTTP address is published on the RPC address's host.
	host, _, _ := net.SplitHostPort(s.addr)
	_, httpPort, _ := net.SplitHostPort(httpLis.Addr().String())
	s.httpAddr = net.JoinHostPort(host, httpPort)
	s.mu.tasks = map[string]*running{}
	s.mu.attempts = attempts.New()
	s.mu.ended = map[string]*weirv1.AttemptReport{}
	defer s.conns.close()
	g, _ := rpc.NewServer(creds, grpc.ChainUnaryInterceptor(s.fromLeaderOnly))
	weirv1grpc.RegisterTaskExecutorServiceServer(g, s)
	s.exchangeMetrics = exchange.NewMetrics(reg)
	weirv1grpc.RegisterDataExchangeServiceServer(g, &exchange.Server{Partitions: s.partitions, Metrics: s.exchangeMetrics})
	s.log.Info("taskmanager started", "rpc_addr", s.addr, "http_addr", s.httpAddr, "slots", cfg.Slots, "jobmanager", cfg.JobManager, "tls", cfg.TLS != nil)
	if cfg.TLS == nil {
		s.log.Warn("TLS is off: gRPC and HTTP are plaintext and accept any client that reaches them (--tls-cert, --tls-key and --tls-ca turn on mutual TLS)")
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.ctx = ctx
	switch {
	case leaders != nil:
	case cfg.Kube.Client != nil:
		leaders = kubeLeader(cfg.Kube)
	case cfg.Etcd.Client != nil:
		keys, _ := ha.NewKeys(cfg.Etcd.ClusterID) // checked by Validate
		leaders = etcdLeader{client: cfg.Etcd.Client, keys: keys}
	default:
		leaders = staticLeader(cfg.JobManager)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.stayRegistered(ctx, leaders.follow(ctx))
	}()
	err = rpc.Serve(ctx, s.log, g, rpcLis, rpc.HTTPMux(reg), httpLis, 5*time.Second)
	cancel()
	s.cancelAll(nil)
	s.wg.Wait()
	return err
}

// advertise derives a reachable address from the listener when none is set.
func advertise(configured string, lis net.Addr) string {
	if configured != "" {
		return configured
	}
	_, port, _ := net.SplitHostPort(lis.String())
	return net.JoinHostPort("127.0.0.1", port)
}

// gateway is the client of the JobManager this TaskManager talks to now.
func (s *Server) gateway() (weirv1grpc.JobManagerGatewayServiceClient, error) {
	s.jmMu.Lock()
	defer s.jmMu.Unlock()
	if s.jmClient == nil {
		return nil, errors.New("taskmanager: no jobmanager yet")
	}
	return s.jmClient, nil
}

func (s *Server) closeJobManager() {
	s.jmMu.Lock()
	defer s.jmMu.Unlock()
	if s.jmConn != nil {
		s.jmConn.Close()
	}
}

// fromLeaderOnly refuses TaskExecutor calls from any JobManager but the one
// this TaskManager registered with: a deposed leader that wakes up (after a
// pause or a partition) cannot deploy, trigger or cancel here.
func (s *Server) fromLeaderOnly(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !strings.HasPrefix(info.FullMethod, "/weir.v1.TaskExecutorService/") {
		return handler(ctx, req)
	}
	var caller string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(rpc.JobManagerIDHeader); len(v) > 0 {
			caller = v[0]
		}
	}
	s.mu.Lock()
	leader := s.mu.jobManagerID
	s.mu.Unlock()
	if caller == "" || caller != leader {
		return nil, status.Errorf(codes.FailedPrecondition, "taskmanager: call from jobmanager %q, but registered with %q", caller, leader)
	}
	return handler(ctx, req)
}

// cancelAll cancels every subtask but those keep names (by attempt key)
// and waits until they stopped; it returns how many there were.
func (s *Server) cancelAll(keep []string) int {
	s.mu.Lock()
	tasks := make([]*running, 0, len(s.mu.tasks))
	for key, r := range s.mu.tasks {
		if !slices.Contains(keep, key) {
			tasks = append(tasks, r)
		}
	}
	// Deploys still building their subtasks do not start them.
	now := time.Now()
	for _, a := range s.mu.attempts.Live() {
		if !slices.Contains(keep, a.Key()) {
			s.mu.attempts.Cancel(a, now)
		}
	}
	s.mu.Unlock()
	for _, r := range tasks {
		r.cancel()
	}
	for _, r := range tasks {
		<-r.done
	}
	return len(tasks)
}

// DeployTask starts a subtask, or a chain of subtasks run as one.
func (s *Server) DeployTask(_ context.Context, req *weirv1.DeployTaskRequest) (*weirv1.DeployTaskResponse, error) {
	descs := append([]*weirv1.TaskDeploymentDescriptor{req.GetTask()}, req.GetChained()...)
	ids := make([]*weirv1.ExecutionAttemptID, len(descs))
	for i, d := range descs {
		ids[i] = d.GetAttempt()
	}
	s.mu.Lock()
	err := s.mu.attempts.Deploy(ids, time.Now())
	s.mu.Unlock()
	switch {
	case errors.Is(err, attempts.ErrCancelled):
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	case err != nil:
		return nil, status.Error(codes.AlreadyExists, err.Error())
	}
	ctx, cancel := context.WithCancel(context.Background())
	tasks := make([]*task.Task, 0, len(descs))
	abandon := func() {
		cancel()
		for _, t := range tasks {
			t.Abandon()
		}
		s.mu.Lock()
		s.mu.attempts.Ended(ids)
		s.mu.Unlock()
	}
	runs := make([]*running, len(descs))
	for i, d := range descs {
		a := d.GetAttempt()
		r := &running{subtask: fmt.Sprintf("%s/%s/%d", a.GetJobId(), a.GetVertex(), a.GetSubtaskIndex())}
		r.reported.Store(int32(weirv1.ExecutionState_EXECUTION_STATE_DEPLOYING))
		runs[i] = r
		t, err := task.New(task.Config{
			Descriptor: d, Operators: s.cfg.Operators, Network: s, Responder: s, Metrics: s.metrics,
			Logger: s.log, QueueCapacity: s.cfg.QueueCapacity, StateDir: s.cfg.StateDir,
			InlineThreshold: s.cfg.StateInlineThreshold, LocalRecovery: s.cfg.LocalRecovery,
			StateCacheBytes: s.cfg.StateCacheBytes,
			// The reports go off the subtask's goroutine: without a
			// leader they are retried until one takes them, and the
			// subtask must stay cancellable meanwhile.
			OnRunning: func() {
				r.reported.Store(int32(weirv1.ExecutionState_EXECUTION_STATE_RUNNING))
				s.goSend(&weirv1.UpdateTaskExecutionStateRequest{Attempt: a, State: weirv1.ExecutionState_EXECUTION_STATE_RUNNING, TaskmanagerId: s.cfg.ID})
			},
			OnEndOfInput: func() {
				r.endOfInput.Store(true)
				s.goSend(&weirv1.UpdateTaskExecutionStateRequest{Attempt: a, State: weirv1.ExecutionState_EXECUTION_STATE_RUNNING, EndOfInput: true, TaskmanagerId: s.cfg.ID})
			},
		})
		if err != nil {
			abandon()
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		tasks = append(tasks, t)
	}
	if err := task.Chain(tasks); err != nil {
		abandon()
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	done := make(chan struct{})
	for i, r := range runs {
		r.task, r.cancel, r.done = tasks[i], cancel, done
	}
	s.mu.Lock()
	if !s.mu.attempts.Started(ids) {
		// Cancelled while it was being built: it never runs.
		s.mu.Unlock()
		abandon()
		s.log.Info("subtask cancelled during its deployment", "task", ids[0].Key(), "chained", len(ids)-1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for _, a := range ids {
				s.report(a, weirv1.ExecutionState_EXECUTION_STATE_CANCELED, "")
			}
		}()
		return &weirv1.DeployTaskResponse{}, nil
	}
	for i, d := range descs {
		s.mu.tasks[d.GetAttempt().Key()] = runs[i]
	}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// A chain runs, and ends, as one: its subtasks finish, are
		// cancelled or fail together.
		err := tasks[0].Run(ctx)
		s.mu.Lock()
		for _, d := range descs {
			delete(s.mu.tasks, d.GetAttempt().Key())
		}
		s.mu.attempts.Ended(ids)
		s.mu.Unlock()
		for _, d := range descs {
			s.dropLocalRecoveryLater(d.GetAttempt())
		}
		cancelled := ctx.Err() != nil
		cancel()
		// The subtasks stopped: whoever waits for them (a cancellation, a
		// new registration) need not wait for the reports, which may go to
		// an unreachable JobManager.
		close(done)
		for i, d := range descs {
			a := d.GetAttempt()
			req := &weirv1.UpdateTaskExecutionStateRequest{Attempt: a, State: weirv1.ExecutionState_EXECUTION_STATE_FINISHED, TaskmanagerId: s.cfg.ID}
			switch {
			case err == nil:
				if l, ok := tasks[i].Load(time.Now()); ok {
					req.FinalLoad = &weirv1.SubtaskInfo_Load{
						RecordsIn: l.RecordsIn, RecordsOut: l.RecordsOut, IdleMs: l.Idle.Milliseconds(),
						BackpressuredMs: l.Backpressured.Milliseconds(), BusyMs: l.Busy.Milliseconds(), TimestampMs: time.Now().UnixMilli(),
						IdleMsPerSecond: 1000, // it does nothing any more
					}
				}
			case cancelled:
				req.State = weirv1.ExecutionState_EXECUTION_STATE_CANCELED
			default:
				if i == 0 {
					s.log.Error("subtask failed", "task", a.Key(), "chained", len(descs)-1, "err", err)
				}
				req.State, req.FailureCause = weirv1.ExecutionState_EXECUTION_STATE_FAILED, err.Error()
			}
			s.mu.Lock()
			s.mu.ended[a.Key()] = &weirv1.AttemptReport{Attempt: a, State: req.GetState(), FailureCause: req.GetFailureCause()}
			s.mu.Unlock()
			s.send(req)
		}
	}()
	return &weirv1.DeployTaskResponse{}, nil
}

// goSend sends req on a goroutine of the Server's.
func (s *Server) goSend(req *weirv1.UpdateTaskExecutionStateRequest) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.send(req)
	}()
}

func (s *Server) report(a *weirv1.ExecutionAttemptID, st weirv1.ExecutionState, cause string) {
	s.send(&weirv1.UpdateTaskExecutionStateRequest{Attempt: a, State: st, FailureCause: cause, TaskmanagerId: s.cfg.ID})
}

// send reports a subtask's state to the JobManager leader, again and
// again until it is acknowledged: a lost RUNNING would keep checkpoints
// from ever starting, a lost FINISHED would keep a bounded job from
// ending. The JobManager applies a report once, so repeats are harmless.
// A change of leader does not end it: the new leader adopts the attempt,
// and takes the report. It gives up when the leader refuses the report for
// good (it does not know the attempt), or when the TaskManager shuts down.
func (s *Server) send(req *weirv1.UpdateTaskExecutionStateRequest) {
	defer func() {
		if req.GetState().Terminal() {
			s.mu.Lock()
			delete(s.mu.ended, req.GetAttempt().Key())
			s.mu.Unlock()
		}
	}()
	backoff := rpcpolicy.Retries()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		jm, err := s.gateway()
		if err == nil {
			_, err = jm.UpdateTaskExecutionState(ctx, req)
		}
		cancel()
		switch rpcpolicy.Report(status.Code(err)) {
		case rpcpolicy.Done:
			return
		case rpcpolicy.Refused:
			s.log.Warn("subtask state report refused", "task", req.GetAttempt().Key(), "state", req.GetState(), "err", err)
			return
		}
		if s.ctx.Err() != nil {
			s.log.Warn("reporting subtask state failed", "task", req.GetAttempt().Key(), "state", req.GetState(), "err", err)
			return
		}
		s.log.Info("reporting subtask state failed; retrying", "task", req.GetAttempt().Key(), "state", req.GetState(), "attempt", attempt, "err", err)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(backoff.Next()):
		}
	}
}

// attemptReports is what a registration reports: every attempt deployed
// here, and those whose end no JobManager took yet.
func (s *Server) attemptReports() []*weirv1.AttemptReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*weirv1.AttemptReport
	for _, a := range s.mu.attempts.Live() {
		r := &weirv1.AttemptReport{Attempt: a, State: weirv1.ExecutionState_EXECUTION_STATE_DEPLOYING}
		if t := s.mu.tasks[a.Key()]; t != nil {
			r.State = weirv1.ExecutionState(t.reported.Load())
			r.EndOfInput = t.endOfInput.Load()
			r.Stopping = t.task.Stopping()
		}
		out = append(out, r)
	}
	for _, r := range s.mu.ended {
		out = append(out, r)
	}
	return out
}

// live lists the attempts deployed here, for the heartbeat.
func (s *Server) live() []*weirv1.ExecutionAttemptID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.attempts.Live()
}

// CancelTask cancels a subtask and waits until it stopped. An attempt
// not deployed yet never will be (attempts.Table): NotFound says it does
// not run. One being deployed is reported CANCELED once built.
func (s *Server) CancelTask(ctx context.Context, req *weirv1.CancelTaskRequest) (*weirv1.CancelTaskResponse, error) {
	a := req.GetAttempt()
	s.mu.Lock()
	found := s.mu.attempts.Cancel(a, time.Now())
	r := s.mu.tasks[a.Key()]
	s.mu.Unlock()
	switch {
	case found == attempts.WhileDeploying:
		return &weirv1.CancelTaskResponse{}, nil
	case found == attempts.Unknown || r == nil:
		return nil, status.Errorf(codes.NotFound, "taskmanager: no subtask %s", a.Key())
	}
	r.cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &weirv1.CancelTaskResponse{}, nil
}

// TriggerCheckpoint starts a checkpoint at the source subtasks named.
func (s *Server) TriggerCheckpoint(_ context.Context, req *weirv1.TriggerCheckpointOnTaskRequest) (*weirv1.TriggerCheckpointOnTaskResponse, error) {
	unknown, err := s.each(req.GetAttempt(), req.GetAttempts(), func(r *running) {
		r.task.TriggerCheckpoint(req.GetCheckpointId(), req.GetTimestampMs(), req.GetOptions())
	})
	if err != nil {
		return nil, err
	}
	return &weirv1.TriggerCheckpointOnTaskResponse{Unknown: unknown}, nil
}

// NotifyCheckpointComplete passes a completion to the subtasks named.
func (s *Server) NotifyCheckpointComplete(_ context.Context, req *weirv1.NotifyCheckpointCompleteRequest) (*weirv1.NotifyCheckpointCompleteResponse, error) {
	unknown, err := s.each(req.GetAttempt(), req.GetAttempts(), func(r *running) {
		r.task.NotifyCheckpointComplete(req.GetCheckpointId(), req.GetFinal())
	})
	if err != nil {
		return nil, err
	}
	return &weirv1.NotifyCheckpointCompleteResponse{Unknown: unknown}, nil
}

// NotifyCheckpointAborted passes an abort to the subtasks named.
func (s *Server) NotifyCheckpointAborted(_ context.Context, req *weirv1.NotifyCheckpointAbortedRequest) (*weirv1.NotifyCheckpointAbortedResponse, error) {
	unknown, err := s.each(req.GetAttempt(), req.GetAttempts(), func(r *running) {
		r.task.NotifyCheckpointAborted(req.GetCheckpointId())
	})
	if err != nil {
		return nil, err
	}
	return &weirv1.NotifyCheckpointAbortedResponse{Unknown: unknown}, nil
}

// each calls f for every subtask a checkpoint request names (one, or a
// batch for this TaskManager) that runs here, and returns those that do
// not. A request naming one subtask, not running here, is NotFound, as
// it always was; in a batch the others still get their call.
func (s *Server) each(one *weirv1.ExecutionAttemptID, batch []*weirv1.ExecutionAttemptID, f func(*running)) ([]*weirv1.ExecutionAttemptID, error) {
	all := batch
	if one != nil {
		all = append([]*weirv1.ExecutionAttemptID{one}, batch...)
	}
	if len(all) == 0 {
		return nil, status.Error(codes.InvalidArgument, "taskmanager: the request names no subtask")
	}
	found := make([]*running, 0, len(all))
	var unknown []*weirv1.ExecutionAttemptID
	s.mu.Lock()
	for _, a := range all {
		if r, ok := s.mu.tasks[a.Key()]; ok {
			found = append(found, r)
		} else {
			unknown = append(unknown, a)
		}
	}
	s.mu.Unlock()
	if len(all) == 1 && len(unknown) == 1 {
		return nil, status.Errorf(codes.NotFound, "taskmanager: no subtask %s", unknown[0].Key())
	}
	for _, r := range found {
		f(r)
	}
	return unknown, nil
}

// Partitions implements task.Network.
func (s *Server) Partitions() *exchange.Registry { return s.partitions }

// partitionWait bounds how long a consumer waits for its producer to deploy.
const partitionWait = 30 * time.Second

// OpenChannel implements task.Network: in memory when the producer runs
// here, over the data exchange otherwise.
func (s *Server) OpenChannel(ctx context.Context, ch *weirv1.InputChannelDescriptor, notify func()) (exchange.InputChannel, error) {
	if ch.GetProducerTaskmanagerId() == s.cfg.ID {
		lctx, cancel := context.WithTimeout(ctx, partitionWait)
		defer cancel()
		p, err := s.partitions.Lookup(lctx, ch.GetPartition())
		if err != nil {
			return nil, err
		}
		if int(ch.GetSubpartition()) >= len(p.Subs) {
			return nil, fmt.Errorf("taskmanager: partition %s has no subpartition %d", exchange.PartitionKey(p.ID), ch.GetSubpartition())
		}
		return exchange.NewLocalChannel(p.Subs[ch.GetSubpartition()], notify), nil
	}
	conn, err := s.conns.get(ch.GetProducerAddress())
	if err != nil {
		return nil, err
	}
	return s.exchangeMetrics.NewRemoteChannel(ctx, conn, ch.GetPartition(), int(ch.GetSubpartition()), s.cfg.Credits, notify)
}

// Acknowledge implements task.Responder.
func (s *Server) Acknowledge(ctx context.Context, req *weirv1.AcknowledgeCheckpointRequest) error {
	return s.acks.Acknowledge(ctx, req)
}

// Decline implements task.Responder.
func (s *Server) Decline(ctx context.Context, req *weirv1.DeclineCheckpointRequest) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	jm, err := s.gateway()
	if err != nil {
		return err
	}
	_, err = jm.DeclineCheckpoint(ctx, req)
	return err
}

// connPool shares one connection per remote TaskManager.
type connPool struct {
	creds credentials.TransportCredentials
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func newConnPool(creds credentials.TransportCredentials) *connPool {
	return &connPool{creds: creds, conns: map[string]*grpc.ClientConn{}}
}

func (p *connPool) get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	c, err := rpc.Dial(addr, p.creds)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// loadMark is a subtask's measurement at one heartbeat.
type loadMark struct {
	at   time.Time
	load task.Load
}

// measureLoads reports every running subtask's load for a heartbeat, as
// Flink's task metrics would show it: the time split in ms per second and
// the records per second since the previous heartbeat (since the subtask
// started, for one not measured before), and the totals. prev is updated;
// subtasks that stopped leave it.
func (s *Server) measureLoads(now time.Time, prev map[string]loadMark) []*weirv1.SubtaskLoadReport {
	s.mu.Lock()
	tasks := make(map[string]*task.Task, len(s.mu.tasks))
	for k, r := range s.mu.tasks {
		tasks[k] = r.task
	}
	s.mu.Unlock()
	reports := make([]*weirv1.SubtaskLoadReport, 0, len(tasks))
	for k, t := range tasks {
		l, ok := t.Load(now)
		if !ok {
			continue // still connecting its channels
		}
		p, seen := prev[k]
		if !seen {
			p = loadMark{at: now.Add(-(l.Idle + l.Backpressured + l.Busy))}
		}
		prev[k] = loadMark{at: now, load: l}
		idle, bp, busy := l.Idle-p.load.Idle, l.Backpressured-p.load.Backpressured, l.Busy-p.load.Busy
		// The three shares are of their own sum, so they add up to 1000
		// as Flink's do (busy is what is neither idle nor back-pressured).
		split := idle + bp + busy
		perSecond := func(d time.Duration) float64 {
			if split <= 0 {
				return 0
			}
			return min(1000, max(0, 1000*float64(d)/float64(split)))
		}
		wall := now.Sub(p.at).Seconds()
		rate := func(n int64) float64 {
			if wall <= 0 {
				return 0
			}
			return max(0, float64(n)/wall)
		}
		report := &weirv1.SubtaskLoadReport{Attempt: t.Attempt(), Load: &weirv1.SubtaskInfo_Load{
			IdleMsPerSecond: perSecond(idle), BackpressuredMsPerSecond: perSecond(bp), BusyMsPerSecond: perSecond(busy),
			RecordsInPerSecond: rate(l.RecordsIn - p.load.RecordsIn), RecordsOutPerSecond: rate(l.RecordsOut - p.load.RecordsOut),
			RecordsIn: l.RecordsIn, RecordsOut: l.RecordsOut,
			IdleMs: l.Idle.Milliseconds(), BackpressuredMs: l.Backpressured.Milliseconds(), BusyMs: l.Busy.Milliseconds(),
			IntervalMs: now.Sub(p.at).Milliseconds(), TimestampMs: now.UnixMilli(),
		}, Checkpoints: t.CheckpointProgress(), Watermarks: t.Watermarks()}
		if b := t.Backlog(); b != sdk.BacklogUnknown {
			backlog := b == sdk.ProcessingBacklog
			report.Backlog = &backlog
		}
		if p := t.Pending(); p.Known {
			report.Load.PendingRecords, report.Load.Splits = &p.Records, int32(p.Splits)
		}
		reports = append(reports, report)
	}
	for k := range prev {
		if _, ok := tasks[k]; !ok {
			delete(prev, k)
		}
	}
	return reports
}

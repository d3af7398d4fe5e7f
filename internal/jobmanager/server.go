// Package jobmanager is the JobManager daemon: it registers TaskManagers,
// accepts jobs, places their subtasks on slots, runs one checkpoint
// coordinator per job and serves the client API.
package jobmanager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/weirproject/weir/internal/auth"
	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/checkpointing"
	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/kubeha"
	"github.com/weirproject/weir/internal/members"
	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/internal/storage"
	"github.com/weirproject/weir/internal/tlsconfig"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// Config configures a JobManager.
type Config struct {
	RPCAddr  string
	HTTPAddr string
	// RPCListener and HTTPListener, when set, are served instead of
	// listening on RPCAddr and HTTPAddr: a caller that listened on port 0
	// knows the address before the JobManager starts, with no window in
	// which another process could take the port.
	RPCListener, HTTPListener net.Listener
	CheckpointDir             string
	HeartbeatInterval         time.Duration
	// HeartbeatTimeout is how long a silent TaskManager stays registered.
	HeartbeatTimeout time.Duration
	// RPCTimeout bounds each call to a TaskManager.
	RPCTimeout time.Duration
	Logger     *slog.Logger
	// HA is "none" (standalone), "etcd" or "kubernetes".
	HA string
	// Etcd configures HA on etcd; its Client is required with HA "etcd".
	Etcd ha.Config
	// Kube configures HA on the Kubernetes API server; its Client is
	// required with HA "kubernetes".
	Kube kubeha.Config
	// AdvertiseAddr and AdvertiseHTTPAddr are how others reach this
	// JobManager when it leads; derived from the listeners when empty.
	AdvertiseAddr     string
	AdvertiseHTTPAddr string
	// TLS, when set, secures every gRPC connection with mutual TLS (the
	// server and the clients of TaskManagers) and serves HTTPS; nil is
	// plaintext.
	TLS *tlsconfig.Reloader
	// RESTTLS, when set, is the HTTPS certificate of the HTTP address
	// (REST API, dashboard, metrics) instead of TLS's.
	RESTTLS *tlsconfig.Reloader
	// Tokens, when set, guard the REST API and the gRPC client API with
	// bearer tokens (read and admin roles); nil leaves them open.
	Tokens *auth.Tokens
	// SavepointDirs are where clients may take savepoints into, restore
	// from and dispose of savepoints besides the checkpoint directory:
	// local directories or s3:// prefixes.
	SavepointDirs []string
}

// Validate checks the configuration and fills defaults.
func (c *Config) Validate() error {
	if c.CheckpointDir == "" {
		return errors.New("jobmanager: checkpoint directory is required")
	}
	// An unusable checkpoint directory (an unsupported scheme, a missing
	// bucket, wrong credentials) refuses the start: every checkpoint
	// would fail.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := blob.Check(ctx, c.CheckpointDir); err != nil {
		return fmt.Errorf("jobmanager: checkpoint directory %s: %w", c.CheckpointDir, err)
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = time.Second
	}
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = 5 * time.Second
	}
	if c.HeartbeatTimeout <= c.HeartbeatInterval {
		return fmt.Errorf("jobmanager: heartbeat timeout %v must exceed the interval %v", c.HeartbeatTimeout, c.HeartbeatInterval)
	}
	if c.RPCTimeout <= 0 {
		c.RPCTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch c.HA {
	case "", "none":
		c.HA = "none"
	case "etcd":
		if c.Etcd.Client == nil {
			return errors.New("jobmanager: --ha etcd needs etcd endpoints")
		}
		if c.Etcd.Logger == nil {
			c.Etcd.Logger = c.Logger
		}
		if err := c.Etcd.Validate(); err != nil {
			return fmt.Errorf("jobmanager: %w", err)
		}
	case "kubernetes":
		if c.Kube.Logger == nil {
			c.Kube.Logger = c.Logger
		}
		if err := c.Kube.Validate(); err != nil {
			return fmt.Errorf("jobmanager: %w", err)
		}
	default:
		return fmt.Errorf("jobmanager: high availability must be none, etcd or kubernetes, got %q", c.HA)
	}
	return nil
}

// Server is a JobManager.
type Server struct {
	weirv1grpc.UnimplementedClientServiceServer
	weirv1grpc.UnimplementedJobManagerGatewayServiceServer

	cfg Config
	id  string
	log *slog.Logger
	// submits serializes submissions from the check of their claims to
	// their registration: two jobs claiming one thing at once would each
	// pass the check before the other is registered.
	submits  sync.Mutex
	creds    credentials.TransportCredentials
	storage  storage.Storage
	reg      *prometheus.Registry
	ckptMet  *checkpointing.Metrics
	jobState *prometheus.GaugeVec
	autoMet  *autoscalerMetrics
	tmGauge  prometheus.Gauge
	tmLost   *prometheus.CounterVec
	restarts *prometheus.CounterVec
	// regionRestarts counts failovers by the region restarted ("all": the
	// whole job).
	regionRestarts *prometheus.CounterVec
	leader         prometheus.Gauge
	// foreignReports counts acks, declines and state reports refused
	// because their sender is not the TaskManager of the attempt.
	foreignReports *prometheus.CounterVec
	// strays counts attempts TaskManagers ran that no job here had as
	// current, cancelled by reconciliation.
	strays prometheus.Counter
	// adopted counts attempts kept running when their TaskManager
	// registered: adopted from a previous leader, or still current here.
	adopted prometheus.Counter
	// now is time.Now; tests of heartbeat expiry set a clock whose wall
	// reading jumps.
	now func() time.Time
	// leading is read on every RPC; the leader's services live in mu.
	leading atomic.Bool
	// recovered: the leader recovered every stored job; until then the
	// client API is refused, since a submit could not see the claims (a
	// Kafka transactional-id prefix, say) of a job not recovered yet.
	recovered atomic.Bool
	// schedMu serializes slot assignment so two jobs never take one slot.
	schedMu sync.Mutex

	mu struct {
		sync.Mutex
		tms  *members.Registry[*taskManager]
		jobs map[string]*jobMaster
		// unrecovered are the stored jobs this leadership could not
		// recover, by ID (a nil graph did not decode): their claims stay
		// theirs.
		unrecovered map[string]*weirv1.JobGraph
		// services are the current leadership's; nil while not leading.
		services haServices
		// recoveredCh is closed once this leadership recovered its jobs;
		// nil while not leading.
		recoveredCh chan struct{}
	}
}

// New builds a JobManager.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	reg := rpc.NewRegistry()
	s := &Server{
		cfg:     cfg,
		id:      newID(),
		log:     cfg.Logger,
		creds:   rpc.Credentials(cfg.TLS, cfg.Logger),
		storage: storage.Storage{Dir: cfg.CheckpointDir},
		now:     time.Now,
		reg:     reg,
		ckptMet: checkpointing.NewMetrics(reg),
		jobState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_job_state", Help: "1 for the job's current state.",
		}, []string{"job_id", "job_name", "state"}),
		tmGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_jobmanager_taskmanagers_registered", Help: "TaskManagers registered with this JobManager.",
		}),
		tmLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_jobmanager_taskmanagers_lost_total", Help: "TaskManagers declared lost, by cause.",
		}, []string{"cause"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_job_restarts_total", Help: "Restarts of the job after failures.",
		}, []string{"job_id", "job_name"}),
	}
	s.regionRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_job_region_restarts_total", Help: "Failovers of the job by the pipelined region restarted; region \"all\" is a restart of the whole job.",
	}, []string{"job_id", "job_name", "region"})
	s.leader = prometheus.NewGauge(prometheus.GaugeOpts{Name: "weir_jobmanager_leader", Help: "1 if this JobManager is the leader."})
	s.foreignReports = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_jobmanager_foreign_reports_total",
		Help: "Acks, declines and subtask state reports refused because the caller's certificate is not the one of the TaskManager running the subtask, and registrations under the ID of a TaskManager registered with another certificate (mutual TLS only), by report.",
	}, []string{"report"})
	for _, r := range []string{"ack", "decline", "state", "register"} {
		s.foreignReports.WithLabelValues(r)
	}
	s.strays = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_jobmanager_stray_attempts_cancelled_total",
		Help: "Subtask attempts a TaskManager's heartbeat listed that no job had as current (a deploy that overtook its cancel, a job that ended), cancelled there.",
	})
	s.adopted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_jobmanager_attempts_adopted_total",
		Help: "Subtask attempts a registering TaskManager reported running that a job took over (from a previous leader, or still current here) instead of redeploying.",
	})
	s.autoMet = newAutoscalerMetrics(reg)
	reg.MustRegister(s.jobState, s.tmGauge, s.tmLost, s.restarts, s.regionRestarts, s.leader, s.foreignReports, s.strays, s.adopted)
	s.mu.tms = members.New[*taskManager]()
	s.mu.jobs = map[string]*jobMaster{}
	if cfg.HA == "none" {
		// Standalone: the only JobManager leads from the start.
		s.mu.services = standaloneServices{s: s}
		s.leading.Store(true)
		s.recovered.Store(true)
		s.leader.Set(1)
	}
	return s, nil
}

// The daemon's composition root (internal/jmcmd) serves a Server: it
// wires the gRPC services (Register, behind Interceptor), the REST API,
// the dashboard and the leader proxy, runs Background, and calls Shutdown
// once it stopped serving.

// Interceptor refuses the client API and the TaskManager gateway where
// this JobManager cannot answer them (see leaderOnly).
func (s *Server) Interceptor() grpc.UnaryServerInterceptor { return s.leaderOnly }

// Background runs what the JobManager does besides answering calls, until
// ctx ends: the leadership campaign with HA (advertising info), and
// the watch of the TaskManagers' heartbeats.
func (s *Server) Background(ctx context.Context, info ha.LeaderInfo) {
	var wg sync.WaitGroup
	if s.cfg.HA != "none" {
		wg.Go(func() { s.lead(ctx, info) })
	}
	wg.Go(func() { s.watchHeartbeats(ctx) })
	wg.Wait()
}

// ID is this JobManager's ID.
func (s *Server) ID() string { return s.id }

// Leading says whether this JobManager leads (always, standalone).
func (s *Server) Leading() bool { return s.leading.Load() }

// Logger is the JobManager's logger.
func (s *Server) Logger() *slog.Logger { return s.log }

// Metrics is the registry of the JobManager's metrics, served on /metrics.
func (s *Server) Metrics() *prometheus.Registry { return s.reg }

// Credentials are the gRPC server's transport credentials.
func (s *Server) Credentials() credentials.TransportCredentials { return s.creds }

// Register adds the JobManager's services to g.
func (s *Server) Register(g *grpc.Server) {
	weirv1grpc.RegisterClientServiceServer(g, s)
	weirv1grpc.RegisterJobManagerGatewayServiceServer(g, s)
}

// Shutdown stops every coordinator and closes what the Server holds;
// running tasks lose their JobManager and cancel themselves.
func (s *Server) Shutdown() {
	s.mu.Lock()
	jobs := make([]*jobMaster, 0, len(s.mu.jobs))
	for _, j := range s.mu.jobs {
		jobs = append(jobs, j)
	}
	tms := s.mu.tms.Clear()
	s.mu.Unlock()
	for _, j := range jobs {
		j.close()
		j.stop()
	}
	for _, m := range tms {
		m.Data.conn.Close()
	}
}

func (s *Server) job(id string) (*jobMaster, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.mu.jobs[id]
	return j, ok
}

func (s *Server) jobsSorted() []*jobMaster {
	s.mu.Lock()
	defer s.mu.Unlock()
	jobs := make([]*jobMaster, 0, len(s.mu.jobs))
	for _, j := range s.mu.jobs {
		jobs = append(jobs, j)
	}
	sort.Slice(jobs, func(i, k int) bool { return jobs[i].submitted.Before(jobs[k].submitted) })
	return jobs
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Configuration is the JobManager's effective configuration, for Flink's
// GET /jobmanager/config: Flink's key where one means the same, Weir's
// flag name otherwise.
func (s *Server) Configuration() map[string]string {
	c := s.cfg
	m := map[string]string{
		"jobmanager.rpc.address":       c.RPCAddr,
		"rest.address":                 c.HTTPAddr,
		"state.checkpoints.dir":        c.CheckpointDir,
		"heartbeat.interval":           c.HeartbeatInterval.String(),
		"heartbeat.timeout":            c.HeartbeatTimeout.String(),
		"rpc-timeout":                  c.RPCTimeout.String(),
		"high-availability.type":       c.HA,
		"jobmanager.id":                s.id,
		"advertise-addr":               c.AdvertiseAddr,
		"advertise-http-addr":          c.AdvertiseHTTPAddr,
		"high-availability.cluster-id": "",
	}
	if c.HA == "etcd" {
		m["high-availability.cluster-id"] = c.Etcd.ClusterID
		m["high-availability.etcd.session-ttl"] = c.Etcd.SessionTTL.String()
		if c.Etcd.Client != nil {
			m["high-availability.etcd.endpoints"] = strings.Join(c.Etcd.Client.Endpoints(), ",")
		}
	}
	if c.HA == "kubernetes" {
		m["high-availability.cluster-id"] = c.Kube.ClusterID
		m["high-availability.kubernetes.namespace"] = c.Kube.Namespace
		m["high-availability.kubernetes.lease-duration"] = c.Kube.LeaseDuration.String()
	}
	for k, v := range m {
		if v == "" {
			delete(m, k)
		}
	}
	return m
}

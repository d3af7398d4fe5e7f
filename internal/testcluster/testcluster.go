// Package testcluster runs a real JobManager and real TaskManagers in the
// test's process, talking gRPC over loopback, for the tests of packages
// above them (the REST API, the dashboard, the Go API, the JobManager's
// own driver). Every daemon serves listeners opened on port 0 before it
// starts, so no port is picked and then raced for; the test's end stops
// them all and fails on a daemon that did not stop cleanly.
package testcluster

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/weirproject/weir/internal/connector/builtin" // the built-in connectors, for the job graph's validation

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/auth"
	"github.com/weirproject/weir/internal/certs"
	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/jmcmd"
	"github.com/weirproject/weir/internal/jobmanager"
	"github.com/weirproject/weir/internal/operators/all"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/internal/taskmanager"
	"github.com/weirproject/weir/internal/tlsconfig"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
	"github.com/weirproject/weir/sdk"
)

// Options shape a cluster; the zero value is a JobManager with quiet logs
// and Flink's heartbeat defaults.
type Options struct {
	Logger *slog.Logger
	// HeartbeatInterval and HeartbeatTimeout of the JobManager; short ones
	// make a stopped TaskManager noticed sooner.
	HeartbeatInterval, HeartbeatTimeout time.Duration
	// Etcd, when set (StartEtcd's endpoint), makes the cluster highly
	// available: the JobManager campaigns for leadership there and the
	// TaskManagers follow whichever JobManager leads. Start another
	// cluster on the same endpoint for a standby JobManager.
	Etcd string
	// LeaderLease is the leadership lease with Etcd (default 2 s).
	LeaderLease time.Duration
	// TLS runs every daemon with mutual TLS and HTTPS, with certificates
	// `weir certs init` writes to Cluster.CertDir (one for every cluster
	// on one Etcd).
	TLS bool
	// Tokens guard the JobManager's REST API and client API
	// (--auth-token-file); ClientToken is the token Cluster.Client sends.
	Tokens      *auth.Tokens
	ClientToken string
}

// Cluster is a running JobManager and the TaskManagers started on it.
type Cluster struct {
	t   testing.TB
	ctx context.Context
	log *slog.Logger
	// Dir is the test's directory; checkpoints go to Dir/checkpoints.
	Dir string
	// JobManager is the server, for tests that call it directly.
	JobManager *jobmanager.Server
	// RPCAddr and HTTPAddr are where the JobManager listens.
	RPCAddr, HTTPAddr string
	// Client is a gRPC client of the JobManager's client API.
	Client weirv1grpc.ClientServiceClient
	// CertDir, with Options.TLS, holds the CA (certs.CAFile) and the
	// certificates of the JobManager, the TaskManagers and a client
	// (certs.ClientName), which Client uses.
	CertDir string

	etcd        string
	leaderLease time.Duration
	stopJM      context.CancelFunc
	// tmTLS is the TaskManagers' certificate; nil without Options.TLS.
	tmTLS *tlsconfig.Reloader

	mu   sync.Mutex
	tms  map[string]*TaskManager
	done []chan error
}

// TaskManager is one started TaskManager.
type TaskManager struct {
	ID string
	// RPCAddr and HTTPAddr are where it listens (HTTPAddr serves /metrics).
	RPCAddr, HTTPAddr string
	stop              context.CancelFunc
}

// Listen opens a loopback listener on a port the kernel picks.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Start runs a JobManager until the test ends.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cluster{t: t, ctx: ctx, log: log, Dir: t.TempDir(), tms: map[string]*TaskManager{}, etcd: opts.Etcd, leaderLease: opts.LeaderLease}
	if c.leaderLease == 0 {
		c.leaderLease = 2 * time.Second
	}
	rpcLis, httpLis := Listen(t), Listen(t)
	c.RPCAddr, c.HTTPAddr = rpcLis.Addr().String(), httpLis.Addr().String()
	cfg := jobmanager.Config{
		RPCListener: rpcLis, HTTPListener: httpLis, RPCAddr: c.RPCAddr, HTTPAddr: c.HTTPAddr,
		CheckpointDir:     filepath.Join(c.Dir, "checkpoints"),
		HeartbeatInterval: opts.HeartbeatInterval, HeartbeatTimeout: opts.HeartbeatTimeout, Logger: log,
		Tokens: opts.Tokens,
	}
	if c.etcd != "" {
		// Standbys must reach the leader's checkpoints: one directory per
		// etcd, shared by every cluster started on it.
		dir, ok := sharedDirs.Load(c.etcd)
		if !ok {
			t.Fatalf("testcluster: etcd %s was not started by StartEtcd", c.etcd)
		}
		cfg.CheckpointDir = dir.(string)
		cfg.HA, cfg.Etcd = "etcd", c.haConfig()
	}
	clientCreds := rpc.Credentials(nil, log)
	if opts.TLS {
		// Every cluster on one etcd shares its CA, as its checkpoint
		// directory: a standby's daemons must trust the leader's.
		c.CertDir = filepath.Join(filepath.Dir(cfg.CheckpointDir), "certs")
		if _, err := os.Stat(filepath.Join(c.CertDir, certs.CAFile)); err != nil {
			if _, err := certs.Init(c.CertDir, []string{"jobmanager", "taskmanager"}, false); err != nil {
				rpcLis.Close()
				httpLis.Close()
				cancel()
				t.Fatal(err)
			}
		}
		cfg.TLS, c.tmTLS = c.reloader("jobmanager"), c.reloader("taskmanager")
		clientCreds = rpc.Credentials(c.reloader(certs.ClientName), log)
	}
	jm, err := jobmanager.New(cfg)
	if err != nil {
		rpcLis.Close()
		httpLis.Close()
		cancel()
		t.Fatal(err)
	}
	c.JobManager = jm
	done := make(chan error, 1)
	c.done = append(c.done, done)
	jmCtx, stopJM := context.WithCancel(ctx)
	c.stopJM = stopJM
	go func() { done <- jmcmd.Serve(jmCtx, jm, cfg) }()
	var dialOpts []grpc.DialOption
	if opts.ClientToken != "" {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(auth.Credentials{Token: opts.ClientToken}))
	}
	conn, err := rpc.Dial(c.RPCAddr, clientCreds, dialOpts...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c.Client = weirv1grpc.NewClientServiceClient(conn)
	t.Cleanup(func() {
		conn.Close()
		cancel()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, ch := range c.done {
			if err := <-ch; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("daemon: %v", err)
			}
		}
	})
	return c
}

// TLSFiles are the files of the certificate name in CertDir.
func (c *Cluster) TLSFiles(name string) tlsconfig.Files {
	return tlsconfig.Files{
		Cert: filepath.Join(c.CertDir, name+".pem"), Key: filepath.Join(c.CertDir, name+"-key.pem"), CA: filepath.Join(c.CertDir, certs.CAFile),
	}
}

func (c *Cluster) reloader(name string) *tlsconfig.Reloader {
	c.t.Helper()
	r, err := tlsconfig.New(c.TLSFiles(name), c.log)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// StartTaskManager runs a TaskManager with slots slots, the operators of
// reg (nil: none) and the built-in ones until StopTaskManager or the
// test's end, and waits until the JobManager lists it.
func (c *Cluster) StartTaskManager(id string, slots int, reg *sdk.Registry) *TaskManager {
	c.t.Helper()
	if reg == nil {
		reg = sdk.NewRegistry()
	}
	all.Register(reg)
	rpcLis, httpLis := Listen(c.t), Listen(c.t)
	tm := &TaskManager{ID: id, RPCAddr: rpcLis.Addr().String(), HTTPAddr: httpLis.Addr().String()}
	ctx, cancel := context.WithCancel(c.ctx)
	tm.stop = cancel
	cfg := taskmanager.Config{
		ID: id, JobManager: c.RPCAddr, RPCListener: rpcLis, HTTPListener: httpLis, RPCAddr: tm.RPCAddr, HTTPAddr: tm.HTTPAddr,
		Slots: slots, Operators: reg, Logger: c.log, StateDir: filepath.Join(c.Dir, "state-"+id), TLS: c.tmTLS,
	}
	if c.etcd != "" {
		cfg.JobManager, cfg.Etcd = "", c.haConfig()
	}
	done := make(chan error, 1)
	c.mu.Lock()
	c.tms[id] = tm
	c.done = append(c.done, done)
	c.mu.Unlock()
	go func() { done <- taskmanager.Run(ctx, cfg) }()
	poll.UntilNoError(c.t, 30*time.Second, 20*time.Millisecond, "taskmanager "+id+" registered", func() (bool, error) {
		r, err := c.Client.ListTaskManagers(c.ctx, &weirv1.ListTaskManagersRequest{})
		if err != nil {
			return false, nil // the JobManager may not serve yet
		}
		for _, x := range r.GetTaskmanagers() {
			if x.GetId() == id {
				return true, nil
			}
		}
		return false, nil
	})
	return tm
}

// WaitLeader waits until the cluster's JobManager leads (serves its client
// API): with etcd, start a standby only after the first leads, or either
// may win.
func (c *Cluster) WaitLeader() {
	c.t.Helper()
	poll.UntilNoError(c.t, 30*time.Second, 20*time.Millisecond, "jobmanager "+c.RPCAddr+" leading", func() (bool, error) {
		_, err := c.Client.ListTaskManagers(c.ctx, &weirv1.ListTaskManagersRequest{})
		return err == nil, nil
	})
}

// StopJobManager stops the cluster's JobManager, as a SIGTERM would: a
// leader resigns, and a standby on the same etcd takes over.
func (c *Cluster) StopJobManager() { c.stopJM() }

// haConfig is a configuration of the cluster "test" in etcd, with a client
// of its own that the test's cleanup closes after the daemons stopped.
func (c *Cluster) haConfig() ha.Config {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.etcd}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatalf("etcd client: %v", err)
	}
	c.t.Cleanup(func() { _ = cli.Close() })
	return ha.Config{Client: cli, ClusterID: "test", SessionTTL: c.leaderLease, Logger: c.log}
}

// StartEtcd runs a single-member etcd in the test process, on loopback,
// until the test ends, and returns its client endpoint.
func StartEtcd(t testing.TB) string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "weir-test"
	cfg.Dir = t.TempDir()
	cfg.LogLevel = "panic"
	lo := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{lo}, []url.URL{lo}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{lo}, []url.URL{lo}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(sync.OnceFunc(e.Close))
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready")
	}
	endpoint := e.Clients[0].Addr().String()
	sharedDirs.Store(endpoint, filepath.Join(t.TempDir(), "checkpoints"))
	return endpoint
}

// sharedDirs maps an etcd endpoint to the checkpoint directory of the
// clusters that use it.
var sharedDirs sync.Map

// StopTaskManager stops a TaskManager: its subtasks end with it and its
// connections drop, as when its process goes away.
func (c *Cluster) StopTaskManager(id string) {
	c.mu.Lock()
	tm := c.tms[id]
	c.mu.Unlock()
	if tm == nil {
		c.t.Fatalf("testcluster: no TaskManager %q", id)
	}
	tm.stop()
}

// WaitJob polls the job until cond holds for it and returns what it saw
// last. With etcd, it waits through the JobManager not leading yet.
func (c *Cluster) WaitJob(id, what string, cond func(*weirv1.JobInfo) bool) *weirv1.JobInfo {
	c.t.Helper()
	var info *weirv1.JobInfo
	poll.UntilNoError(c.t, time.Minute, 20*time.Millisecond, what, func() (bool, error) {
		r, err := c.Client.GetJob(c.ctx, &weirv1.GetJobRequest{JobId: id})
		if status.Code(err) == codes.Unavailable || (c.etcd != "" && status.Code(err) == codes.NotFound) {
			// A standby that does not lead yet, or a new leader still
			// recovering its jobs.
			return false, nil
		}
		if err != nil {
			return false, err
		}
		info = r.GetJob()
		return cond(info), nil
	})
	return info
}

// Package worker runs a Weir TaskManager with a given set of operators. A
// user who writes operators with package sdk builds their own taskmanager
// binary:
//
//	func main() {
//		reg := sdk.NewRegistry()
//		reg.RegisterOperator("my-operator", func() sdk.Operator { return &MyOperator{} })
//		worker.Main(reg)
//	}
//
// The built-in operators are always added.
package worker

import (
	"errors"
	"flag"
	"fmt"
	"github.com/weirproject/weir/internal/registration"
	"os"

	"github.com/weirproject/weir/internal/daemon"
	"github.com/weirproject/weir/internal/kubeha"
	"github.com/weirproject/weir/internal/operators/all"
	"github.com/weirproject/weir/internal/state"
	"github.com/weirproject/weir/internal/storage"
	"github.com/weirproject/weir/internal/taskmanager"
	"github.com/weirproject/weir/sdk"
)

// Main parses the taskmanager flags and runs until SIGINT or SIGTERM.
func Main(reg *sdk.Registry) {
	daemon.Exit("taskmanager", Run(reg, os.Args[1:]))
}

// Run is Main with explicit arguments, returning instead of exiting.
func Run(reg *sdk.Registry, args []string) error {
	// First: a SIGTERM while the daemon starts (dialling etcd, checking
	// its storage) then ends it cleanly, not by the signal's default.
	ctx, stop := daemon.SignalContext()
	defer stop()
	all.Register(reg)
	fs := flag.NewFlagSet("taskmanager", flag.ContinueOnError)
	cfg := taskmanager.Config{Operators: reg}
	var logging daemon.Logging
	var store daemon.Storage
	fs.StringVar(&cfg.JobManager, "jobmanager", "localhost:6123", "JobManager gRPC address")
	fs.StringVar(&cfg.RPCAddr, "rpc-addr", ":6124", "gRPC address for the JobManager and other TaskManagers")
	fs.StringVar(&cfg.AdvertiseAddr, "advertise-addr", "", "address others use to reach --rpc-addr (default 127.0.0.1:<port>)")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", ":9249", "HTTP address serving /metrics and /healthz (HTTPS with --tls-cert)")
	fs.IntVar(&cfg.Slots, "slots", 2, "task slots offered")
	fs.StringVar(&cfg.ID, "id", "", "TaskManager ID (default random)")
	fs.StringVar(&cfg.StateDir, "state-dir", "", "directory for the subtasks' local state, cleared of an earlier run's leftovers at start (default <temp dir>/weir-<id>)")
	fs.BoolVar(&cfg.LocalRecovery, "local-recovery", false, "keep a local copy of each subtask's newest completed incremental (Pebble) snapshot, so a subtask restarted on this TaskManager restores from disk instead of checkpoint storage")
	fs.IntVar(&cfg.StateCacheBytes, "state-cache-bytes", state.DefaultStateCacheBytes, "bytes of keyed state each subtask on the Pebble backend keeps in memory and writes back in batches (at checkpoints, before iterations, when full); -1 turns the cache off")
	fs.DurationVar(&cfg.OrphanTimeout, "orphan-timeout", registration.DefaultOrphanTimeout, "how long subtasks run on while this TaskManager is registered with no JobManager (the leader died, or cannot be reached): a new leader adopts them within it instead of restarting them; after it they are cancelled")
	fs.IntVar(&cfg.StateInlineThreshold, "state-inline-threshold", storage.DefaultInlineThreshold, "state smaller than this many bytes goes into the checkpoint's _metadata instead of a file of its own (Flink's state.storage.fs.memory-threshold); 0 writes every file")
	var etcdEndpoints, haMode string
	fs.StringVar(&haMode, "ha", "", "how to find the JobManager leader: kubernetes (the cluster's Lease on the API server), etcd (with --etcd-endpoints), or unset: through etcd when --etcd-endpoints is set, else at --jobmanager")
	fs.StringVar(&etcdEndpoints, "etcd-endpoints", "", "find the JobManager leader through etcd (comma-separated endpoints) instead of --jobmanager")
	fs.StringVar(&cfg.Etcd.ClusterID, "cluster-id", "default", "cluster name in etcd or on Kubernetes (with --etcd-endpoints or --ha kubernetes)")
	var kube daemon.Kube
	kube.Register(fs)
	var security daemon.TLS
	security.Register(fs)
	logging.Register(fs)
	store.Register(fs)
	if err := daemon.Parse(fs, args); err != nil {
		return err
	}
	if err := store.Configure(); err != nil {
		return err
	}
	log, err := logging.Logger("taskmanager")
	if err != nil {
		return err
	}
	cfg.Logger = log
	if cfg.TLS, err = daemon.MutualTLS(security.GRPC, log); err != nil {
		return err
	}
	switch haMode {
	case "", "etcd", "none":
		if haMode == "etcd" && etcdEndpoints == "" {
			return errors.New("--ha etcd needs --etcd-endpoints")
		}
	case "kubernetes":
		client, ns, err := kube.Client()
		if err != nil {
			return err
		}
		cfg.Kube = kubeha.Config{Client: client, Namespace: ns, ClusterID: cfg.Etcd.ClusterID, Logger: log}
		cfg.JobManager = ""
	default:
		return fmt.Errorf("--ha: want etcd or kubernetes, got %q", haMode)
	}
	if etcdEndpoints != "" && haMode != "kubernetes" {
		client, err := daemon.EtcdClient(etcdEndpoints, security.Etcd, log)
		if err != nil {
			return err
		}
		defer client.Close()
		cfg.Etcd.Client = client
	}
	return taskmanager.Run(ctx, cfg)
}

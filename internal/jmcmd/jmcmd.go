// Package jmcmd is the jobmanager command: flags, environment and the
// daemon's lifetime, shared by cmd/jobmanager and the benchmark build that
// adds a profiling endpoint.
package jmcmd

import (
	"flag"
	"fmt"
	"strings"
	"time"

	_ "github.com/weirproject/weir/internal/connector/builtin" // the built-in connectors, for the job graph's validation

	"github.com/weirproject/weir/internal/auth"
	"github.com/weirproject/weir/internal/daemon"
	"github.com/weirproject/weir/internal/jobmanager"
	"github.com/weirproject/weir/internal/kubeha"
)

// Run parses the jobmanager flags (each also WEIR_<FLAG>) and serves until
// SIGINT or SIGTERM.
func Run(args []string) error {
	// First: a SIGTERM while the daemon starts (dialling etcd, checking
	// its storage) then ends it cleanly, not by the signal's default.
	ctx, stop := daemon.SignalContext()
	defer stop()
	fs := flag.NewFlagSet("jobmanager", flag.ContinueOnError)
	var cfg jobmanager.Config
	var logging daemon.Logging
	var storage daemon.Storage
	var haMode, etcdEndpoints string
	fs.StringVar(&cfg.RPCAddr, "rpc-addr", ":6123", "gRPC address for clients and TaskManagers")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", ":8081", "HTTP address serving the REST API, the dashboard, /metrics and /healthz (HTTPS with --tls-cert or --rest-tls-cert)")
	fs.StringVar(&cfg.CheckpointDir, "checkpoint-dir", "/tmp/weir/checkpoints", "checkpoint storage: a directory every TaskManager shares, or s3://bucket/prefix")
	fs.Func("savepoint-dirs", "comma-separated directories or s3:// prefixes, besides --checkpoint-dir, that savepoints may be taken into, restored from and disposed of", func(v string) error {
		cfg.SavepointDirs = strings.FieldsFunc(v, func(r rune) bool { return r == ',' })
		return nil
	})
	fs.StringVar(&haMode, "ha", "none", "high availability: none (standalone), etcd, or kubernetes (a Lease and ConfigMaps on the API server)")
	fs.StringVar(&etcdEndpoints, "etcd-endpoints", "localhost:2379", "etcd endpoints, comma-separated (with --ha etcd)")
	var kube daemon.Kube
	kube.Register(fs)
	fs.StringVar(&cfg.Etcd.ClusterID, "cluster-id", "default", "cluster name: JobManagers and TaskManagers of one cluster share it in etcd or on Kubernetes (there a DNS label)")
	fs.DurationVar(&cfg.Etcd.SessionTTL, "leader-lease", 5*time.Second, "leadership lease TTL: a dead leader is replaced after about this long")
	fs.StringVar(&cfg.AdvertiseAddr, "advertise-addr", "", "address others use to reach --rpc-addr (default 127.0.0.1:<port>)")
	fs.StringVar(&cfg.AdvertiseHTTPAddr, "advertise-http-addr", "", "address others use to reach --http-addr (default 127.0.0.1:<port>)")
	fs.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", time.Second, "how often TaskManagers heartbeat")
	fs.DurationVar(&cfg.HeartbeatTimeout, "heartbeat-timeout", 5*time.Second, "silence after which a TaskManager is lost")
	var security daemon.TLS
	var restCert, restKey string
	security.Register(fs)
	fs.StringVar(&restCert, "rest-tls-cert", "", "PEM certificate for HTTPS on --http-addr instead of --tls-cert's, e.g. one browsers trust (with --rest-tls-key; reloaded when the file changes)")
	fs.StringVar(&restKey, "rest-tls-key", "", "PEM private key of --rest-tls-cert")
	var tokenFile string
	fs.StringVar(&tokenFile, "auth-token-file", "", `bearer tokens of the REST API and the gRPC client API, one "<role> <token>" per line, role read (list, get) or admin (also submit, cancel, stop, trigger, rescale, configure, dispose); unset leaves both open`)
	logging.Register(fs)
	storage.Register(fs)
	if err := daemon.Parse(fs, args); err != nil {
		return err
	}
	if err := storage.Configure(); err != nil {
		return err
	}
	log, err := logging.Logger("jobmanager")
	if err != nil {
		return err
	}
	cfg.Logger = log
	if cfg.TLS, err = daemon.MutualTLS(security.GRPC, log); err != nil {
		return err
	}
	if cfg.RESTTLS, err = daemon.ServerTLS("--rest-tls-cert", restCert, "--rest-tls-key", restKey, log); err != nil {
		return err
	}
	if tokenFile != "" {
		if cfg.Tokens, err = auth.Load(tokenFile); err != nil {
			return fmt.Errorf("--auth-token-file: %w", err)
		}
	}
	cfg.HA = haMode
	switch haMode {
	case "none":
	case "etcd":
		client, err := daemon.EtcdClient(etcdEndpoints, security.Etcd, log)
		if err != nil {
			return err
		}
		defer client.Close()
		cfg.Etcd.Client = client
	case "kubernetes":
		client, ns, err := kube.Client()
		if err != nil {
			return err
		}
		cfg.Kube = kubeha.Config{Client: client, Namespace: ns, ClusterID: cfg.Etcd.ClusterID, LeaseDuration: cfg.Etcd.SessionTTL, Logger: log}
	default:
		return fmt.Errorf("--ha: want none, etcd or kubernetes, got %q", haMode)
	}
	srv, err := jobmanager.New(cfg)
	if err != nil {
		return err
	}
	return Serve(ctx, srv, cfg)
}

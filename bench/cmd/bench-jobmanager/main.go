// Command bench-jobmanager is cmd/jobmanager with a pprof endpoint (on
// BENCH_PPROF_ADDR), for the benchmark harness's profiling runs only:
// every measured number comes from bin/jobmanager. Its flags mirror
// cmd/jobmanager's; keep them in step.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/weirproject/weir/internal/daemon"
	"github.com/weirproject/weir/internal/jobmanager"
)

func main() {
	if addr := os.Getenv("BENCH_PPROF_ADDR"); addr != "" {
		if l, err := net.Listen("tcp", addr); err == nil {
			mux := http.NewServeMux()
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			go func() { _ = http.Serve(l, mux) }()
		}
	}
	daemon.Exit("jobmanager", run(os.Args[1:]))
}

func run(args []string) error {
	fs := flag.NewFlagSet("jobmanager", flag.ContinueOnError)
	var cfg jobmanager.Config
	var logging daemon.Logging
	var haMode, etcdEndpoints string
	fs.StringVar(&cfg.RPCAddr, "rpc-addr", ":6123", "gRPC address for clients and TaskManagers")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", ":8081", "HTTP address serving /metrics and /healthz")
	fs.StringVar(&cfg.CheckpointDir, "checkpoint-dir", "/tmp/weir/checkpoints", "checkpoint storage directory")
	fs.StringVar(&haMode, "ha", "none", "high availability: none (standalone) or etcd")
	fs.StringVar(&etcdEndpoints, "etcd-endpoints", "localhost:2379", "etcd endpoints, comma-separated (with --ha etcd)")
	fs.StringVar(&cfg.Etcd.ClusterID, "cluster-id", "default", "cluster name in etcd")
	fs.DurationVar(&cfg.Etcd.SessionTTL, "leader-lease", 5*time.Second, "leadership lease TTL")
	fs.StringVar(&cfg.AdvertiseAddr, "advertise-addr", "", "address others use to reach --rpc-addr")
	fs.StringVar(&cfg.AdvertiseHTTPAddr, "advertise-http-addr", "", "address others use to reach --http-addr")
	fs.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", time.Second, "how often TaskManagers heartbeat")
	fs.DurationVar(&cfg.HeartbeatTimeout, "heartbeat-timeout", 5*time.Second, "silence after which a TaskManager is lost")
	logging.Register(fs)
	if err := daemon.Parse(fs, args); err != nil {
		return err
	}
	log, err := logging.Logger("jobmanager")
	if err != nil {
		return err
	}
	cfg.Logger = log
	cfg.HA = haMode
	switch haMode {
	case "none":
	case "etcd":
		client, err := daemon.EtcdClient(etcdEndpoints)
		if err != nil {
			return err
		}
		defer client.Close()
		cfg.Etcd.Client = client
	default:
		return fmt.Errorf("--ha: want none or etcd, got %q", haMode)
	}
	srv, err := jobmanager.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := daemon.SignalContext()
	defer stop()
	return srv.Run(ctx)
}

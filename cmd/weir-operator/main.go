// Command weir-operator runs WeirJobs and WeirClusters on Kubernetes: it
// makes each job's cluster (JobManager and TaskManager Deployments, a
// Service, its certificates and the RBAC its HA on the API server needs),
// submits the job, upgrades it by its upgrade mode, takes savepoints,
// suspends, resumes and rolls back. See docs/kubernetes.md.
package main

import (
	"flag"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/weirproject/weir/internal/daemon"
	"github.com/weirproject/weir/internal/operator"
)

func main() { daemon.Exit("weir-operator", run(os.Args[1:])) }

func run(args []string) error {
	ctx, stop := daemon.SignalContext()
	defer stop()
	fs := flag.NewFlagSet("weir-operator", flag.ContinueOnError)
	var o operator.Options
	var kubeconfig string
	var logging daemon.Logging
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, or the pod's service account)")
	fs.StringVar(&o.Namespace, "namespace", "", "watch only this namespace (default all)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":8080", "Prometheus metrics address (0 turns them off)")
	fs.StringVar(&o.HealthAddr, "health-addr", ":8081", "/healthz and /readyz address (0 turns them off)")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "elect one working replica among several (a Lease named weir-operator)")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the operator's Lease (default the pod's)")
	logging.Register(fs)
	if err := daemon.Parse(fs, args); err != nil {
		return err
	}
	log, err := logging.Logger("weir-operator")
	if err != nil {
		return err
	}
	o.Log = log
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	var cfg *rest.Config
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return err
	}
	// Above client-go's default of 5 requests/s: each WeirJob's round
	// reads its resource and a Lease and writes a status.
	cfg.QPS, cfg.Burst = 100, 200
	return operator.Run(ctx, cfg, o)
}

package daemon

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Kube is how a daemon reaches the Kubernetes API server for --ha
// kubernetes: inside a pod through its service account, elsewhere through
// a kubeconfig file.
type Kube struct {
	Kubeconfig string
	Namespace  string
}

// Register adds --kubeconfig and --kube-namespace.
func (k *Kube) Register(fs *flag.FlagSet) {
	fs.StringVar(&k.Kubeconfig, "kubeconfig", "", "kubeconfig file reaching the Kubernetes API server (with --ha kubernetes; default $KUBECONFIG, or the pod's service account inside Kubernetes)")
	fs.StringVar(&k.Namespace, "kube-namespace", "", "namespace of the cluster's Lease and ConfigMaps (with --ha kubernetes; default the pod's own namespace, or the kubeconfig context's, or default)")
}

// serviceAccountNamespace is where Kubernetes tells a pod its namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Client returns a client of the API server and the namespace to use.
func (k Kube) Client() (kubernetes.Interface, string, error) {
	path := k.Kubeconfig
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	var cfg *rest.Config
	ns := k.Namespace
	switch {
	case path != "":
		loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{})
		c, err := loader.ClientConfig()
		if err != nil {
			return nil, "", fmt.Errorf("--kubeconfig %s: %w", path, err)
		}
		cfg = c
		if ns == "" {
			if n, _, err := loader.Namespace(); err == nil {
				ns = n
			}
		}
	default:
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("--ha kubernetes: not in a pod and no --kubeconfig: %w", err)
		}
		cfg = c
		if ns == "" {
			if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
				ns = strings.TrimSpace(string(b))
			}
		}
	}
	if ns == "" {
		ns = "default"
	}
	cfg.UserAgent = "weir"
	// client-go's default of 5 requests/s would throttle the leader: each
	// checkpoint claims an ID and records its completion, and frequent
	// checkpoints make hundreds of writes a second. The API server's own
	// priority and fairness protects it.
	cfg.QPS, cfg.Burst = 500, 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes client: %w", err)
	}
	return client, ns, nil
}

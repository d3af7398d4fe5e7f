package operator

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/weirproject/weir/operator/api/v1alpha1"
)

// Options configure the operator.
type Options struct {
	// Namespace, when set, is the only namespace watched.
	Namespace string
	// MetricsAddr serves Prometheus metrics ("0" turns them off);
	// HealthAddr serves /healthz and /readyz.
	MetricsAddr, HealthAddr string
	// LeaderElect makes replicas of the operator elect one that works.
	LeaderElect bool
	// LeaderElectionNamespace holds the operator's own Lease (default the
	// pod's namespace).
	LeaderElectionNamespace string
	Log                     *slog.Logger
}

// Scheme is the operator's scheme: Kubernetes' types and Weir's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// Run runs the operator against the API server cfg reaches until ctx
// ends.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	ctrl.SetLogger(logr.FromSlogHandler(o.Log.Handler()))
	mopts := ctrl.Options{
		Scheme:                  Scheme(),
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.HealthAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        "weir-operator",
		LeaderElectionNamespace: o.LeaderElectionNamespace,
	}
	if o.Namespace != "" {
		mopts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{o.Namespace: {}}}
	}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return fmt.Errorf("operator: manager: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := (&WeirJobReconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Kube:     kube,
		Scheme:   mgr.GetScheme(),
		Recorder: mgr.GetEventRecorderFor("weir-operator"), //nolint:staticcheck // core/v1 events are what kubectl describe shows
		Log:      o.Log,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&WeirClusterReconciler{Client: mgr.GetClient(), Kube: kube, Log: o.Log}).SetupWithManager(mgr); err != nil {
		return err
	}
	if o.HealthAddr != "" && o.HealthAddr != "0" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return err
		}
	}
	o.Log.Info("weir operator started", "namespace", o.Namespace, "leader_elect", o.LeaderElect)
	return mgr.Start(ctx)
}

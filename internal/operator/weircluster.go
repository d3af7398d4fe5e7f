package operator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/weirproject/weir/operator/api/v1alpha1"
)

// WeirClusterReconciler runs session clusters.
type WeirClusterReconciler struct {
	Client client.Client
	Kube   kubernetes.Interface
	Log    *slog.Logger
}

// SetupWithManager registers the reconciler.
func (r *WeirClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.WeirCluster{}).
		Owns(&appsv1.Deployment{}).
		Named("weircluster").
		Complete(r)
}

func sessionCluster(wc *v1alpha1.WeirCluster) cluster {
	tms := int32(1)
	if wc.Spec.TaskManager.Replicas != nil {
		tms = *wc.Spec.TaskManager.Replicas
	}
	return cluster{
		name:         wc.Name,
		namespace:    wc.Namespace,
		spec:         wc.Spec,
		taskManagers: tms,
		owner:        *metav1.NewControllerRef(wc, v1alpha1.GroupVersion.WithKind("WeirCluster")),
	}
}

// Reconcile makes a WeirCluster's objects and reports whether its
// JobManager answers.
func (r *WeirClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var wc v1alpha1.WeirCluster
	if err := r.Client.Get(ctx, req.NamespacedName, &wc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := time.Now()
	if err := checkClusterName(wc.Name); err != nil {
		setReady(&wc.Status.Conditions, false, "ClusterInvalid", err.Error(), wc.Generation, now)
		return ctrl.Result{}, r.Client.Status().Update(ctx, &wc)
	}
	c := sessionCluster(&wc)
	secret, err := ensureCluster(ctx, r.Client, c, false, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	ready := false
	msg := "the JobManager does not answer yet"
	if jm, err := dialJobManager(ctx, r.Kube, c, wc.Annotations, secret); err == nil {
		ready = jm.reachable(ctx)
		jm.close()
	} else {
		msg = err.Error()
	}
	if ready {
		msg = "the JobManager answers"
	}
	wc.Status.ObservedGeneration = wc.Generation
	wc.Status.Ready = ready
	wc.Status.JobManager = fmt.Sprintf("%s.%s.svc:%d", c.jobManager(), c.namespace, jobManagerRPCPort)
	setReady(&wc.Status.Conditions, ready, map[bool]string{true: "JobManagerAnswers", false: "JobManagerUnreachable"}[ready], msg, wc.Generation, now)
	if err := r.Client.Status().Update(ctx, &wc); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
}

func setReady(conds *[]metav1.Condition, ok bool, reason, msg string, gen int64, now time.Time) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: "Ready", Status: s, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)})
}

func equalObjects(a, b runtime.Object) bool { return equality.Semantic.DeepEqual(a, b) }

// Package operator is the Weir operator: controllers (controller-runtime)
// that run WeirJobs and WeirClusters. A WeirJob's life is decided by the
// pure state machine of package lifecycle; the reconcilers here observe
// (the resource, its cluster's objects, the job on its JobManager), carry
// out the one action the machine asks for, and store the status it
// returns.
package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/weirproject/weir/internal/operator/lifecycle"
	"github.com/weirproject/weir/operator/api/v1alpha1"
)

// recorder records events on a resource (the manager's event recorder).
type recorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
}

// finalizer lets the operator cancel a WeirJob's job on a session cluster
// before the resource goes (a job's own cluster goes with it).
const finalizer = "weir.dev/job"

// maxLostSubmissions bounds how far a round looks for jobs submitted by
// rounds whose status writes were lost (each lost write can add one).
const maxLostSubmissions = 16

// WeirJobReconciler runs WeirJobs.
type WeirJobReconciler struct {
	Client client.Client
	// Reader reads WeirJobs from the API server itself (the manager's
	// API reader), not from the cache.
	Reader client.Reader
	// Kube reaches the API server directly, for the clusters' Leases.
	Kube     kubernetes.Interface
	Scheme   *runtime.Scheme
	Recorder recorder
	Log      *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (r *WeirJobReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the reconciler.
func (r *WeirJobReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// Changes of the spec (and deletion, which bumps the generation) and
	// of annotations start a round; the status this reconciler writes
	// does not: it polls by RequeueAfter instead.
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.WeirJob{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&appsv1.Deployment{}).
		Named("weirjob").
		Complete(r)
}

// Reconcile is one round of a WeirJob.
func (r *WeirJobReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Read from the API server, not the cache: a status this operator
	// wrote a moment ago must not be read back as it was before.
	var wj v1alpha1.WeirJob
	if err := r.Reader.Get(ctx, req.NamespacedName, &wj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := r.Log.With("weirjob", req.NamespacedName.String())

	c, secret, err := r.clusterOf(ctx, &wj)
	if err != nil {
		return r.fail(ctx, &wj, "ClusterInvalid", err)
	}
	if !wj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, &wj, c, secret)
	}
	if wj.Spec.ClusterRef != "" && !controllerutil.ContainsFinalizer(&wj, finalizer) {
		controllerutil.AddFinalizer(&wj, finalizer)
		if err := r.Client.Update(ctx, &wj); err != nil {
			return ctrl.Result{}, err
		}
	}

	// Observe.
	o := lifecycle.Observation{Now: r.now(), UID: string(wj.UID), Generation: wj.Generation, Spec: wj.Spec, Status: wj.Status}
	var jm *jobManager
	if secret != nil || !c.tls() {
		jm, err = dialJobManager(ctx, r.Kube, c, wj.Annotations, secret)
	}
	if jm != nil {
		defer jm.close()
		o.Reachable = jm.reachable(ctx)
		if o.Reachable && wj.Status.JobID != "" {
			if o.Job, err = jm.job(ctx, wj.Status.JobID); err != nil {
				o.Reachable = false
			}
		}
		// Jobs submitted by rounds whose status writes were lost: the
		// IDs the next submissions take, as far as they exist.
		for n := wj.Status.Submissions; o.Reachable && n < wj.Status.Submissions+maxLostSubmissions; n++ {
			j, err := jm.job(ctx, lifecycle.JobIDAt(o.UID, n))
			if err != nil {
				o.Reachable = false
			}
			if j == nil {
				break
			}
			o.Next, o.NextSeq = j, n
		}
	} else if err != nil {
		log.Debug("JobManager not reachable", "err", err)
	}

	d := lifecycle.Decide(o)
	if wj.Spec.ClusterRef == "" {
		own, err := r.ownCluster(&wj, d.Deploy)
		if err != nil {
			return r.fail(ctx, &wj, "ClusterInvalid", err)
		}
		if secret, err = ensureCluster(ctx, r.Client, own, d.Suspended, r.now()); err != nil {
			return ctrl.Result{}, err
		}
		c = own
	}
	st, events := d.Status, d.Events
	if d.Action.Kind != lifecycle.None && jm != nil && o.Reachable {
		log.Info("acting", "action", d.Action.Kind, "restore", d.Action.RestorePath, "job_id", d.Status.JobID)
		res := jm.do(ctx, d.Action, d.Status.JobID)
		var more []lifecycle.Event
		o.Now = r.now() // the action took its time: its outcome is from now
		st, more = lifecycle.Complete(o, d, res)
		events = append(events, more...)
	}
	for _, e := range events {
		typ := corev1.EventTypeNormal
		if e.Warning {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Event(&wj, typ, e.Reason, e.Message)
		log.Info("event", "reason", e.Reason, "message", e.Message)
	}
	wj.Status = st
	if err := r.Client.Status().Update(ctx, &wj); err != nil {
		return ctrl.Result{}, err
	}
	requeue := d.Requeue
	if requeue == 0 {
		requeue = 30 * time.Second // nothing to wait for: look now and then
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// fail records an error the user must fix in the spec.
func (r *WeirJobReconciler) fail(ctx context.Context, wj *v1alpha1.WeirJob, reason string, err error) (ctrl.Result, error) {
	r.Recorder.Event(wj, corev1.EventTypeWarning, reason, err.Error())
	wj.Status.Error = err.Error()
	wj.Status.ObservedGeneration = wj.Generation
	setReady(&wj.Status.Conditions, false, reason, err.Error(), wj.Generation, r.now())
	if uerr := r.Client.Status().Update(ctx, wj); uerr != nil {
		return ctrl.Result{}, uerr
	}
	return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
}

// clusterOf is the cluster a WeirJob runs on, and its TLS secret if made.
func (r *WeirJobReconciler) clusterOf(ctx context.Context, wj *v1alpha1.WeirJob) (cluster, *corev1.Secret, error) {
	var c cluster
	if ref := wj.Spec.ClusterRef; ref != "" {
		var wc v1alpha1.WeirCluster
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: wj.Namespace, Name: ref}, &wc); err != nil {
			return c, nil, fmt.Errorf("cluster %s: %w", ref, err)
		}
		c = sessionCluster(&wc)
	} else {
		var err error
		if c, err = r.ownCluster(wj, wj.Spec); err != nil {
			return c, nil, err
		}
	}
	secret, err := getSecret(ctx, r.Client, c)
	return c, secret, err
}

// ownCluster is the cluster of a WeirJob without a clusterRef, for spec.
func (r *WeirJobReconciler) ownCluster(wj *v1alpha1.WeirJob, spec v1alpha1.WeirJobSpec) (cluster, error) {
	if spec.Cluster == nil {
		return cluster{}, errors.New("spec.cluster is required without spec.clusterRef")
	}
	if err := checkClusterName(wj.Name); err != nil {
		return cluster{}, err
	}
	tms := int32(1)
	if p := parallelism(spec); p > 0 {
		slots := max(spec.Cluster.TaskManager.Slots, 1)
		tms = (p + slots - 1) / slots
	}
	if spec.Cluster.TaskManager.Replicas != nil {
		tms = *spec.Cluster.TaskManager.Replicas
	}
	return cluster{
		name:         wj.Name,
		namespace:    wj.Namespace,
		spec:         *spec.Cluster,
		program:      spec.Job.Program,
		taskManagers: tms,
		owner:        *metav1.NewControllerRef(wj, v1alpha1.GroupVersion.WithKind("WeirJob")),
	}, nil
}

func checkClusterName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 || len(name) > 40 {
		return fmt.Errorf("the name %q must be a DNS label of at most 40 characters: it names the cluster's objects", name)
	}
	return nil
}

func getSecret(ctx context.Context, c client.Client, cl cluster) (*corev1.Secret, error) {
	if !cl.tls() {
		return nil, nil
	}
	var s corev1.Secret
	err := c.Get(ctx, types.NamespacedName{Namespace: cl.namespace, Name: cl.tlsSecret()}, &s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// ensureCluster creates or updates the objects of cluster c, and returns
// its TLS secret.
func ensureCluster(ctx context.Context, k client.Client, c cluster, suspended bool, now time.Time) (*corev1.Secret, error) {
	sa, role, rb := c.rbac()
	if err := apply(ctx, k, sa, func(existing, want client.Object) {}); err != nil {
		return nil, err
	}
	if err := apply(ctx, k, role, func(existing, want client.Object) {
		existing.(*rbacv1.Role).Rules = want.(*rbacv1.Role).Rules
	}); err != nil {
		return nil, err
	}
	if err := apply(ctx, k, rb, func(existing, want client.Object) {}); err != nil {
		return nil, err
	}
	var secret *corev1.Secret
	if c.tls() {
		s, err := getSecret(ctx, k, c)
		if err != nil {
			return nil, err
		}
		if s == nil {
			if s, err = c.newTLSSecret(now); err != nil {
				return nil, err
			}
			if err := k.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("create secret %s: %w", s.Name, err)
			}
		}
		secret = s
	}
	if err := apply(ctx, k, c.jobManagerService(), func(existing, want client.Object) {
		e, w := existing.(*corev1.Service), want.(*corev1.Service)
		e.Spec.Ports, e.Spec.Selector = w.Spec.Ports, w.Spec.Selector
	}); err != nil {
		return nil, err
	}
	for _, d := range []*appsv1.Deployment{c.jobManagerDeployment(), c.taskManagerDeployment(suspended)} {
		if err := apply(ctx, k, d, func(existing, want client.Object) {
			e, w := existing.(*appsv1.Deployment), want.(*appsv1.Deployment)
			e.Spec.Replicas, e.Spec.Template = w.Spec.Replicas, w.Spec.Template
			e.Labels = w.Labels
		}); err != nil {
			return nil, err
		}
	}
	return secret, nil
}

// apply creates want, or updates the existing object with update.
func apply(ctx context.Context, k client.Client, want client.Object, update func(existing, want client.Object)) error {
	existing := want.DeepCopyObject().(client.Object)
	err := k.Get(ctx, client.ObjectKeyFromObject(want), existing)
	if apierrors.IsNotFound(err) {
		if err := k.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T %s: %w", want, want.GetName(), err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	before := existing.DeepCopyObject()
	update(existing, want)
	if equalObjects(before, existing) {
		return nil
	}
	if err := k.Update(ctx, existing); err != nil {
		return fmt.Errorf("update %T %s: %w", want, want.GetName(), err)
	}
	return nil
}

// finalize cancels the job of a WeirJob on a session cluster, then lets
// the resource go.
func (r *WeirJobReconciler) finalize(ctx context.Context, wj *v1alpha1.WeirJob, c cluster, secret *corev1.Secret) error {
	if !controllerutil.ContainsFinalizer(wj, finalizer) {
		return nil
	}
	if wj.Status.JobID != "" {
		jm, err := dialJobManager(ctx, r.Kube, c, wj.Annotations, secret)
		if err == nil {
			res := jm.do(ctx, lifecycle.Action{Kind: lifecycle.Cancel}, wj.Status.JobID)
			jm.close()
			if res.Err != nil {
				r.Log.Warn("cancelling a deleted WeirJob's job failed; it stays on the cluster", "weirjob", wj.Name, "job_id", wj.Status.JobID, "err", res.Err)
			}
		}
	}
	controllerutil.RemoveFinalizer(wj, finalizer)
	return r.Client.Update(ctx, wj)
}

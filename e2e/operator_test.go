package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/kubetest"
	"github.com/weirproject/weir/internal/operator"
	"github.com/weirproject/weir/operator/api/v1alpha1"
)

// operatorEnv is the weir-operator process watching a namespace of a real
// API server, and a client of that server.
type operatorEnv struct {
	*cluster
	api *kubetest.APIServer
	ns  string
	k   client.Client
}

func startOperator(t *testing.T) *operatorEnv {
	t.Helper()
	api := kubetest.Shared(t)
	api.InstallCRDs(t, filepath.Join("..", "deploy", "kubernetes", "crds"))
	c := &cluster{t: t, dir: t.TempDir()}
	t.Cleanup(c.stop)
	ns := api.Namespace(t)
	// The test's own client is controller-runtime's; without a logger it
	// prints a stack trace saying so.
	ctrllog.SetLogger(logr.Discard())
	k, err := client.New(api.Config, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	c.start("weir-operator", "--kubeconfig", api.Kubeconfig, "--namespace", ns, "--metrics-addr", "0", "--health-addr", "0")
	return &operatorEnv{cluster: c, api: api, ns: ns, k: k}
}

func (e *operatorEnv) get(name string) *v1alpha1.WeirJob {
	e.t.Helper()
	var wj v1alpha1.WeirJob
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.k.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: name}, &wj); err != nil {
		e.t.Fatal(err)
	}
	return &wj
}

// update changes a WeirJob's spec, retrying on conflicts with the
// operator's status writes.
func (e *operatorEnv) update(name string, f func(*v1alpha1.WeirJobSpec)) int64 {
	e.t.Helper()
	for {
		wj := e.get(name)
		f(&wj.Spec)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := e.k.Update(ctx, wj)
		cancel()
		if err == nil {
			return wj.Generation
		}
		if !strings.Contains(err.Error(), "the object has been modified") {
			e.t.Fatal(err)
		}
	}
}

// waitStatus waits until the WeirJob's status satisfies cond.
func (e *operatorEnv) waitStatus(name, what string, timeout time.Duration, cond func(v1alpha1.WeirJobStatus) bool) v1alpha1.WeirJobStatus {
	e.t.Helper()
	var st v1alpha1.WeirJobStatus
	e.waitForFast(timeout, what, func() (bool, error) {
		st = e.get(name).Status
		return cond(st), nil
	})
	return st
}

// startLocalCluster runs the JobManager and TaskManagers of WeirJob name
// as local processes with the certificates the operator issued, on the
// same HA (the cluster's Lease) the operator looks the leader up in.
func (e *operatorEnv) startLocalCluster(name string, taskManagers int) {
	e.t.Helper()
	var secret corev1.Secret
	e.waitFor(30*time.Second, "the operator's TLS secret", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return e.k.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: name + "-weir-tls"}, &secret) == nil, nil
	})
	pki := filepath.Join(e.dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		e.t.Fatal(err)
	}
	for k, v := range secret.Data {
		if err := os.WriteFile(filepath.Join(pki, k), v, 0o600); err != nil {
			e.t.Fatal(err)
		}
	}
	tlsArgs := []string{"--tls-cert", filepath.Join(pki, "tls.pem"), "--tls-key", filepath.Join(pki, "tls-key.pem"), "--tls-ca", filepath.Join(pki, "ca.pem"),
		"--tls-server-name", "weir-" + name}
	where := []string{"--kubeconfig", e.api.Kubeconfig, "--kube-namespace", e.ns, "--cluster-id", name}
	common := append(append([]string{"--ha", "kubernetes"}, where...), tlsArgs...)
	// The CLI finds the leader through the Lease too, with the cluster's
	// certificate.
	e.cliWhere = append(append([]string{}, where...), tlsArgs...)
	e.start("jobmanager", append([]string{"--rpc-addr", freePort(e.t), "--http-addr", freePort(e.t),
		"--checkpoint-dir", e.checkpointDir(), "--heartbeat-timeout", "3s", "--leader-lease", "2s"}, common...)...)
	e.tmWhere = common
	for i := range taskManagers {
		e.startTaskManager("taskmanager", fmt.Sprintf("tm-%d", i))
	}
}

// TestOperatorUpgradesAndRollsBack runs a WeirJob (its own cluster, mutual
// TLS, upgrade mode savepoint) through the operator against a real API
// server, with its JobManager and TaskManagers as local processes (no
// kubelet runs pods here). It checks the objects the operator makes, then:
// an upgrade by savepoint that rescales the job; a manual savepoint; an
// upgrade by last-state; an upgrade that cannot run (more parallelism than
// slots), rolled back to the last stable spec from the upgrade's
// savepoint; suspend and resume. The job then finishes, and its output is
// exactly once across all of it.
func TestOperatorUpgradesAndRollsBack(t *testing.T) {
	// Alone, not beside other tests: five daemons and the API server
	// would starve the timing of a parallel partner (the chaos rounds).
	const count, keys = 200000, 16 // 2000 records/s per source subtask: ~50 s of input
	e := startOperator(t)
	out := filepath.Join(e.dir, "out")
	spec, err := os.ReadFile(writeSpec(t, e.dir, out, count, keys, 2000, "200ms"))
	if err != nil {
		t.Fatal(err)
	}
	const name = "sums"
	wj := &v1alpha1.WeirJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: v1alpha1.WeirJobSpec{
			Cluster: &v1alpha1.ClusterSpec{
				Image:       "weir:dev",
				TaskManager: v1alpha1.TaskManagerSpec{Slots: 2},
			},
			Job:         v1alpha1.JobSource{Spec: string(spec)},
			UpgradeMode: v1alpha1.UpgradeSavepoint,
			Rollback:    &v1alpha1.RollbackSpec{Enabled: true, Timeout: metav1.Duration{Duration: 8 * time.Second}},
		},
	}
	ctx := context.Background()
	if err := e.k.Create(ctx, wj); err != nil {
		t.Fatal(err)
	}
	e.startLocalCluster(name, 2)

	// The objects of the job's own cluster.
	var jm, tm appsv1.Deployment
	e.waitFor(30*time.Second, "the cluster's objects", func() (bool, error) {
		return e.k.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: name + "-jobmanager"}, &jm) == nil &&
			e.k.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: name + "-taskmanager"}, &tm) == nil, nil
	})
	args := strings.Join(jm.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--ha kubernetes", "--cluster-id " + name, "--tls-server-name weir-" + name, "--advertise-addr $(POD_IP):6123"} {
		if !strings.Contains(args, want) {
			t.Errorf("JobManager args %q lack %q", args, want)
		}
	}
	if *tm.Spec.Replicas != 1 || len(jm.OwnerReferences) != 1 || jm.OwnerReferences[0].Kind != "WeirJob" {
		t.Errorf("TaskManagers %d (want 1 for parallelism 2 with 2 slots), owners %v", *tm.Spec.Replicas, jm.OwnerReferences)
	}
	var svc corev1.Service
	var role rbacv1.Role
	if err := e.k.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: name + "-jobmanager"}, &svc); err != nil {
		t.Error(err)
	}
	if err := e.k.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: name + "-weir"}, &role); err != nil || !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "leases") }) {
		t.Errorf("role %+v: %v", role.Rules, err)
	}

	running := func(gen int64) func(v1alpha1.WeirJobStatus) bool {
		return func(st v1alpha1.WeirJobStatus) bool {
			return st.LifecycleState == v1alpha1.StateRunning && st.DeployedGeneration == gen && st.JobState == "RUNNING" && st.Upgrade == nil
		}
	}
	st := e.waitStatus(name, "the job running", time.Minute, running(1))
	first := st.JobID
	e.waitStatus(name, "a checkpoint", time.Minute, func(st v1alpha1.WeirJobStatus) bool { return st.LastCheckpoint != nil })

	// 1. Upgrade by savepoint, rescaling to 3.
	start := time.Now()
	gen := e.update(name, func(s *v1alpha1.WeirJobSpec) { p := int32(3); s.Parallelism = &p })
	st = e.waitStatus(name, "the savepoint upgrade", 2*time.Minute, running(gen))
	t.Logf("upgrade by savepoint: %v from the spec change to the new job RUNNING", time.Since(start).Round(time.Millisecond))
	if st.JobID == first || st.LastSavepoint == nil || st.LastSavepoint.Reason != "upgrade" || st.StableGeneration != gen {
		t.Fatalf("after the savepoint upgrade: %+v", st)
	}

	// 2. A manual savepoint.
	e.update(name, func(s *v1alpha1.WeirJobSpec) { s.SavepointTriggerNonce = 1 })
	st = e.waitStatus(name, "the manual savepoint", time.Minute, func(st v1alpha1.WeirJobStatus) bool { return st.SavepointTriggerNonce == 1 })
	if st.LastSavepoint == nil || st.LastSavepoint.Reason != "manual" {
		t.Fatalf("manual savepoint: %+v", st.LastSavepoint)
	}

	// 3. Upgrade by last-state, once a checkpoint followed the savepoint.
	// A savepoint's directory is savepoint-<job>-<checkpoint ID>.
	dir := filepath.Base(filepath.Dir(st.LastSavepoint.Path))
	manualID, err := strconv.ParseInt(dir[strings.LastIndex(dir, "-")+1:], 10, 64)
	if err != nil {
		t.Fatalf("savepoint path %s: %v", st.LastSavepoint.Path, err)
	}
	e.waitStatus(name, "a checkpoint after the savepoint", time.Minute, func(st v1alpha1.WeirJobStatus) bool {
		return st.LastCheckpoint != nil && st.LastCheckpoint.ID > manualID && strings.Contains(st.LastCheckpoint.Path, "chk-")
	})
	start = time.Now()
	gen = e.update(name, func(s *v1alpha1.WeirJobSpec) {
		s.UpgradeMode = v1alpha1.UpgradeLastState
		s.Checkpointing = &v1alpha1.CheckpointingSpec{Interval: &metav1.Duration{Duration: 300 * time.Millisecond}}
	})
	st = e.waitStatus(name, "the last-state upgrade", 2*time.Minute, running(gen))
	t.Logf("upgrade by last-state: %v from the spec change to the new job RUNNING", time.Since(start).Round(time.Millisecond))
	if st.LastSavepoint == nil || !st.LastSavepoint.Checkpoint {
		t.Fatalf("the last-state upgrade did not start from a checkpoint: %+v", st.LastSavepoint)
	}
	stable := gen

	// 4. An upgrade that cannot run: more parallelism than slots. The
	// operator rolls it back to the last stable spec.
	e.update(name, func(s *v1alpha1.WeirJobSpec) { s.UpgradeMode = v1alpha1.UpgradeSavepoint })
	e.waitStatus(name, "the mode change", time.Minute, running(stable+1))
	stable++
	bad := e.update(name, func(s *v1alpha1.WeirJobSpec) { p := int32(16); s.Parallelism = &p })
	st = e.waitStatus(name, "the rollback", 2*time.Minute, func(st v1alpha1.WeirJobStatus) bool {
		return st.LifecycleState == v1alpha1.StateRolledBack && st.JobState == "RUNNING"
	})
	if st.FailedGeneration != bad || st.DeployedGeneration != stable {
		t.Fatalf("after the rollback: failed generation %d (want %d), deployed %d (want %d)", st.FailedGeneration, bad, st.DeployedGeneration, stable)
	}
	var events corev1.EventList
	if err := e.k.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events.Items, func(ev corev1.Event) bool { return ev.Reason == "RolledBack" }) {
		t.Errorf("no RolledBack event among %d", len(events.Items))
	}

	// 5. Suspend and resume (a fixed spec first: back to parallelism 3).
	gen = e.update(name, func(s *v1alpha1.WeirJobSpec) { p := int32(3); s.Parallelism = &p; s.Suspend = true })
	e.waitStatus(name, "suspended", time.Minute, func(st v1alpha1.WeirJobStatus) bool { return st.LifecycleState == v1alpha1.StateSuspended })
	// The TaskManagers go once the job has stopped, in the round after.
	e.waitFor(30*time.Second, "a suspended job's TaskManagers scaled to zero", func() (bool, error) {
		err := e.k.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: name + "-taskmanager"}, &tm)
		return err == nil && *tm.Spec.Replicas == 0, err
	})
	gen = e.update(name, func(s *v1alpha1.WeirJobSpec) { s.Suspend = false })
	e.waitStatus(name, "resumed", 2*time.Minute, func(st v1alpha1.WeirJobStatus) bool {
		return st.JobState == "RUNNING" && st.Upgrade == nil && st.LifecycleState == v1alpha1.StateRunning
	})

	st = e.waitStatus(name, "the job to finish", 3*time.Minute, func(st v1alpha1.WeirJobStatus) bool { return st.LifecycleState == v1alpha1.StateFinished })
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
	t.Logf("savepoints: %+v", st.Savepoints)
}

// TestOperatorSessionCluster: a WeirCluster gets its objects and reports
// ready once its JobManager (a local process here) answers; a WeirJob
// naming it is submitted to it, and deleting the WeirJob cancels its job
// on the cluster, which stays.
func TestOperatorSessionCluster(t *testing.T) {
	t.Parallel()
	e := startOperator(t)
	ctx := context.Background()
	const name = "session"
	wc := &v1alpha1.WeirCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec:       v1alpha1.ClusterSpec{Image: "weir:dev", TaskManager: v1alpha1.TaskManagerSpec{Slots: 2}},
	}
	if err := e.k.Create(ctx, wc); err != nil {
		t.Fatal(err)
	}
	e.startLocalCluster(name, 1)
	e.waitForFast(time.Minute, "the session cluster ready", func() (bool, error) {
		var got v1alpha1.WeirCluster
		if err := e.k.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: name}, &got); err != nil {
			return false, err
		}
		return got.Status.Ready, nil
	})

	spec, err := os.ReadFile(writeSpec(t, e.dir, filepath.Join(e.dir, "out"), 0, 16, 500, "500ms"))
	if err != nil {
		t.Fatal(err)
	}
	wj := &v1alpha1.WeirJob{
		ObjectMeta: metav1.ObjectMeta{Name: "on-session", Namespace: e.ns},
		Spec:       v1alpha1.WeirJobSpec{ClusterRef: name, Job: v1alpha1.JobSource{Spec: string(spec)}},
	}
	if err := e.k.Create(ctx, wj); err != nil {
		t.Fatal(err)
	}
	st := e.waitStatus(wj.Name, "the job running on the session cluster", time.Minute, func(st v1alpha1.WeirJobStatus) bool {
		return st.LifecycleState == v1alpha1.StateRunning && st.JobState == "RUNNING"
	})
	var deps appsv1.DeploymentList
	if err := e.k.List(ctx, &deps, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != 2 {
		t.Errorf("%d Deployments, want the session cluster's 2 only", len(deps.Items))
	}
	// Deleting the WeirJob cancels its job (the finalizer), and the
	// resource goes.
	if err := e.k.Delete(ctx, e.get(wj.Name)); err != nil {
		t.Fatal(err)
	}
	e.waitForFast(time.Minute, "the WeirJob gone", func() (bool, error) {
		err := e.k.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: wj.Name}, &v1alpha1.WeirJob{})
		return err != nil && strings.Contains(err.Error(), "not found"), nil
	})
	var job jobDetail
	if err := e.weirJSON(&job, "job", "get", st.JobID); err != nil {
		t.Fatal(err)
	}
	if job.State != "CANCELED" && job.State != "CANCELLING" {
		t.Fatalf("the deleted WeirJob's job is %s", job.State)
	}
}

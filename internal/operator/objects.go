package operator

import (
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weirproject/weir/internal/certs"
	"github.com/weirproject/weir/operator/api/v1alpha1"
)

// Ports of the daemons in their pods.
const (
	jobManagerRPCPort  = 6123
	jobManagerHTTPPort = 8081
	taskManagerRPCPort = 6124
	taskManagerMetrics = 9249
	tlsDir             = "/etc/weir/tls"
)

// Keys of the TLS Secret.
const (
	secretCA      = "ca.pem"
	secretCert    = "tls.pem"
	secretKey     = "tls-key.pem"
	secretCAKey   = "ca-key.pem"
	serverNameFmt = "weir-%s"
)

// cluster is what the objects of one Weir cluster are made from: a
// WeirCluster's spec, or a WeirJob's own.
type cluster struct {
	name      string // the cluster ID, and the prefix of its objects
	namespace string
	spec      v1alpha1.ClusterSpec
	program   *v1alpha1.ProgramSpec
	// taskManagers is the TaskManager Deployment's replicas.
	taskManagers int32
	owner        metav1.OwnerReference
}

func (c cluster) tls() bool { return c.spec.TLS == nil || c.spec.TLS.Enabled }

func (c cluster) labels(component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "weir",
		"app.kubernetes.io/instance":   c.name,
		"app.kubernetes.io/component":  component,
		"app.kubernetes.io/managed-by": "weir-operator",
	}
}

func (c cluster) meta(name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       c.namespace,
		Labels:          c.labels(component),
		OwnerReferences: []metav1.OwnerReference{c.owner},
	}
}

func (c cluster) serviceAccount() string { return c.name + "-weir" }
func (c cluster) tlsSecret() string      { return c.name + "-weir-tls" }
func (c cluster) jobManager() string     { return c.name + "-jobmanager" }
func (c cluster) taskManager() string    { return c.name + "-taskmanager" }

// rbac lets the cluster's pods keep their HA data on the API server.
func (c cluster) rbac() (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	sa := &corev1.ServiceAccount{ObjectMeta: c.meta(c.serviceAccount(), "rbac")}
	role := &rbacv1.Role{
		ObjectMeta: c.meta(c.serviceAccount(), "rbac"),
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		},
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: c.meta(c.serviceAccount(), "rbac"),
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: c.namespace}},
	}
	return sa, role, rb
}

// newTLSSecret issues the cluster's CA and the one certificate its
// daemons and the operator share (named serverNameFmt, verified by
// --tls-server-name). It is made once and kept: reissuing it on every
// reconcile would restart every connection.
func (c cluster) newTLSSecret(now time.Time) (*corev1.Secret, error) {
	ca, err := certs.NewCA("weir "+c.name, now.Add(-time.Hour), now.AddDate(10, 0, 0))
	if err != nil {
		return nil, err
	}
	cert, key, err := ca.Issue(fmt.Sprintf(serverNameFmt, c.name), now.Add(-time.Hour), now.AddDate(2, 0, 0))
	if err != nil {
		return nil, err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: c.meta(c.tlsSecret(), "tls"),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{secretCA: ca.CertPEM(), secretCert: cert, secretKey: key, secretCAKey: caKey},
	}, nil
}

// daemonArgs are the flags both daemons take.
func (c cluster) daemonArgs() []string {
	args := []string{"--ha", "kubernetes", "--cluster-id", c.name, "--kube-namespace", c.namespace}
	if c.tls() {
		args = append(args,
			"--tls-cert", tlsDir+"/"+secretCert, "--tls-key", tlsDir+"/"+secretKey, "--tls-ca", tlsDir+"/"+secretCA,
			"--tls-server-name", fmt.Sprintf(serverNameFmt, c.name))
	}
	return args
}

func (c cluster) podSpec(container corev1.Container) corev1.PodSpec {
	container.ImagePullPolicy = c.spec.ImagePullPolicy
	container.Image = c.spec.Image
	container.Env = append([]corev1.EnvVar{{
		Name:      "POD_IP",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}},
	}}, c.spec.Env...)
	container.VolumeMounts = append(container.VolumeMounts, c.spec.VolumeMounts...)
	spec := corev1.PodSpec{ServiceAccountName: c.serviceAccount(), Volumes: append([]corev1.Volume{}, c.spec.Volumes...)}
	if c.tls() {
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "weir-tls", MountPath: tlsDir, ReadOnly: true})
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "weir-tls", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: c.tlsSecret(), Items: []corev1.KeyToPath{
				{Key: secretCA, Path: secretCA}, {Key: secretCert, Path: secretCert}, {Key: secretKey, Path: secretKey},
			}},
		}})
	}
	spec.Containers = []corev1.Container{container}
	return spec
}

func httpProbe(port int, scheme corev1.URIScheme) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(int32(port)), Scheme: scheme}},
		PeriodSeconds: 5,
	}
}

func (c cluster) scheme() corev1.URIScheme {
	if c.tls() {
		return corev1.URISchemeHTTPS
	}
	return corev1.URISchemeHTTP
}

func (c cluster) jobManagerDeployment() *appsv1.Deployment {
	replicas := max(c.spec.JobManager.Replicas, 1)
	args := append([]string{
		"--rpc-addr", ":" + strconv.Itoa(jobManagerRPCPort),
		"--http-addr", ":" + strconv.Itoa(jobManagerHTTPPort),
		"--advertise-addr", "$(POD_IP):" + strconv.Itoa(jobManagerRPCPort),
		"--advertise-http-addr", "$(POD_IP):" + strconv.Itoa(jobManagerHTTPPort),
		"--checkpoint-dir", c.checkpointStorage(),
	}, c.daemonArgs()...)
	container := corev1.Container{
		Name:    "jobmanager",
		Command: []string{"/usr/local/bin/jobmanager"},
		Args:    args,
		Ports: []corev1.ContainerPort{
			{Name: "rpc", ContainerPort: jobManagerRPCPort},
			{Name: "http", ContainerPort: jobManagerHTTPPort},
		},
		Resources:      c.spec.JobManager.Resources,
		LivenessProbe:  httpProbe(jobManagerHTTPPort, c.scheme()),
		ReadinessProbe: httpProbe(jobManagerHTTPPort, c.scheme()),
	}
	return c.deployment(c.jobManager(), "jobmanager", replicas, container)
}

func (c cluster) checkpointStorage() string {
	if c.spec.CheckpointStorage != "" {
		return c.spec.CheckpointStorage
	}
	return "/var/lib/weir/checkpoints"
}

func (c cluster) taskManagerDeployment(suspended bool) *appsv1.Deployment {
	replicas := c.taskManagers
	if suspended {
		replicas = 0
	}
	slots := max(c.spec.TaskManager.Slots, 1)
	args := append([]string{
		"--rpc-addr", ":" + strconv.Itoa(taskManagerRPCPort),
		"--http-addr", ":" + strconv.Itoa(taskManagerMetrics),
		"--advertise-addr", "$(POD_IP):" + strconv.Itoa(taskManagerRPCPort),
		"--slots", strconv.Itoa(int(slots)),
	}, c.daemonArgs()...)
	command := []string{"/usr/local/bin/taskmanager"}
	if c.program != nil {
		command = append(append([]string{}, c.program.Command...), "taskmanager")
	}
	container := corev1.Container{
		Name:    "taskmanager",
		Command: command,
		Args:    args,
		Ports: []corev1.ContainerPort{
			{Name: "rpc", ContainerPort: taskManagerRPCPort},
			{Name: "metrics", ContainerPort: taskManagerMetrics},
		},
		Resources:     c.spec.TaskManager.Resources,
		LivenessProbe: httpProbe(taskManagerMetrics, c.scheme()),
	}
	return c.deployment(c.taskManager(), "taskmanager", replicas, container)
}

func (c cluster) deployment(name, component string, replicas int32, container corev1.Container) *appsv1.Deployment {
	labels := c.labels(component)
	return &appsv1.Deployment{
		ObjectMeta: c.meta(name, component),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: labels,
					Annotations: map[string]string{
						"prometheus.io/scrape": "true",
						"prometheus.io/port":   strconv.Itoa(int(container.Ports[1].ContainerPort)),
					},
				},
				Spec: c.podSpec(container),
			},
		},
	}
}

// jobManagerService is the cluster's address for users: the REST API and
// the dashboard on any JobManager (a standby forwards to the leader), and
// gRPC (the leader answers; a standby refuses).
func (c cluster) jobManagerService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: c.meta(c.jobManager(), "jobmanager"),
		Spec: corev1.ServiceSpec{
			Selector: c.labels("jobmanager"),
			Ports: []corev1.ServicePort{
				{Name: "rpc", Port: jobManagerRPCPort, TargetPort: intstr.FromString("rpc")},
				{Name: "http", Port: jobManagerHTTPPort, TargetPort: intstr.FromString("http")},
			},
		},
	}
}

// Package kubetest runs a real Kubernetes API server for tests, as
// controller-runtime's envtest does: the kube-apiserver program (built
// from the k8s.io/kubernetes module by `make kube-apiserver`, named by
// WEIR_KUBE_APISERVER) over an etcd embedded in the test process. It
// serves the whole API (Leases, ConfigMaps, custom resources, Deployments)
// but runs no controllers and no kubelet: objects are stored and
// validated, pods are never run.
//
// One server is shared by a test binary (it takes about 20 seconds to
// start); tests keep apart by namespace. A package that uses it calls
// kubetest.Main from its TestMain.
package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/weirproject/weir/internal/freeport"
)

// Env names the kube-apiserver program.
const Env = "WEIR_KUBE_APISERVER"

// APIServer is a running kube-apiserver.
type APIServer struct {
	// URL is its HTTPS address.
	URL string
	// Token is an administrator's bearer token (group system:masters).
	Token string
	// Kubeconfig is a kubeconfig file reaching it as that administrator.
	Kubeconfig string
	// Config and Client reach it as that administrator.
	Config *rest.Config
	Client kubernetes.Interface

	dir  string
	cmd  *exec.Cmd
	etcd *embed.Etcd
	log  string

	crdMu sync.Mutex
	crds  map[string]bool
}

var shared struct {
	sync.Mutex
	srv *APIServer
	err error
}

// Main runs a package's tests and stops the shared server after them.
func Main(m *testing.M) int {
	code := m.Run()
	shared.Lock()
	defer shared.Unlock()
	if shared.srv != nil {
		shared.srv.stop()
	}
	return code
}

// Shared returns the test binary's API server, started at the first call.
// A test is skipped when WEIR_KUBE_APISERVER is not set.
func Shared(t testing.TB) *APIServer {
	t.Helper()
	bin := os.Getenv(Env)
	if bin == "" {
		t.Skipf("%s is not set: `make kube-apiserver` builds the API server these tests run against, and `make test` sets it", Env)
	}
	shared.Lock()
	defer shared.Unlock()
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = start(bin)
	}
	if shared.err != nil {
		t.Fatalf("kubetest: %v", shared.err)
	}
	return shared.srv
}

// Namespace creates a namespace of its own for t, deleted at its end.
func (s *APIServer) Namespace(t testing.TB) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "t-" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kubetest: create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// No namespace controller runs here: the namespace stays
		// terminating, its objects stay; only the name is gone from use.
		_ = s.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

// Log is the tail of the server's log, for a test's failure message.
func (s *APIServer) Log() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func start(bin string) (*APIServer, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s=%s: %w (`make kube-apiserver` builds it)", Env, bin, err)
	}
	dir, err := os.MkdirTemp("", "weir-kubetest-")
	if err != nil {
		return nil, err
	}
	s := &APIServer{dir: dir, log: filepath.Join(dir, "kube-apiserver.log")}
	ok := false
	defer func() {
		if !ok {
			s.stop()
		}
	}()
	etcdURL, err := s.startEtcd()
	if err != nil {
		return nil, err
	}
	if err := s.writeKeys(); err != nil {
		return nil, err
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	s.Token = hex.EncodeToString(b)
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(s.Token+",admin,admin,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	addr, err := freeport.Pick()
	if err != nil {
		return nil, err
	}
	_, port, _ := strings.Cut(addr, ":")
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd = exec.Command(bin,
		"--etcd-servers="+etcdURL,
		"--secure-port="+port,
		"--bind-address=127.0.0.1",
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--enable-priority-and-fairness=false",
		"--v=0",
	)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	s.URL = "https://" + addr
	s.Config = &rest.Config{
		Host:            s.URL,
		BearerToken:     s.Token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             1000,
		Burst:           1000,
	}
	if s.Client, err = kubernetes.NewForConfig(s.Config); err != nil {
		return nil, err
	}
	if err := s.waitReady(exited); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, s.Log())
	}
	if err := s.writeKubeconfig(); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

func (s *APIServer) startEtcd() (string, error) {
	cfg := embed.NewConfig()
	cfg.Name = "kubetest"
	cfg.Dir = filepath.Join(s.dir, "etcd")
	cfg.LogLevel = "panic"
	lo := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{lo}, []url.URL{lo}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{lo}, []url.URL{lo}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return "", fmt.Errorf("start etcd: %w", err)
	}
	s.etcd = e
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return "", fmt.Errorf("etcd: %w", err)
	case <-time.After(30 * time.Second):
		return "", fmt.Errorf("etcd not ready in 30s")
	}
	return "http://" + e.Clients[0].Addr().String(), nil
}

// writeKeys makes the service-account signing pair the server requires.
func (s *APIServer) writeKeys() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}

// waitReady waits for /readyz to answer ok, at most two minutes.
func (s *APIServer) waitReady(exited <-chan error) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.NewTimer(2 * time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+s.Token)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("kube-apiserver exited: %v", err)
		case <-deadline.C:
			return fmt.Errorf("kube-apiserver not ready in 2 minutes")
		case <-tick.C:
		}
	}
}

func (s *APIServer) writeKubeconfig() error {
	s.Kubeconfig = filepath.Join(s.dir, "kubeconfig")
	return s.WriteKubeconfig(s.Kubeconfig, s.URL)
}

// WriteKubeconfig writes a kubeconfig file reaching the server as its
// administrator at server (its URL, or a proxy's in front of it).
func (s *APIServer) WriteKubeconfig(path, server string) error {
	return os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: kubetest
  context:
    cluster: kubetest
    user: admin
current-context: kubetest
`, server, s.Token)), 0o600)
}

func (s *APIServer) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
	if s.etcd != nil {
		s.etcd.Close()
	}
	_ = os.RemoveAll(s.dir)
}

// InstallCRDs creates the custom resource definitions of the YAML files in
// dir (once per server) and waits until they are served.
func (s *APIServer) InstallCRDs(t testing.TB, dir string) {
	t.Helper()
	s.crdMu.Lock()
	defer s.crdMu.Unlock()
	if s.crds[dir] {
		return
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("kubetest: no CRDs in %s: %v", dir, err)
	}
	cs, err := apiextensionsclient.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("kubetest: %s: %v", f, err)
		}
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("kubetest: create CRD %s: %v", crd.Name, err)
		}
		for {
			got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err == nil && established(got) {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("kubetest: CRD %s not established", crd.Name)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if s.crds == nil {
		s.crds = map[string]bool{}
	}
	s.crds[dir] = true
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

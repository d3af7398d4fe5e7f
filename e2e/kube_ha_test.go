package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/kubeha"
	"github.com/weirproject/weir/internal/kubetest"
)

// kubeHA is the Kubernetes API server a cluster's HA runs on, and the
// proxy each JobManager reaches it through (to cut it off).
type kubeHA struct {
	api     *kubetest.APIServer
	ns      string
	proxies map[string]*tcpProxy // JobManager RPC address → its proxy
}

// startKubeHACluster is startHACluster on --ha kubernetes: JobManagers
// elect a leader on a Lease of a real API server and keep jobs and
// checkpoints in ConfigMaps; TaskManagers and the CLI find the leader
// through the Lease.
func startKubeHACluster(t *testing.T, jobManagers, taskManagers int) *haCluster {
	t.Helper()
	api := kubetest.Shared(t)
	c := &cluster{t: t, dir: t.TempDir()}
	t.Cleanup(c.stop)
	k := &kubeHA{api: api, ns: api.Namespace(t), proxies: map[string]*tcpProxy{}}
	h := &haCluster{cluster: c, jms: map[string]*process{}, http: map[string]string{}, kube: k}
	c.tmWhere = []string{"--ha", "kubernetes", "--kubeconfig", api.Kubeconfig, "--kube-namespace", k.ns, "--cluster-id", "e2e"}
	c.cliWhere = []string{"--kubeconfig", api.Kubeconfig, "--kube-namespace", k.ns, "--cluster-id", "e2e"}
	for i := range jobManagers {
		addr := freePort(t)
		h.http[addr] = freePort(t)
		p := startTCPProxy(t, strings.TrimPrefix(api.URL, "https://"))
		k.proxies[addr] = p
		kubeconfig := filepath.Join(c.dir, fmt.Sprintf("kubeconfig-jm-%d", i))
		if err := api.WriteKubeconfig(kubeconfig, "https://"+p.addr); err != nil {
			t.Fatal(err)
		}
		h.jms[addr] = c.start("jobmanager", "--ha", "kubernetes", "--kubeconfig", kubeconfig, "--kube-namespace", k.ns,
			"--cluster-id", "e2e", "--leader-lease", "2s", "--rpc-addr", addr, "--http-addr", h.http[addr],
			"--checkpoint-dir", c.checkpointDir(), "--heartbeat-timeout", "3s")
	}
	h.startTaskManagers(taskManagers)
	return h
}

func (h *haCluster) kubeLeader() (string, *process) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, ok, err := kubeha.CurrentLeader(ctx, kubeha.Config{Client: h.kube.api.Client, Namespace: h.kube.ns, ClusterID: "e2e"})
	if err != nil || !ok {
		return "", nil
	}
	return info.RPCAddr, h.jms[info.RPCAddr]
}

// TestKubeHALeaderFailover runs a job on --ha kubernetes through three
// changes of leader, each a different fault: the leader is SIGKILLed; the
// next one is cut off from the API server (it must step down on its own,
// before its Lease expires, and a standby takes over); the next one is
// paused (SIGSTOP) until a standby took over, then resumed (its writes are
// fenced by term and it steps down). Checkpoint IDs keep rising, the
// output is exactly once, and the job's HA objects go when it finishes.
func TestKubeHALeaderFailover(t *testing.T) {
	// Alone, not beside other tests: five daemons and the API server
	// would starve the timing of a parallel partner (the chaos rounds).
	const count, keys = 160000, 16 // about 40 s at 2000 records/s per source subtask
	h := startKubeHACluster(t, 3, 2)
	out := filepath.Join(h.dir, "out")
	id := h.submit(writeHASpec(t, h.dir, out, count, keys))
	h.waitFor(time.Minute, "two checkpoints", func() (bool, error) { return h.latestCompleted(id) >= 2, nil })

	// The standbys' REST API answers for the leader.
	leaderAddr, _ := h.leader()
	h.standbysAnswer(leaderAddr, id)

	// newLeader waits for a leader other than old to complete a checkpoint
	// after checkpoint before.
	newLeader := func(what, old string, before int64, since time.Time) string {
		var addr string
		h.waitFor(time.Minute, what, func() (bool, error) {
			a, p := h.leader()
			if p == nil || a == old {
				return false, nil
			}
			addr = a
			return h.latestCompleted(id) > before, nil
		})
		t.Logf("%s: a checkpoint on the new leader %v after the fault", what, time.Since(since).Round(time.Millisecond))
		return addr
	}

	// 1. SIGKILL.
	oldAddr, old := h.leader()
	if old == nil {
		t.Fatal("no leader on the Lease")
	}
	before, at := h.latestCompleted(id), time.Now()
	h.kill(old)
	oldAddr = newLeader("leader killed", oldAddr, before, at)

	// 2. Cut off from the API server.
	old = h.jms[oldAddr]
	before, at = h.latestCompleted(id), time.Now()
	h.kube.proxies[oldAddr].cut()
	h.waitFor(30*time.Second, "the cut-off leader to step down", func() (bool, error) {
		b, _ := os.ReadFile(old.Log)
		return bytes.Contains(b, []byte("leadership lost; stepping down")), nil
	})
	t.Logf("the cut-off leader stepped down %v after the cut (lease 2s)", time.Since(at).Round(time.Millisecond))
	cutAddr := oldAddr
	oldAddr = newLeader("leader cut off from the API server", oldAddr, before, at)
	h.kube.proxies[cutAddr].heal()

	// 3. Paused until another leads, then resumed.
	old = h.jms[oldAddr]
	logBefore, _ := os.ReadFile(old.Log)
	before, at = h.latestCompleted(id), time.Now()
	if err := old.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	newLeader("leader paused", oldAddr, before, at)
	if err := old.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	h.waitFor(time.Minute, "the resumed leader to step down", func() (bool, error) {
		b, _ := os.ReadFile(old.Log)
		return bytes.Count(b, []byte("leadership lost; stepping down")) > bytes.Count(logBefore, []byte("leadership lost; stepping down")), nil
	})

	if job := h.waitJob(id, 3*time.Minute); job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
	// A finished job's graph, counter and checkpoints leave the API server.
	h.waitFor(30*time.Second, "the finished job's ConfigMaps to go", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		list, err := h.kube.api.Client.CoreV1().ConfigMaps(h.kube.ns).List(ctx, listByCluster("e2e"))
		if err != nil {
			return false, err
		}
		return len(list.Items) == 0, nil
	})
}

// tcpProxy forwards a loopback port to a target until cut: then it
// closes every connection and refuses new ones, as a network partition
// between a daemon and the API server does, until healed.
type tcpProxy struct {
	addr   string
	target string
	lis    net.Listener
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
}

func startTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	lis, err := net.Listen("tcp", freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{addr: lis.Addr().String(), target: target, lis: lis, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { lis.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *tcpProxy) serve() {
	for {
		c, err := p.lis.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		go p.forward(c)
	}
}

func (p *tcpProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

func (p *tcpProxy) heal() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// listByCluster selects a cluster's per-job ConfigMaps: a finished job
// leaves none, while the term ConfigMap stays with the cluster.
func listByCluster(id string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: kubeha.LabelCluster + "=" + id + "," + kubeha.LabelType + " in (job,checkpoints)"}
}

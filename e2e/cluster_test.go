// Package e2e runs Weir as a user does: real jobmanager and taskmanager
// processes on loopback, driven through the weir CLI.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/blob/blobtest"
	"github.com/weirproject/weir/internal/blob/s3blob"
	"github.com/weirproject/weir/internal/freeport"
	"github.com/weirproject/weir/internal/kubetest"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/proc"
)

// Most tests here call t.Parallel: their time goes to waiting on daemons
// (leases, restarts, timers, rate-limited inputs), about two thirds of a
// core for the package run one test at a time. go test runs them
// -parallel (GOMAXPROCS by default) at a time, after the tests that do
// not: those whose work is CPU-bound (the Nexmark and SQL query suites,
// the state round trip) or too short to matter.

// binDir holds the binaries built once for the whole package.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "weir-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The daemons get the fault points (internal/fault): tests set them
	// per process through GOFAIL_FAILPOINTS; unset, they cost nothing.
	args := []string{"build", "-tags", "failpoints", "-o", dir}
	if raceEnabled {
		args = append(args, "-race")
	}
	builds := [][]string{
		append(append([]string{}, args...), "../cmd/jobmanager", "../cmd/taskmanager", "../cmd/weir"),
		// The Kubernetes operator, run against a real API server.
		{"build", "-o", filepath.Join(dir, "weir-operator"), "../cmd/weir-operator"},
		// The Kafka-protocol development broker the Kafka tests run.
		{"build", "-o", filepath.Join(dir, "kafka-dev"), "../cmd/kafka-dev"},
		// A user's taskmanager with its own operator, built on the public SDK.
		{"build", "-o", filepath.Join(dir, "custom-taskmanager"), "../examples/custom-operator"},
		// Its event-time example: timers, and a source of partitions.
		{"build", "-o", filepath.Join(dir, "event-time-taskmanager"), "../examples/event-time"},
		// Go API programs: each submits its job and serves it.
		{"build", "-o", filepath.Join(dir, "example-wordcount"), "../examples/wordcount"},
		{"build", "-o", filepath.Join(dir, "example-inactivity-alert"), "../examples/inactivity-alert"},
		{"build", "-o", filepath.Join(dir, "example-windowed-totals"), "../examples/windowed-totals"},
		{"build", "-o", filepath.Join(dir, "example-nexmark"), "../examples/nexmark"},
	}
	for _, b := range builds {
		cmd := exec.Command("go", b...)
		// weir links PostgreSQL's parser through cgo, whatever the
		// environment says.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building binaries:", err)
			return 1
		}
	}
	binDir = dir
	return kubetest.Main(m)
}

// process is one daemon under test.
type process struct {
	*proc.Proc
	// faults is the address of the process's fault point control
	// (gofail's HTTP endpoint).
	faults string
	// args and env started it; a restart reuses them.
	args, env []string
}

type cluster struct {
	t      *testing.T
	dir    string
	jmAddr string
	jmHTTP string
	procs  []*process
	// etcd, when set, is where the CLI and TaskManagers find the leader.
	etcd string
	// ckpt is the checkpoint directory: a path under dir, or an s3://
	// location on a versitygw process of the test's (startClusterOn).
	ckpt string
	// env is every daemon's extra environment (the S3 endpoint and
	// credentials).
	env []string
	// s3 is the S3 server of an S3 cluster.
	s3 *blobtest.Server
	// tmArgs are extra flags of every TaskManager.
	tmArgs []string
	// tmWhere and cliWhere, when set, are how TaskManagers and the CLI
	// find the leader (--ha kubernetes) instead of jmAddr or etcd.
	tmWhere, cliWhere []string
}

// checkpointDir is --checkpoint-dir: the cluster's storage.
func (c *cluster) checkpointDir() string {
	if c.ckpt == "" {
		c.ckpt = filepath.Join(c.dir, "checkpoints")
	}
	return c.ckpt
}

// savepointDir is where the test's savepoints go: in the checkpoint
// directory, the only place the JobManager takes them.
func (c *cluster) savepointDir() string { return blob.Join(c.checkpointDir(), "savepoints") }

// exists says whether an object (a file) is at loc, in either storage.
func (c *cluster) exists(loc string) bool {
	c.t.Helper()
	ok, err := blob.Exists(context.Background(), loc)
	if err != nil {
		c.t.Fatalf("stat %s: %v", loc, err)
	}
	return ok
}

// useS3 makes the cluster about to start keep its checkpoints in a
// bucket of a versitygw process of its own: the daemons and this process
// reach it through the AWS_* environment and blob.Default. endpoint, when
// given, is where the daemons send their requests instead (a proxy in
// front of the server).
func (c *cluster) useS3(endpoint ...string) {
	c.t.Helper()
	srv := blobtest.Versity(c.t)
	srv.MakeBucket(c.t, "weir-e2e")
	c.s3 = srv
	c.ckpt = "s3://weir-e2e/checkpoints"
	daemons := srv.Endpoint
	if len(endpoint) > 0 {
		daemons = endpoint[0]
	}
	c.env = []string{"AWS_ENDPOINT_URL=" + daemons, "AWS_REGION=" + srv.Config.Region,
		"AWS_ACCESS_KEY_ID=" + blobtest.AccessKey, "AWS_SECRET_ACCESS_KEY=" + blobtest.SecretKey}
	s3, err := s3blob.New(srv.Config)
	if err != nil {
		c.t.Fatal(err)
	}
	useDefaultS3(c.t, s3)
}

// defaultS3 serializes the tests that point this process's blob.Default
// at their own S3 server: the tests run in parallel, and each reads its
// checkpoints and output through that one global.
var defaultS3 sync.Mutex

// useDefaultS3 makes s3 blob.Default's S3 store until t ends, waiting for
// any other test that holds it.
func useDefaultS3(t testing.TB, s3 blob.Store) {
	defaultS3.Lock()
	prev := blob.Default.S3
	blob.Default.S3 = s3
	t.Cleanup(func() {
		blob.Default.S3 = prev
		defaultS3.Unlock()
	})
}

// storages are the checkpoint storages the storage-dependent tests run
// on.
var storages = []string{"local", "s3"}

// freePort is an address for a daemon to listen on (freeport.Addr).
func freePort(t *testing.T) string { return freeport.Addr(t) }

// startCluster starts one JobManager and n TaskManagers and waits until
// every TaskManager registered.
func startCluster(t *testing.T, n int) *cluster {
	return startClusterWith(t, n, "taskmanager")
}

// startClusterWith runs TaskManagers from the binary tmBinary.
func startClusterWith(t *testing.T, n int, tmBinary string) *cluster {
	return startClusterOn(t, n, tmBinary, "local")
}

// startClusterOn keeps checkpoints in storage: "local" (a directory) or
// "s3" (a bucket on a versitygw process).
func startClusterOn(t *testing.T, n int, tmBinary, storage string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), jmAddr: freePort(t), jmHTTP: freePort(t)}
	if storage == "s3" {
		c.useS3()
	}
	return startClusterProcs(c, n, tmBinary)
}

// startClusterProcs starts the daemons of c, its storage chosen.
func startClusterProcs(c *cluster, n int, tmBinary string) *cluster {
	t := c.t
	t.Helper()
	t.Cleanup(c.stop)
	c.start("jobmanager", "--rpc-addr", c.jmAddr, "--http-addr", c.jmHTTP,
		"--checkpoint-dir", c.checkpointDir(), "--heartbeat-timeout", "3s")
	for i := 0; i < n; i++ {
		c.startTaskManager(tmBinary, fmt.Sprintf("tm-%d", i))
	}
	c.waitFor(30*time.Second, "taskmanagers registered", func() (bool, error) {
		var tms []map[string]any
		if err := c.weirJSON(&tms, "taskmanager", "list"); err != nil {
			return false, nil // the JobManager may not listen yet
		}
		return len(tms) == n, nil
	})
	return c
}

// startTaskManager starts a TaskManager with two slots.
func (c *cluster) startTaskManager(binary, id string) *process {
	where := []string{"--jobmanager", c.jmAddr}
	switch {
	case c.tmWhere != nil:
		where = c.tmWhere
	case c.etcd != "":
		where = []string{"--etcd-endpoints", c.etcd, "--cluster-id", "e2e"}
	}
	// A state directory of the test's own: the default one is named after
	// the ID only, and a TaskManager clears it at start, so tests running
	// at the same time on this machine would clear each other's.
	args := append(where, "--rpc-addr", freePort(c.t), "--http-addr", freePort(c.t),
		"--slots", "2", "--id", id, "--state-dir", filepath.Join(c.dir, "state-"+id))
	args = append(args, c.tmArgs...)
	if strings.HasPrefix(binary, "example-") {
		// A Go API program: its taskmanager command.
		args = append([]string{"taskmanager"}, args...)
	}
	return c.start(binary, args...)
}

// kill sends SIGKILL: the process gets no chance to clean up.
func (c *cluster) kill(p *process) {
	c.t.Helper()
	p.Kill()
}

func (c *cluster) start(name string, args ...string) *process {
	c.t.Helper()
	return c.startEnv(name, c.env, args...)
}

// startEnv starts a daemon with env added to the test's environment. Every
// daemon serves its fault points (internal/fault) over HTTP at
// process.faults.
func (c *cluster) startEnv(name string, env []string, args ...string) *process {
	c.t.Helper()
	faults := freePort(c.t)
	log := filepath.Join(c.dir, fmt.Sprintf("%s-%d.log", name, len(c.procs)))
	pr, err := proc.Start(name, filepath.Join(binDir, name), log, append([]string{"GOFAIL_HTTP=" + faults}, env...), args...)
	if err != nil {
		c.t.Fatal(err)
	}
	p := &process{Proc: pr, faults: faults, args: args, env: env}
	c.procs = append(c.procs, p)
	return p
}

// stop sends SIGTERM to every daemon and requires each to exit cleanly and
// promptly: a daemon that hangs or dies badly is a bug, and one still
// running after the test is a leaked process.
func (c *cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		if err := p.Stop(20 * time.Second); err != nil {
			c.t.Errorf("%v\n%s", err, tail(p.Log))
		}
	}
	if c.t.Failed() {
		if keep := os.Getenv("WEIR_E2E_KEEP_LOGS"); keep != "" {
			// Whole logs for debugging; the test output shows their tails.
			for _, p := range c.procs {
				b, _ := os.ReadFile(p.Log)
				_ = os.WriteFile(filepath.Join(keep, c.t.Name()+"-"+filepath.Base(p.Log)), b, 0o644)
			}
		}
		for _, p := range c.procs {
			c.t.Logf("--- %s log ---\n%s", p.Name, tail(p.Log))
		}
	}
	c.procs = nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 20000 {
		b = b[len(b)-20000:]
	}
	return string(b)
}

// weir runs the CLI against the cluster.
func (c *cluster) weir(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	where := []string{"--jobmanager", c.jmAddr}
	switch {
	case c.cliWhere != nil:
		where = c.cliWhere
	case c.etcd != "":
		where = []string{"--etcd-endpoints", c.etcd, "--cluster-id", "e2e"}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "weir"), append(where, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("weir %v: %w: %s", args, err, stderr.String())
	}
	return out, nil
}

func (c *cluster) weirJSON(v any, args ...string) error {
	out, err := c.weir(append(args, "-o", "json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("weir %v: decode %q: %w", args, out, err)
	}
	return nil
}

// waitFor polls cond until it holds; the daemons offer no push API to the
// CLI, so polling the state a user would see is the event.
func (c *cluster) waitFor(timeout time.Duration, what string, cond func() (bool, error)) {
	c.t.Helper()
	poll.UntilNoError(c.t, timeout, 100*time.Millisecond, what, cond)
}

type jobJSON struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	State        string `json:"state"`
	FailureCause string `json:"failure_cause"`
	Restarts     int    `json:"restarts"`
}

// waitJob waits until the job reaches a terminal state and returns it.
func (c *cluster) waitJob(id string, timeout time.Duration) jobJSON {
	c.t.Helper()
	var job jobJSON
	c.waitFor(timeout, "job "+id+" to end", func() (bool, error) {
		if err := c.weirJSON(&job, "job", "get", id); err != nil {
			return false, err
		}
		switch job.State {
		case "FINISHED", "FAILED", "CANCELED":
			return true, nil
		}
		return false, nil
	})
	return job
}

// chaining is whether the tests' running-sum jobs chain sum and sink (the
// default, as users run them); make chaos CHAINING=false runs them
// unchained.
var chaining = flag.Bool("chaining", true, "run the running-sum jobs with operator chaining (false: every vertex its own subtask)")

func writeSpec(t *testing.T, dir, out string, count, keys, rate int, interval string) string {
	t.Helper()
	spec := fmt.Sprintf(`name: running-sum
checkpointing: {interval: %s, mode: exactly-once, timeout: 1m, retained: 3}
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: {count: %d, keys: %d, rate: %d}}
  - {name: sum, operator: keyed-sum, parallelism: 2, inputs: [{from: source, partition: hash}]}
  - {name: sink, operator: file-sink, parallelism: 2, inputs: [{from: sum, partition: forward}], config: {path: %s}}
`, interval, count, keys, rate, strconv.Quote(out))
	if !*chaining {
		spec += "chaining: false\n"
	}
	path := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	_ "github.com/weirproject/weir/internal/connector/builtin" // the built-in connectors, for the job graph's validation

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirproject/weir/internal/jobgraph"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// Binaries are the executables a cluster runs.
type Binaries struct {
	JobManager  string
	TaskManager string // bench-taskmanager: the stock worker plus the bench operators
	// StockTaskManager is bin/taskmanager, for what must be measured on
	// the shipped binary (footprint, start-up).
	StockTaskManager string
	// ProfJobManager is bench-jobmanager: bin/jobmanager's code with a
	// pprof endpoint, for profiling runs only.
	ProfJobManager string
}

// Config describes a cluster.
type Config struct {
	Dir          string
	Bin          Binaries
	TaskManagers int
	Slots        int
	// Etcd, when set, runs the JobManager with --ha etcd against it and the
	// TaskManagers find the leader there.
	Etcd string
	// ClusterID names the cluster in etcd.
	ClusterID string
	// Pprof gives every TaskManager a pprof HTTP endpoint.
	Pprof bool
	// PprofJM runs bench-jobmanager with a pprof endpoint.
	PprofJM bool
	// ExtraJM are additional JobManager flags.
	ExtraJM []string
	// Stock runs bin/taskmanager instead of bench-taskmanager.
	Stock bool
	// NoWait returns as soon as the processes started.
	NoWait bool
	// TLS, when set, is a directory GenerateCerts wrote: every daemon runs
	// with --tls-cert, --tls-key and --tls-ca (the JobManager with
	// JobManagerCertName's certificate, each TaskManager with its ID's),
	// and the harness dials and scrapes with its client certificate.
	TLS string
}

// TM is one TaskManager process.
type TM struct {
	ID, RPC, HTTP, Pprof string
	*Proc
}

// Cluster is a running JobManager with its TaskManagers.
type Cluster struct {
	cfg     Config
	JM      *Proc
	JMAddr  string
	JMHTTP  string
	JMPprof string
	TMs     []*TM
	conn    *grpc.ClientConn
	Client  weirv1grpc.ClientServiceClient
	// http and scheme scrape /metrics: HTTPS with the CA under TLS.
	http    *http.Client
	scheme  string
	started time.Time
	nextTM  int
}

// StartCluster starts the JobManager and TaskManagers and waits until
// every TaskManager registered.
func StartCluster(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Slots == 0 {
		cfg.Slots = 2
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = "bench"
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, JMAddr: FreeAddr(), JMHTTP: FreeAddr(), started: time.Now(), http: httpClient, scheme: "http"}
	args := []string{"--rpc-addr", c.JMAddr, "--http-addr", c.JMHTTP,
		"--checkpoint-dir", filepath.Join(cfg.Dir, "checkpoints")}
	creds := insecure.NewCredentials()
	if cfg.TLS != "" {
		flags, err := tlsFlags(cfg.TLS, JobManagerCertName)
		if err != nil {
			return nil, err
		}
		args = append(args, flags...)
		if creds, c.http, err = clientTLS(cfg.TLS); err != nil {
			return nil, err
		}
		c.scheme = "https"
	}
	if cfg.Etcd != "" {
		args = append(args, "--ha", "etcd", "--etcd-endpoints", cfg.Etcd, "--cluster-id", cfg.ClusterID)
	}
	args = append(args, cfg.ExtraJM...)
	jmBin, env := cfg.Bin.JobManager, []string(nil)
	if cfg.PprofJM {
		c.JMPprof = FreeAddr()
		jmBin, env = cfg.Bin.ProfJobManager, []string{"BENCH_PPROF_ADDR=" + c.JMPprof}
	}
	jm, err := Start("jobmanager", jmBin, LogPath(cfg.Dir, "jobmanager"), env, args...)
	if err != nil {
		return nil, err
	}
	c.JM = jm
	conn, err := grpc.NewClient(c.JMAddr, grpc.WithTransportCredentials(creds))
	if err != nil {
		c.Stop()
		return nil, err
	}
	c.conn, c.Client = conn, weirv1grpc.NewClientServiceClient(conn)
	for i := 0; i < cfg.TaskManagers; i++ {
		if _, err := c.AddTM(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if cfg.NoWait {
		return c, nil
	}
	if err := c.WaitTMs(ctx, cfg.TaskManagers, 30*time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// AddTM starts one more TaskManager (it registers asynchronously).
func (c *Cluster) AddTM() (*TM, error) {
	t := &TM{ID: fmt.Sprintf("tm-%d", c.nextTM), RPC: FreeAddr(), HTTP: FreeAddr()}
	c.nextTM++
	where := []string{"--jobmanager", c.JMAddr}
	if c.cfg.Etcd != "" {
		where = []string{"--etcd-endpoints", c.cfg.Etcd, "--cluster-id", c.cfg.ClusterID}
	}
	args := []string{"--rpc-addr", t.RPC, "--http-addr", t.HTTP, "--slots", fmt.Sprint(c.cfg.Slots), "--id", t.ID}
	if c.cfg.TLS != "" {
		flags, err := tlsFlags(c.cfg.TLS, t.ID)
		if err != nil {
			return nil, err
		}
		args = append(args, flags...)
	}
	var env []string
	if c.cfg.Pprof {
		t.Pprof = FreeAddr()
		env = append(env, "BENCH_PPROF_ADDR="+t.Pprof)
	}
	bin := c.cfg.Bin.TaskManager
	if c.cfg.Stock {
		bin = c.cfg.Bin.StockTaskManager
	}
	p, err := Start(t.ID, bin, LogPath(c.cfg.Dir, t.ID), env, append(where, args...)...)
	if err != nil {
		return nil, err
	}
	t.Proc = p
	c.TMs = append(c.TMs, t)
	return t, nil
}

// WaitTMs waits until n TaskManagers are registered.
func (c *Cluster) WaitTMs(ctx context.Context, n int, timeout time.Duration) error {
	return Poll(ctx, timeout, 20*time.Millisecond, "taskmanagers registered", func() (bool, error) {
		if c.JM.Exited() {
			return false, fmt.Errorf("jobmanager exited:\n%s", c.JM.Tail(4000))
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		r, err := c.Client.ListTaskManagers(cctx, &weirv1.ListTaskManagersRequest{})
		if err != nil {
			return false, nil // not listening yet, or no leader yet
		}
		return len(r.GetTaskmanagers()) == n, nil
	})
}

// TM returns the TaskManager with the given ID.
func (c *Cluster) TM(id string) *TM {
	for _, t := range c.TMs {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// LiveTMs are the TaskManagers not killed.
func (c *Cluster) LiveTMs() []*TM {
	var out []*TM
	for _, t := range c.TMs {
		if !t.Exited() {
			out = append(out, t)
		}
	}
	return out
}

// Pids lists the JobManager's and the live TaskManagers' process IDs.
func (c *Cluster) Pids() []int {
	pids := []int{c.JM.Pid()}
	for _, t := range c.LiveTMs() {
		pids = append(pids, t.Pid())
	}
	return pids
}

// Submit parses a YAML job spec and submits it.
func (c *Cluster) Submit(ctx context.Context, spec string) (string, error) {
	g, err := jobgraph.ParseSpec([]byte(spec))
	if err != nil {
		return "", fmt.Errorf("spec: %w\n%s", err, spec)
	}
	r, err := c.Client.SubmitJob(ctx, &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		return "", err
	}
	return r.GetJobId(), nil
}

// Job fetches the job.
func (c *Cluster) Job(ctx context.Context, id string) (*weirv1.JobInfo, error) {
	r, err := c.Client.GetJob(ctx, &weirv1.GetJobRequest{JobId: id})
	if err != nil {
		return nil, err
	}
	return r.GetJob(), nil
}

// AllRunning reports whether the job and every subtask are RUNNING, with
// every attempt above minAttempt.
func AllRunning(j *weirv1.JobInfo, minAttempt int32) bool {
	if j.GetState() != weirv1.JobState_JOB_STATE_RUNNING {
		return false
	}
	for _, v := range j.GetVertices() {
		for _, st := range v.GetSubtasks() {
			if st.GetState() != weirv1.ExecutionState_EXECUTION_STATE_RUNNING || st.GetAttempt() <= minAttempt {
				return false
			}
		}
	}
	return true
}

// ErrJobEnded is returned while waiting for a job that ended.
var ErrJobEnded = errors.New("job ended")

// WaitRunning waits until the job and all its subtasks run.
func (c *Cluster) WaitRunning(ctx context.Context, id string, timeout time.Duration) error {
	return Poll(ctx, timeout, 5*time.Millisecond, "job "+id+" running", func() (bool, error) {
		j, err := c.Job(ctx, id)
		if err != nil {
			return false, err
		}
		switch j.GetState() {
		case weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELED, weirv1.JobState_JOB_STATE_FINISHED:
			return false, fmt.Errorf("%w: %s %s", ErrJobEnded, j.GetState(), j.GetFailureCause())
		}
		return AllRunning(j, -1), nil
	})
}

// Cancel cancels the job and waits until it ended.
func (c *Cluster) Cancel(ctx context.Context, id string) error {
	if _, err := c.Client.CancelJob(ctx, &weirv1.CancelJobRequest{JobId: id}); err != nil {
		return err
	}
	return Poll(ctx, 30*time.Second, 20*time.Millisecond, "job "+id+" cancelled", func() (bool, error) {
		j, err := c.Job(ctx, id)
		if err != nil {
			return false, err
		}
		switch j.GetState() {
		case weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELED, weirv1.JobState_JOB_STATE_FINISHED:
			return true, nil
		}
		return false, nil
	})
}

// Scrape reads the /metrics of every live TaskManager, merged.
func (c *Cluster) ScrapeTMs(ctx context.Context) (Metrics, error) {
	var all Metrics
	for _, t := range c.LiveTMs() {
		m, err := scrape(ctx, c.http, c.scheme, t.HTTP)
		if err != nil {
			return nil, err
		}
		all = append(all, m...)
	}
	return all, nil
}

// ScrapeJM reads the JobManager's /metrics.
func (c *Cluster) ScrapeJM(ctx context.Context) (Metrics, error) {
	return scrape(ctx, c.http, c.scheme, c.JMHTTP)
}

// TLS reports whether the cluster runs with mutual TLS.
func (c *Cluster) TLS() bool { return c.cfg.TLS != "" }

// Stop stops the TaskManagers, then the JobManager (SIGTERM, then SIGKILL
// after a grace period), and returns what went wrong on the way: a daemon
// that died early, hung or exited with an error.
func (c *Cluster) Stop() error {
	var errs []error
	if c.conn != nil {
		c.conn.Close()
	}
	for i := len(c.TMs) - 1; i >= 0; i-- {
		if err := c.TMs[i].Stop(20 * time.Second); err != nil {
			errs = append(errs, fmt.Errorf("%w\n%s", err, c.TMs[i].Tail(1500)))
		}
	}
	if c.JM != nil {
		if err := c.JM.Stop(20 * time.Second); err != nil {
			errs = append(errs, fmt.Errorf("%w\n%s", err, c.JM.Tail(1500)))
		}
	}
	return errors.Join(errs...)
}

// Poll calls cond every interval until it holds, fails, or timeout passes.
func Poll(ctx context.Context, timeout, interval time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Dir is the cluster's directory (logs, checkpoints).
func (c *Cluster) Dir() string { return c.cfg.Dir }

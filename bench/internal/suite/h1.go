package suite

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirproject/weir/bench/internal/harness"
	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/jobgraph"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// H1 measures a change of JobManager leader: two JobManagers with etcd HA
// (2 s lease), two TaskManagers running a keyed job that checkpoints every
// 200 ms; each round SIGKILLs the leader, measures until the other one
// completed a checkpoint, then starts the killed one again as the standby.
// Measured from the kill: the new leader elected (etcd's leader key), its
// first completed checkpoint, the longest pause of the sink's input (the
// TaskManagers' weir_task_records_in_total of the sink, scraped every
// 20 ms), and the subtasks restarted (attempt or TaskManager changed). The
// goal is the lease plus one second to the first checkpoint, no subtask
// restarted, and no pause of the sink's input longer than the lease.
const (
	h1Lease    = 2 * time.Second
	h1Interval = 200 * time.Millisecond
)

func init() { onDemand["H1"] = true }

const h1Spec = `name: h1
checkpointing: {interval: 200ms, mode: exactly-once, timeout: 1m}
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: {count: 1000000000, keys: 64, rate: 2000}}
  - {name: sum, operator: keyed-sum, parallelism: 2, inputs: [{from: source, partition: hash}]}
  - {name: sink, operator: blackhole, parallelism: 2, inputs: [{from: sum, partition: forward}]}
`

// h1JM is one of the two JobManagers.
type h1JM struct {
	addr, http string
	args       []string
	proc       *harness.Proc
	client     weirv1grpc.ClientServiceClient
	conn       *grpc.ClientConn
}

// h1Round is one kill of the leader.
type h1Round struct {
	Elected, Checkpoint, Pause time.Duration
	Restarted                  int
}

func runH1(e *Env, b *Bench) error {
	rounds := 6
	if e.Quick {
		rounds = 2
	}
	ep, err := e.Etcd()
	if err != nil {
		return err
	}
	clusterID := fmt.Sprintf("bench-h1-%d", time.Now().UnixNano())
	extra := []string{"--leader-lease", h1Lease.String(), "--heartbeat-timeout", "3s"}
	c, err := e.Cluster("h1", harness.Config{TaskManagers: 2, Slots: 2, Etcd: ep, ClusterID: clusterID, ExtraJM: extra})
	if err != nil {
		return err
	}
	defer e.StopCluster(c)
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer etcd.Close()
	keys, err := ha.NewKeys(clusterID)
	if err != nil {
		return err
	}

	jms := []*h1JM{{addr: c.JMAddr, http: c.JMHTTP, proc: c.JM}, {addr: harness.FreeAddr(), http: harness.FreeAddr()}}
	for _, jm := range jms {
		jm.args = append([]string{"--rpc-addr", jm.addr, "--http-addr", jm.http,
			"--checkpoint-dir", filepath.Join(c.Dir(), "checkpoints"),
			"--ha", "etcd", "--etcd-endpoints", ep, "--cluster-id", clusterID}, extra...)
		if jm.conn, err = grpc.NewClient(jm.addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return err
		}
		defer jm.conn.Close()
		jm.client = weirv1grpc.NewClientServiceClient(jm.conn)
	}
	start := func(i int) error {
		p, err := harness.Start(fmt.Sprintf("jobmanager-%d", i+1), e.Bin.JobManager, harness.LogPath(c.Dir(), fmt.Sprintf("jobmanager-%d-%d", i+1, time.Now().UnixNano())), nil, jms[i].args...)
		if err != nil {
			return err
		}
		jms[i].proc = p
		// Up before the next round or the end: a process signalled
		// while the Go runtime starts dies of the signal.
		return harness.Poll(e.Ctx, 30*time.Second, 10*time.Millisecond, "jobmanager-"+fmt.Sprint(i+1)+" serving", func() (bool, error) {
			resp, err := http.Get("http://" + jms[i].http + "/healthz")
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			return true, nil
		})
	}
	if err := start(1); err != nil {
		return err
	}
	defer func() {
		// The cluster stops the first JobManager's current process; the
		// second is this benchmark's.
		c.JM = jms[0].proc
		if err := jms[1].proc.Stop(20 * time.Second); err != nil {
			e.Problem("jobmanager-2 shutdown: %v", err)
		}
	}()
	leader := func() int {
		ctx, cancel := context.WithTimeout(e.Ctx, 2*time.Second)
		defer cancel()
		info, ok, err := ha.CurrentLeader(ctx, etcd, keys.Leader())
		if err != nil || !ok {
			return -1
		}
		for i, jm := range jms {
			if jm.addr == info.RPCAddr {
				return i
			}
		}
		return -1
	}
	g, err := jobgraph.ParseSpec([]byte(h1Spec))
	if err != nil {
		return err
	}
	l := leader()
	if l < 0 {
		return fmt.Errorf("no leader in etcd")
	}
	sub, err := jms[l].client.SubmitJob(e.Ctx, &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		return err
	}
	job := sub.GetJobId()
	latest := func(jm *h1JM) int64 {
		ctx, cancel := context.WithTimeout(e.Ctx, time.Second)
		defer cancel()
		r, err := jm.client.ListCheckpoints(ctx, &weirv1.ListCheckpointsRequest{JobId: job})
		if err != nil {
			return -1
		}
		return r.GetLatestCompleted().GetId()
	}

	var rs []h1Round
	for round := 1; round <= rounds; round++ {
		l := leader()
		if l < 0 {
			return fmt.Errorf("round %d: no leader in etcd", round)
		}
		old, other := jms[l], jms[1-l]
		ck := latest(old)
		if err := harness.Poll(e.Ctx, time.Minute, 20*time.Millisecond, "two checkpoints", func() (bool, error) {
			return latest(old) >= ck+2, nil
		}); err != nil {
			return err
		}
		before, err := h1Attempts(e, old.client, job)
		if err != nil {
			return err
		}
		ck = latest(old)
		stop, pause := h1WatchSink(e, c)
		t0 := time.Now()
		old.proc.Kill()
		var r h1Round
		if err := harness.Poll(e.Ctx, time.Minute, 5*time.Millisecond, "a checkpoint on the new leader", func() (bool, error) {
			if r.Elected == 0 && leader() == 1-l {
				r.Elected = time.Since(t0)
			}
			return r.Elected > 0 && latest(other) > ck, nil
		}); err != nil {
			stop()
			return fmt.Errorf("round %d: %w", round, err)
		}
		r.Checkpoint = time.Since(t0)
		stop()
		r.Pause = <-pause
		after, err := h1Attempts(e, other.client, job)
		if err != nil {
			return err
		}
		for k, v := range before {
			if after[k] != v {
				r.Restarted++
			}
		}
		e.Logf("H1 round %d: jobmanager-%d killed; jobmanager-%d elected %.0f ms, first checkpoint %.0f ms after the kill; longest sink pause %.0f ms; %d subtasks restarted",
			round, l+1, 2-l, s1Millis(r.Elected), s1Millis(r.Checkpoint), s1Millis(r.Pause), r.Restarted)
		if r.Restarted > 0 {
			e.Problem("round %d: %d subtasks restarted by the change of leader", round, r.Restarted)
		}
		rs = append(rs, r)
		if err := start(l); err != nil {
			return err
		}
	}
	if _, err := jms[leader()].client.CancelJob(e.Ctx, &weirv1.CancelJobRequest{JobId: job}); err != nil {
		return fmt.Errorf("cancel: %w", err)
	}

	col := func(f func(h1Round) float64) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = f(r)
		}
		return out
	}
	b.Add("leader SIGKILL → first checkpoint completed on the new leader", "ms", false, col(func(r h1Round) float64 { return s1Millis(r.Checkpoint) })).
		Against("goal: the lease + 1 s", s1Millis(h1Lease+time.Second), "ms")
	b.Add("  SIGKILL → new leader elected (etcd's leader key)", "ms", false, col(func(r h1Round) float64 { return s1Millis(r.Elected) })).
		Against("the lease", s1Millis(h1Lease), "ms")
	b.Add("  longest pause of the sink's input (sampled every 20 ms)", "ms", false, col(func(r h1Round) float64 { return s1Millis(r.Pause) })).
		Against("the lease", s1Millis(h1Lease), "ms")
	b.Add("  subtasks restarted (of 6)", "", false, col(func(r h1Round) float64 { return float64(r.Restarted) }))
	b.Note("2 JobManagers (--ha etcd, --leader-lease %v, --heartbeat-timeout 3s; etcd a single member in its own process) and 2 TaskManagers × 2 slots; job sequence-source (p=2, 2,000 records/s each) → hash → keyed-sum (p=2) → blackhole (p=2), checkpoints every %v; %d rounds, each SIGKILLing the leader after two checkpoints, then starting it again as the standby", h1Lease, h1Interval, rounds)
	b.Note("times from the kill: the leader key naming the other JobManager (polled every 5 ms), a checkpoint newer than the last one before the kill completed on it (ListCheckpoints); subtasks restarted: attempt or TaskManager changed between GetJob before the kill and after")
	return nil
}

// h1Attempts maps each subtask to its attempt and TaskManager.
func h1Attempts(e *Env, cl weirv1grpc.ClientServiceClient, job string) (map[string]string, error) {
	r, err := cl.GetJob(e.Ctx, &weirv1.GetJobRequest{JobId: job})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, v := range r.GetJob().GetVertices() {
		for _, st := range v.GetSubtasks() {
			out[fmt.Sprintf("%s/%d", v.GetName(), st.GetIndex())] = fmt.Sprintf("#%d@%s", st.GetAttempt(), st.GetTaskmanagerId())
		}
	}
	return out, nil
}

// h1WatchSink samples the sink's input every 20 ms until stop is called;
// pause then yields the longest time it did not grow.
func h1WatchSink(e *Env, c *harness.Cluster) (stop func(), pause <-chan time.Duration) {
	in := func() float64 {
		m, err := c.ScrapeTMs(e.Ctx)
		if err != nil {
			return -1
		}
		return m.Sum("weir_task_records_in_total", map[string]string{"task_name": "sink"})
	}
	done := make(chan struct{})
	out := make(chan time.Duration, 1)
	go func() {
		last, since, longest := in(), time.Now(), time.Duration(0)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				out <- max(longest, time.Since(since))
				return
			case <-tick.C:
			}
			if n := in(); n != last {
				longest = max(longest, time.Since(since))
				last, since = n, time.Now()
			}
		}
	}()
	return func() { close(done) }, out
}

package e2e

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/blob/blobtest"
	"github.com/weirproject/weir/internal/check"
)

// s3Job is the running-sum job on incremental Pebble state (so subtasks
// upload files, not only the JobManager's _metadata) with short
// checkpoints that tolerate failures (the faults here make some fail; the
// job must keep running).
func s3Job(t *testing.T, c *cluster, count, keys int) string {
	t.Helper()
	spec := writeSpec(t, c.dir, filepath.Join(c.dir, "out"), count, keys, 1000, "300ms")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	tolerant := strings.Replace(string(b), "timeout: 1m, retained: 3}", "timeout: 1m, tolerable-failed-checkpoints: 1000, retained: 3}\nstate: {backend: pebble, incremental: true}", 1)
	if err := os.WriteFile(spec, []byte(tolerant), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec
}

type checkpointHistory struct {
	Counts struct {
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"counts"`
	History []struct {
		ID             int64   `json:"id"`
		Status         string  `json:"status"`
		FailureMessage *string `json:"failure_message"`
	} `json:"history"`
}

// TestS3Outage: the S3 server is down for a few seconds while a job runs.
// The checkpoints of that window fail (the subtasks cannot write their
// state and decline; the JobManager counts them), the job keeps running
// without a restart, the first checkpoint after the server is back
// completes, and the output is exactly once.
func TestS3Outage(t *testing.T) {
	t.Parallel()
	const count, keys = 24000, 16
	c := startClusterOn(t, 2, "taskmanager", "s3")
	id := c.submit(s3Job(t, c, count, keys))
	c.waitFor(time.Minute, "three checkpoints", func() (bool, error) {
		n, err := c.checkpointsCompleted(id)
		return n >= 3, err
	})
	var before checkpointHistory
	if err := c.weirJSON(&before, "checkpoint", "list", id); err != nil {
		t.Fatal(err)
	}
	port := c.s3.Endpoint[strings.LastIndexByte(c.s3.Endpoint, ':')+1:]
	c.s3.Stop()
	down := time.Now()
	c.waitFor(time.Minute, "checkpoints to fail while S3 is down", func() (bool, error) {
		var h checkpointHistory
		err := c.weirJSON(&h, "checkpoint", "list", id)
		return h.Counts.Failed >= before.Counts.Failed+2, err
	})
	<-time.After(time.Until(down.Add(3 * time.Second))) // the outage lasts a few seconds whatever the failures' pace
	var during checkpointHistory
	if err := c.weirJSON(&during, "checkpoint", "list", id); err != nil {
		t.Fatal(err)
	}
	var p int
	fmt.Sscan(port, &p)
	srv, err := blobtest.StartVersity(blobtest.VersityBinary(t), c.s3.Dir, p)
	if err != nil {
		t.Fatalf("restart the S3 server: %v", err)
	}
	t.Cleanup(srv.Stop)
	t.Logf("S3 down for %s: %d checkpoints failed meanwhile", time.Since(down).Round(100*time.Millisecond), during.Counts.Failed-before.Counts.Failed)
	c.waitFor(time.Minute, "a checkpoint completed after the outage", func() (bool, error) {
		n, err := c.checkpointsCompleted(id)
		return n > during.Counts.Completed, err
	})
	job := c.waitJob(id, 2*time.Minute)
	if job.State != "FINISHED" || job.Restarts != 0 {
		t.Fatalf("job ended %s after %d restarts (%s); want FINISHED without a restart", job.State, job.Restarts, job.FailureCause)
	}
	var reasons []string
	for _, h := range during.History {
		if h.Status == "FAILED" && h.FailureMessage != nil {
			reasons = append(reasons, *h.FailureMessage)
		}
	}
	if len(reasons) == 0 || !strings.Contains(strings.Join(reasons, "\n"), "s3://weir-e2e/") {
		t.Errorf("failed checkpoints do not name the storage: %q", reasons)
	}
	for _, r := range reasons {
		t.Logf("failed: %.300s", r)
	}
	// Every daemon counts its storage requests; the failed uploads are
	// the TaskManagers'.
	var failedPuts float64
	for _, p := range c.procs {
		for i, a := range p.args {
			if a == "--http-addr" && p.Name == "taskmanager" && !p.Meant() {
				failedPuts += c.metric(p.args[i+1], `weir_storage_requests_total{op="put",result="error"}`)
			}
		}
	}
	if failedPuts == 0 {
		t.Errorf("the TaskManagers counted no failed put")
	}
	t.Logf("the TaskManagers counted %v failed puts (attempts, retries included)", failedPuts)
	lines, err := check.ReadCommitted(filepath.Join(c.dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
}

// TestS3Slow: every request to S3 takes 50 ms longer (a proxy in front of
// the server): checkpoints take longer but complete, and the output is
// exactly once.
func TestS3Slow(t *testing.T) {
	t.Parallel()
	const count, keys = 16000, 16
	var target atomic.Pointer[url.URL]
	var delayed atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-time.After(50 * time.Millisecond) // the injected latency
		delayed.Add(1)
		httputil.NewSingleHostReverseProxy(target.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	c := &cluster{t: t, dir: t.TempDir(), jmAddr: freePort(t), jmHTTP: freePort(t)}
	c.useS3(proxy.URL)
	u, err := url.Parse(c.s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	target.Store(u)
	startClusterProcs(c, 2, "taskmanager")
	id := c.submit(s3Job(t, c, count, keys))
	job := c.waitJob(id, 3*time.Minute)
	if job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}
	n, err := c.checkpointsCompleted(id)
	if err != nil || n < 3 {
		t.Fatalf("%d checkpoints completed (%v), want at least 3", n, err)
	}
	t.Logf("%d requests delayed 50 ms; %d checkpoints completed", delayed.Load(), n)
	lines, err := check.ReadCommitted(filepath.Join(c.dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
}

// metric is the value of one series on a daemon's /metrics (0 if absent).
func (c *cluster) metric(httpAddr, series string) float64 {
	c.t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

// TestS3TaskManagerKilledMidUpload: a TaskManager dies in the middle of a
// checkpoint's uploads to S3 (the incrementalUpload fault point crashes
// it after some of its files are in the bucket). The job recovers, and
// once it is cancelled (retaining its checkpoints), nothing in the
// bucket under the job's prefix is left that no retained checkpoint
// references: the orphan clean-up listed the bucket and deleted the
// dead TaskManager's uploads.
func TestS3TaskManagerKilledMidUpload(t *testing.T) {
	t.Parallel()
	const count, keys = 400000, 2000
	c := startClusterOn(t, 3, "taskmanager", "s3")
	spec := s3Job(t, c, count, keys)
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	retain := strings.Replace(string(b), "retained: 3}", "retained: 3, externalized: retain-on-cancellation}\nrestart-strategy: {type: fixed-delay, attempts: 100, delay: 100ms}", 1)
	if err := os.WriteFile(spec, []byte(retain), 0o644); err != nil {
		t.Fatal(err)
	}
	tms := append([]*process(nil), c.procs[1:4]...)
	// The third upload of tm-0's subtasks crashes it: files of that
	// checkpoint are already in the bucket.
	c.setFault(tms[0], "incrementalUpload", `2*off->1*return("crash")`)
	id := c.submit(spec)
	c.waitFor(2*time.Minute, "the TaskManager to crash mid-upload", func() (bool, error) { return exited(tms[0]), nil })
	tms[0].Ended()
	c.startTaskManager("taskmanager", "tm-replacement")
	before, err := c.checkpointsCompleted(id)
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor(2*time.Minute, "5 checkpoints after the recovery", func() (bool, error) {
		n, err := c.checkpointsCompleted(id)
		return n >= before+5, err
	})
	if _, err := c.weir("job", "cancel", id); err != nil {
		t.Fatal(err)
	}
	if job := c.waitJob(id, time.Minute); job.State != "CANCELED" || job.Restarts == 0 {
		t.Fatalf("job ended %s after %d restarts; want CANCELED after a restart", job.State, job.Restarts)
	}
	jobDir := blob.Join(c.checkpointDir(), id)
	var report orphanReport
	c.waitFor(15*time.Second, "the bucket to hold only referenced files", func() (bool, error) {
		report, err = orphansIn(jobDir)
		return err == nil && len(report.orphans) == 0, err
	})
	if len(report.retained) == 0 || report.sharedRefs == 0 {
		t.Fatalf("retained %v with %d shared references: nothing incremental was checked", report.retained, report.sharedRefs)
	}
	t.Logf("%d retained checkpoints, %d files in shared/, no orphan", len(report.retained), report.sharedFiles)
}

// localRecoveryCluster starts a cluster on S3 whose two TaskManagers keep
// local recovery copies.
func localRecoveryCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), jmAddr: freePort(t), jmHTTP: freePort(t)}
	c.useS3()
	c.tmArgs = []string{"--local-recovery"}
	return startClusterProcs(c, 2, "taskmanager")
}

// TestLocalRecoveryOnS3: with --local-recovery, a job that fails and
// restarts on the same TaskManagers restores its Pebble state from the
// TaskManagers' local copies of the newest completed checkpoint, not
// from the bucket, and its output is exactly once.
func TestLocalRecoveryOnS3(t *testing.T) {
	t.Parallel()
	const count, keys = 60000, 2000
	c := localRecoveryCluster(t)
	spec := s3Job(t, c, count, keys)
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	restart := strings.Replace(string(b), "retained: 3}", "retained: 3}\nrestart-strategy: {type: fixed-delay, attempts: 5, delay: 100ms}", 1)
	if err := os.WriteFile(spec, []byte(restart), 0o644); err != nil {
		t.Fatal(err)
	}
	tms := append([]*process(nil), c.procs[1:3]...)
	// The fifth completed checkpoint's commit fails a sink subtask: the
	// job restarts from it, every subtask on the TaskManager it ran on.
	c.setFault(tms[0], "sinkBeforeCommit", `4*off->1*return("injected failure")`)
	id := c.submit(spec)
	job := c.waitJob(id, 3*time.Minute)
	if job.State != "FINISHED" || job.Restarts == 0 {
		t.Fatalf("job ended %s after %d restarts (%s); want FINISHED after a restart", job.State, job.Restarts, job.FailureCause)
	}
	local := 0
	for _, p := range tms {
		b, err := os.ReadFile(p.Log)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "restored from the local copy") {
				local++
				if !strings.Contains(line, "downloaded_bytes=0") {
					t.Errorf("a restore downloaded files it had a local copy of: %s", line)
				}
				t.Logf("%s", line[strings.Index(line, "restored"):])
			}
		}
	}
	if local == 0 {
		t.Fatal("no subtask restored from its local copy")
	}
	lines, err := check.ReadCommitted(filepath.Join(c.dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
}

// TestRescaleRestoresLocally: with --local-recovery, a job rescaled 2 → 4
// → 2 → 4 → 2 on the same two TaskManagers restores every keyed subtask
// from the TaskManagers' local copies (each new slot placed where most of
// its key groups were, a scale-in ingesting the other copy's key groups)
// and downloads nothing from the bucket, and its output is exactly once.
// The first rescale is not checked: the first deployment, which knows no
// state, may put both subtasks on one TaskManager, and then half of the
// four cannot be where their key groups are.
func TestRescaleRestoresLocally(t *testing.T) {
	t.Parallel()
	const count, keys = 60000, 2000
	c := localRecoveryCluster(t)
	id := c.submit(s3Job(t, c, count, keys))
	tms := append([]*process(nil), c.procs[1:3]...)
	var restores []string
	seen := map[string]int{} // log lines already read, by log
	for round, p := range []string{"4", "2", "4", "2"} {
		n, err := c.checkpointsCompleted(id)
		if err != nil {
			t.Fatal(err)
		}
		c.waitFor(time.Minute, "two more checkpoints", func() (bool, error) {
			m, err := c.checkpointsCompleted(id)
			return m >= n+2, err
		})
		if _, err := c.weir("job", "rescale", id, "--parallelism", "sum="+p, "--parallelism", "sink="+p); err != nil {
			t.Fatal(err)
		}
		want, _ := strconv.Atoi(p)
		// Only the lines this rescale's restores write count.
		var these []string
		c.waitFor(time.Minute, "every sum subtask restored at parallelism "+p, func() (bool, error) {
			these = these[:0]
			for _, tm := range tms {
				b, err := os.ReadFile(tm.Log)
				if err != nil {
					return false, err
				}
				for _, line := range strings.Split(string(b), "\n")[seen[tm.Log]:] {
					if strings.Contains(line, "task=sum") && strings.Contains(line, "restored from") {
						these = append(these, line)
					}
				}
			}
			return len(these) >= want, nil
		})
		if round > 0 {
			restores = append(restores, these...)
		}
		for _, tm := range tms {
			b, err := os.ReadFile(tm.Log)
			if err != nil {
				t.Fatal(err)
			}
			seen[tm.Log] = len(strings.Split(string(b), "\n")) - 1
		}
	}
	job := c.waitJob(id, 3*time.Minute)
	if job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}
	if len(restores) != 8 {
		t.Errorf("%d restores of sum subtasks logged after the first rescale, want 2, 4 and 2", len(restores))
	}
	for _, line := range restores {
		if !strings.Contains(line, "restored from the local copy") || !strings.Contains(line, "downloaded_bytes=0") {
			t.Errorf("a rescaled subtask downloaded state: %s", line)
		}
		t.Logf("%s", line[strings.Index(line, "restored"):])
	}
	lines, err := check.ReadCommitted(filepath.Join(c.dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
}

// TestJobManagerRefusesBadCheckpointStorage: a JobManager whose
// checkpoint directory cannot be used does not start, and says why with
// the endpoint, the bucket and the server's error code.
func TestJobManagerRefusesBadCheckpointStorage(t *testing.T) {
	srv := blobtest.Versity(t)
	srv.MakeBucket(t, "weir-e2e")
	creds := []string{"AWS_ENDPOINT_URL=" + srv.Endpoint, "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=" + blobtest.AccessKey, "AWS_SECRET_ACCESS_KEY=" + blobtest.SecretKey}
	wrongSecret := append(append([]string(nil), creds[:3]...), "AWS_SECRET_ACCESS_KEY=wrong")
	unreachable := append([]string{"AWS_ENDPOINT_URL=http://127.0.0.1:1"}, creds[1:]...)
	for _, tc := range []struct {
		name, dir string
		env       []string
		want      []string
	}{
		{"unknown scheme", "gs://bucket/ck", creds, []string{`unsupported storage scheme "gs"`}},
		{"missing bucket", "s3://no-such-bucket/ck", creds, []string{`"no-such-bucket"`, srv.Endpoint, "NoSuchBucket"}},
		{"wrong credentials", "s3://weir-e2e/ck", wrongSecret, []string{`"weir-e2e"`, srv.Endpoint, "HTTP 403"}},
		{"unreachable endpoint", "s3://weir-e2e/ck", unreachable, []string{"127.0.0.1:1", "unreachable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(binDir, "jobmanager"), "--rpc-addr", freePort(t), "--http-addr", freePort(t),
				"--checkpoint-dir", tc.dir)
			cmd.Env = append(os.Environ(), tc.env...)
			out, err := cmd.CombinedOutput()
			if err == nil || ctx.Err() != nil {
				t.Fatalf("the JobManager started (or hung) with %s: %v\n%s", tc.dir, err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not name %s:\n%s", w, out)
				}
			}
		})
	}
}

// TestFileSinkOnS3: the file sink writes to a bucket, exactly once,
// through a TaskManager killed mid-run: each epoch (or rolled part file)
// is a multipart upload completed when its checkpoint completes, and the
// restored attempt completes what its checkpoint pre-committed and aborts
// the rest. Both the default policy (a file per checkpoint) and rolling
// by size with in-progress files kept across checkpoints.
func TestFileSinkOnS3(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, roll string }{
		{"a file per checkpoint", ""},
		{"rolled by size", ", roll: {on-checkpoint: false, max-size: 256KiB, max-age: 1h}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const count, keys = 40000, 16
			c := startClusterOn(t, 3, "taskmanager", "s3")
			out := "s3://weir-e2e/out"
			spec := writeSpec(t, c.dir, out, count, keys, 1500, "300ms")
			b, err := os.ReadFile(spec)
			if err != nil {
				t.Fatal(err)
			}
			s := strings.Replace(string(b), "vertices:", "restart-strategy: {type: fixed-delay, attempts: 10, delay: 100ms}\nvertices:", 1)
			s = strings.Replace(s, "config: {path: \""+out+"\"}", "config: {path: \""+out+"\""+tc.roll+"}", 1)
			if err := os.WriteFile(spec, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			id := c.submit(spec)
			c.waitFor(time.Minute, "three checkpoints", func() (bool, error) {
				n, err := c.checkpointsCompleted(id)
				return n >= 3, err
			})
			c.kill(c.procs[1])
			c.startTaskManager("taskmanager", "tm-replacement")
			job := c.waitJob(id, 3*time.Minute)
			if job.State != "FINISHED" || job.Restarts == 0 {
				t.Fatalf("job ended %s after %d restarts (%s); want FINISHED after a restart", job.State, job.Restarts, job.FailureCause)
			}
			lines, err := check.ReadCommittedAt(context.Background(), out)
			if err != nil {
				t.Fatal(err)
			}
			if err := check.RunningSum(lines, count, keys); err != nil {
				t.Fatal(err)
			}
			objects := 0
			for _, err := range c.s3List(out) {
				if err != nil {
					t.Fatal(err)
				}
				objects++
			}
			t.Logf("%d records exactly once in %d objects under %s", len(lines), objects, out)
		})
	}
}

// s3List lists the objects under loc.
func (c *cluster) s3List(loc string) iter.Seq2[blob.Info, error] {
	st, err := blob.Open(loc)
	if err != nil {
		c.t.Fatal(err)
	}
	return st.List(context.Background(), loc)
}

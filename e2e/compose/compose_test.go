// Package compose tests the docker-compose cluster of deploy/: a 3-member
// etcd cluster, two JobManagers, three TaskManagers, Prometheus and the
// Kafka-protocol development broker, all containers of locally built
// images. Two jobs run through a TaskManager kill and a leader JobManager
// kill: the running-sum job (file sink) and deploy/kafka-windows.yaml
// (Kafka → window → Kafka), and both outputs are checked exactly once. It needs a Docker engine, a compose
// tool and the images, so it runs only under `make compose-test` (which
// builds them and sets WEIR_COMPOSE_TEST=1); plain `go test ./...` skips it.
package compose

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/blob/s3blob"
	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/compose"
	"github.com/weirproject/weir/internal/poll"
)

const (
	// project keeps the test's containers, network and volumes apart from
	// a cluster started with `make up` (project "weir").
	project = "weir-compose-test"
	// The job: count records over keys, rate records/s per source subtask,
	// so about count/(3*rate) = 180 s without failures. The leader is
	// killed some 120 s after the submission; at 110 s the job could
	// finish before that kill on a fast run, and a finished job is gone
	// from etcd, so the new leader would not know it.
	count, keys, rate = 540000, 16, 1000
	outputPath        = "/output/compose-test"
	// The service the test never kills: it runs the CLI in it.
	cliService = compose.CLIService
)

var images = []string{"weir:dev", "weir-etcd:dev", "weir-kafka:dev", "weir-s3:dev", "weir-prometheus:dev"}

var jobSpec = fmt.Sprintf(`name: compose-test
checkpointing: {interval: 1s, mode: exactly-once, timeout: 1m, retained: 3}
restart-strategy: {type: fixed-delay, attempts: 20, delay: 1s}
vertices:
  - {name: source, operator: sequence-source, parallelism: 3,
     config: {count: %d, keys: %d, rate: %d}}
  - {name: sum, operator: keyed-sum, parallelism: 3, inputs: [{from: source, partition: hash}]}
  - {name: sink, operator: file-sink, parallelism: 3, inputs: [{from: sum, partition: forward}],
     config: {path: %s}}
`, count, keys, rate, outputPath)

// cluster drives one compose project (internal/compose), failing the
// test where the project returns an error.
type cluster struct {
	*compose.Project
	t *testing.T
	// tls trusts the cluster's CA (deploy/pki); http reaches the REST API
	// over it with the admin token.
	tls  *http.Transport
	http *http.Client
}

func TestComposeCluster(t *testing.T) {
	if os.Getenv("WEIR_COMPOSE_TEST") == "" {
		t.Skip("needs Docker and the images: run `make compose-test` (sets WEIR_COMPOSE_TEST=1)")
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	c := newCluster(t)

	for _, img := range images {
		if _, err := c.run(ctx, nil, "docker", "image", "inspect", "--format", "{{.Id}}", img); err != nil {
			t.Fatalf("image %s missing: run `make images` (make compose-test builds them): %v", img, err)
		}
	}
	c.down() // leftovers of an interrupted run
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := c.composeOut(context.Background(), nil, "logs", "--no-color", "--tail=40")
			t.Logf("compose logs (last lines per service):\n%s", out)
		}
		c.down()
	})
	// An interrupted test (Ctrl-C) removes the cluster too.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		if _, ok := <-sig; ok {
			c.down()
			os.Exit(1)
		}
	}()

	phase := func(format string, args ...any) {
		t.Logf("[%5.1fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	if _, err := c.composeOut(ctx, nil, "up", "-d"); err != nil {
		t.Fatalf("compose up: %v", err)
	}
	phase("cluster started")
	c.waitFor(ctx, 3*time.Minute, "a leader with 3 TaskManagers registered", func() (bool, string) {
		var tms []struct {
			ID string `json:"id"`
		}
		if err := c.weirJSON(ctx, &tms, "taskmanager", "list"); err != nil {
			return false, err.Error()
		}
		return len(tms) == 3, fmt.Sprintf("%d TaskManagers", len(tms))
	})
	var leader string
	c.waitFor(ctx, time.Minute, "the leader in etcd", func() (bool, string) {
		leader = c.leader(ctx)
		return leader == "jobmanager-1" || leader == "jobmanager-2", leader
	})
	phase("%s leads, 3 TaskManagers registered", leader)
	prom := "http://" + c.hostPort(ctx, "prometheus", 9090)
	rest := map[string]string{
		"jobmanager-1": "https://" + c.hostPort(ctx, "jobmanager-1", 8081),
		"jobmanager-2": "https://" + c.hostPort(ctx, "jobmanager-2", 8081),
	}
	c.refusesStrangers(ctx, rest[leader])
	phase("a container without a certificate, and requests without a token, are refused")

	// A SQL query from the CLI's container: weir (cgo, linked statically)
	// runs on the empty base image, and the TaskManagers send the rows to
	// its default collect address, its address on the cluster's network.
	out, err := c.exec(ctx, nil, cliService, "weir", "sql", "-e", `CREATE SOURCE s (k BIGINT, v BIGINT, ts TIMESTAMP) WITH (connector='sequence', count='1000', keys='4');
SELECT k, v FROM s WHERE v < 10 LIMIT 3;`)
	if err != nil {
		t.Fatalf("weir sql: %v", err)
	}
	if lines := strings.Split(out, "\n"); len(lines) != 7 || lines[5] != "(3 rows)" {
		t.Fatalf("weir sql printed %q, want a header, a rule, 3 rows and their count", out)
	}
	phase("weir sql printed a SELECT's rows, streamed from the TaskManagers")

	out, err = c.exec(ctx, strings.NewReader(jobSpec), cliService, "weir", "job", "submit", "-f", "-")
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	jobID := strings.TrimSpace(out)
	phase("submitted job %s", jobID)

	// The Kafka job, and its input produced from outside the cluster
	// while it runs.
	kafkaSpec, err := kafkaJobSpec(c.Root)
	if err != nil {
		t.Fatal(err)
	}
	wantWindows, err := kafkaWant(c.Root)
	if err != nil {
		t.Fatal(err)
	}
	kafkaAddr := c.hostPort(ctx, "kafka", 9092)
	out, err = c.exec(ctx, strings.NewReader(kafkaSpec), cliService, "weir", "job", "submit", "-f", "-")
	if err != nil {
		t.Fatalf("submit deploy/kafka-windows.yaml: %v", err)
	}
	kafkaJobID := strings.TrimSpace(out)
	// The SQL example of the docs, as a user submits it: its two jobs
	// run through the kills too.
	sqlScriptText, sqlCount, sqlKeys, sqlStep, sqlJitter, sqlStart, err := sqlScript(c.Root)
	if err != nil {
		t.Fatal(err)
	}
	out, err = c.exec(ctx, strings.NewReader(sqlScriptText), cliService, "weir", "sql", "-f", "-")
	if err != nil {
		t.Fatalf("weir sql -f deploy/kafka-windows.sql: %v", err)
	}
	sqlJobs := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		name, id, ok := strings.Cut(l, ": ")
		if !ok {
			t.Fatalf("weir sql printed %q, want \"<sink>: <job id>\" lines", out)
		}
		sqlJobs[name] = id
	}
	if sqlJobs["numbers_to_kafka"] == "" || sqlJobs["per_second"] == "" {
		t.Fatalf("weir sql printed %q, want the jobs numbers_to_kafka and per_second", out)
	}
	phase("submitted deploy/kafka-windows.sql: %v", sqlJobs)
	produced := make(chan error, 1)
	go func() { produced <- produceEvents(ctx, kafkaAddr) }()
	phase("submitted the Kafka job %s; producing %d events at %d/s to %s", kafkaJobID, kafkaCount, kafkaRate, kafkaAddr)

	// Checkpoints complete, seen by the CLI, the REST API and Prometheus.
	c.waitForCheckpoints(ctx, jobID, 3)
	var cps struct {
		Counts struct {
			Completed int `json:"completed"`
		} `json:"counts"`
		Latest struct {
			Completed *struct {
				ID int64 `json:"id"`
			} `json:"completed"`
		} `json:"latest"`
	}
	if err := getJSON(ctx, c.http, rest[leader]+"/jobs/"+jobID+"/checkpoints", &cps); err != nil {
		t.Fatalf("REST checkpoints: %v", err)
	}
	if cps.Counts.Completed < 3 || cps.Latest.Completed == nil {
		t.Fatalf("REST /jobs/%s/checkpoints: %d completed, latest %v; want >= 3", jobID, cps.Counts.Completed, cps.Latest.Completed)
	}
	phase("REST %s/jobs/%s/checkpoints: %d completed, latest %d", rest[leader], jobID, cps.Counts.Completed, cps.Latest.Completed.ID)
	// The standby's published port answers too: it forwards to the leader.
	standby := map[string]string{"jobmanager-1": "jobmanager-2", "jobmanager-2": "jobmanager-1"}[leader]
	var viaStandby struct {
		Counts struct {
			Completed int `json:"completed"`
		} `json:"counts"`
	}
	if err := getJSON(ctx, c.http, rest[standby]+"/jobs/"+jobID+"/checkpoints", &viaStandby); err != nil || viaStandby.Counts.Completed < 3 {
		t.Fatalf("REST via the standby %s: %v, %d completed", standby, err, viaStandby.Counts.Completed)
	}
	phase("REST via the standby %s: %d completed", standby, viaStandby.Counts.Completed)
	completedQuery := fmt.Sprintf(`sum(weir_job_checkpoints_completed_total{job_id=%q})`, jobID)
	var first float64
	c.waitFor(ctx, time.Minute, "Prometheus to see the checkpoint counter", func() (bool, string) {
		v, ok, err := promScalar(ctx, prom, completedQuery)
		first = v
		return err == nil && ok && v > 0, fmt.Sprintf("%v %v %v", v, ok, err)
	})
	c.waitFor(ctx, time.Minute, "Prometheus to see the checkpoint counter rise", func() (bool, string) {
		v, ok, err := promScalar(ctx, prom, completedQuery)
		return err == nil && ok && v > first, fmt.Sprintf("%v (first %v) %v", v, first, err)
	})
	phase("Prometheus: %s rose from %v", completedQuery, first)

	// Kill a TaskManager that runs subtasks of both jobs.
	c.waitForCheckpoints(ctx, kafkaJobID, 3)
	victim := c.taskManagerOf(ctx, jobID, kafkaJobID)
	jobs := []string{jobID, kafkaJobID}
	before := map[string]int64{}
	for _, id := range jobs {
		c.mustRun(ctx, id)
		before[id] = c.latestCheckpoint(ctx, id)
	}
	c.kill(ctx, victim)
	phase("killed %s (latest checkpoints %v)", victim, before)
	for _, id := range jobs {
		c.waitFor(ctx, 2*time.Minute, "job "+id+" to restart after the TaskManager loss", func() (bool, string) {
			j, err := c.job(ctx, id)
			if err != nil {
				return false, err.Error()
			}
			return j.Restarts >= 1 && j.State == "RUNNING", fmt.Sprintf("%s, %d restarts", j.State, j.Restarts)
		})
		// A checkpoint completed before the kill may still show up; wait
		// for one triggered after the restart.
		c.waitForCheckpointAfter(ctx, id, max(before[id], c.latestCheckpoint(ctx, id)))
	}
	phase("both jobs restarted and checkpoint again")
	c.start(ctx, victim)

	// Kill the leading JobManager: the standby takes over, recovers the
	// jobs from etcd and adopts their subtasks.
	restarts := map[string]int{}
	for _, id := range jobs {
		c.mustRun(ctx, id)
		before[id] = c.latestCheckpoint(ctx, id)
		if j, err := c.job(ctx, id); err == nil {
			restarts[id] = j.Restarts
		}
	}
	c.kill(ctx, leader)
	phase("killed the leader %s (latest checkpoints %v)", leader, before)
	old := leader
	c.waitFor(ctx, 2*time.Minute, "another JobManager to lead", func() (bool, string) {
		leader = c.leader(ctx)
		return (leader == "jobmanager-1" || leader == "jobmanager-2") && leader != old, leader
	})
	phase("%s leads", leader)
	for _, id := range jobs {
		var state string
		c.waitFor(ctx, 2*time.Minute, "job "+id+" to run on the new leader", func() (bool, string) {
			j, err := c.job(ctx, id)
			if err != nil {
				return false, err.Error()
			}
			state = j.State
			// On a slow host the running sum may reach its end right
			// after the recovery: its final checkpoint finishes it.
			return j.State == "RUNNING" || (id == jobID && j.State == "FINISHED"), j.State
		})
		if state == "RUNNING" {
			c.waitForCheckpointAfter(ctx, id, max(before[id], c.latestCheckpoint(ctx, id)))
		}
		// The new leader adopts the subtasks instead of restarting them;
		// the fault matrix's leader-kill row holds it to none.
		if j, err := c.job(ctx, id); err == nil {
			phase("job %s: %d restarts before the leader's kill, %d after", id, restarts[id], j.Restarts)
		}
	}
	phase("both jobs recovered on %s and checkpoint again", leader)
	c.start(ctx, old)
	c.waitFor(ctx, 2*time.Minute, "3 TaskManagers registered with the new leader", func() (bool, string) {
		var tms []struct {
			ID string `json:"id"`
		}
		if err := c.weirJSON(ctx, &tms, "taskmanager", "list"); err != nil {
			return false, err.Error()
		}
		return len(tms) == 3, fmt.Sprintf("%d TaskManagers", len(tms))
	})

	c.waitFor(ctx, 5*time.Minute, "the job to finish", func() (bool, string) {
		j, err := c.job(ctx, jobID)
		if err != nil {
			return false, err.Error()
		}
		if j.State == "FAILED" || j.State == "CANCELED" {
			t.Fatalf("job ended %s: %s", j.State, j.FailureCause)
		}
		return j.State == "FINISHED", j.State
	})
	phase("job FINISHED")

	// Exactly once: the committed output, copied out of the output volume.
	dir := filepath.Join(t.TempDir(), "output")
	cid := c.containerID(ctx, cliService)
	if _, err := c.run(ctx, nil, "docker", "cp", cid+":"+outputPath, dir); err != nil {
		t.Fatalf("copy the output out of the volume: %v", err)
	}
	lines, err := check.ReadCommitted(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatalf("output of %d records is not exactly once: %v", len(lines), err)
	}
	phase("exactly once: %d committed records, every running sum once", len(lines))

	// The checkpoints are in the s3 service's bucket (the Kafka job's,
	// still running: a finished job's are gone), and no volume holds
	// them: the daemons share only the output volume.
	c.checkpointsInS3(ctx, kafkaJobID)
	phase("checkpoints of %s are in s3://weir/checkpoints; the daemons share no checkpoint volume", kafkaJobID)

	// The Kafka job: every window of the events in the windows topic,
	// read read_committed, exactly once.
	select {
	case err := <-produced:
		if err != nil {
			t.Fatalf("produce the events: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("producing the events: %v", ctx.Err())
	}
	var windows []string
	c.waitFor(ctx, 3*time.Minute, "every window in the windows topic", func() (bool, string) {
		if j, err := c.job(ctx, kafkaJobID); err == nil && j.State != "RUNNING" {
			t.Fatalf("the Kafka job is %s: %s", j.State, j.FailureCause)
		}
		var err error
		if windows, err = kafkaWindows(ctx, kafkaAddr); err != nil {
			return false, err.Error()
		}
		return len(windows) >= len(wantWindows), fmt.Sprintf("%d of %d windows", len(windows), len(wantWindows))
	})
	if err := check.Windows(windows, wantWindows); err != nil {
		t.Fatalf("the windows topic is not exactly once: %v", err)
	}
	if _, err := c.exec(ctx, nil, cliService, "weir", "job", "cancel", kafkaJobID); err != nil {
		t.Fatalf("cancel the Kafka job: %v", err)
	}
	phase("exactly once: %d windows of %d events in Kafka, each once with its sum", len(windows), kafkaCount)

	// The SQL jobs: every closed window of the sequence's records in
	// sql-windows once, with its count and sum.
	// (numbers_to_kafka finished long ago, perhaps before the leader
	// changed, which forgets finished jobs: the windows say whether all
	// its records came through.)
	sqlWantWindows, sqlClosed := sqlWant(sqlCount, sqlKeys, sqlStep, sqlJitter, sqlStart, 3000)
	var sqlGot map[string]string
	c.waitFor(ctx, 3*time.Minute, "every closed window in sql-windows", func() (bool, string) {
		if j, err := c.job(ctx, sqlJobs["per_second"]); err == nil && j.State != "RUNNING" {
			t.Fatalf("per_second is %s: %s", j.State, j.FailureCause)
		}
		var err error
		if sqlGot, err = sqlWindows(ctx, kafkaAddr); err != nil {
			t.Fatalf("%v", err)
		}
		err = checkSQLWindows(sqlGot, sqlWantWindows, sqlClosed)
		if err != nil && !errors.Is(err, errWindowMissing) {
			t.Fatalf("sql-windows is not exactly once: %v", err)
		}
		return err == nil, fmt.Sprintf("%d windows: %v", len(sqlGot), err)
	})
	if _, err := c.exec(ctx, nil, cliService, "weir", "job", "cancel", sqlJobs["per_second"]); err != nil {
		t.Fatalf("cancel per_second: %v", err)
	}
	phase("exactly once: the SQL example wrote %d windows to sql-windows, each once with its count and sum", len(sqlGot))

	// Prometheus scraped every target: both JobManagers, the three
	// TaskManagers (the killed ones again since their restart), etcd, itself.
	var health map[string]string
	c.waitFor(ctx, time.Minute, "every Prometheus target up", func() (bool, string) {
		h, err := promTargets(ctx, prom)
		if err != nil {
			return false, err.Error()
		}
		health = h
		for _, v := range h {
			if v != "up" {
				return false, fmt.Sprint(h)
			}
		}
		return len(h) == 9, fmt.Sprint(h)
	})
	phase("Prometheus targets: %v", health)
	// Both leaders reported completed checkpoints of the job: the first
	// until it was killed, its successor after recovering the job.
	byInstance, err := promVector(ctx, prom, fmt.Sprintf(`max by (instance) (max_over_time(weir_job_checkpoints_completed_total{job_id=%q}[15m]))`, jobID))
	if err != nil {
		t.Fatal(err)
	}
	for _, jm := range []string{old, leader} {
		if byInstance[jm+":8081"] <= 0 {
			t.Errorf("Prometheus has no completed checkpoints of the job from %s: %v", jm, byInstance)
		}
	}
	phase("Prometheus: completed checkpoints by JobManager %v", byInstance)
}

func newCluster(t *testing.T) *cluster {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, Project: compose.New(root, project, filepath.Join("deploy", "docker-compose.yml"))}
	// make pki made the cluster's CA and tokens.
	pki := filepath.Join(root, "deploy", "pki")
	ca, err := os.ReadFile(filepath.Join(pki, "ca.pem"))
	if err != nil {
		t.Fatalf("the cluster's certificates: %v (make compose-test makes them with make pki)", err)
	}
	token, err := os.ReadFile(filepath.Join(pki, "admin.token"))
	if err != nil {
		t.Fatalf("the cluster's admin token: %v (make pki)", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("no certificate in %s", filepath.Join(pki, "ca.pem"))
	}
	c.tls = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	c.http = &http.Client{Transport: bearer{token: strings.TrimSpace(string(token)), next: c.tls}}
	return c
}

func (c *cluster) run(ctx context.Context, stdin io.Reader, name string, args ...string) (string, error) {
	return c.Run(ctx, stdin, name, args...)
}

func (c *cluster) composeOut(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	return c.Compose(ctx, stdin, args...)
}

func (c *cluster) down() {
	if err := c.Down(); err != nil {
		c.t.Logf("compose down: %v", err)
	}
}

func (c *cluster) kill(ctx context.Context, service string) {
	c.t.Helper()
	if _, err := c.Docker(ctx, service, "kill"); err != nil {
		c.t.Fatalf("kill %s: %v", service, err)
	}
}

func (c *cluster) start(ctx context.Context, service string) {
	c.t.Helper()
	if _, err := c.Compose(ctx, nil, "start", service); err != nil {
		c.t.Fatalf("start %s: %v", service, err)
	}
}

func (c *cluster) containerID(ctx context.Context, service string) string {
	c.t.Helper()
	id, err := c.ContainerID(ctx, service)
	if err != nil {
		c.t.Fatalf("container of %s: %v", service, err)
	}
	return id
}

func (c *cluster) exec(ctx context.Context, stdin io.Reader, service string, cmd ...string) (string, error) {
	return c.Exec(ctx, stdin, service, cmd...)
}

func (c *cluster) hostPort(ctx context.Context, service string, port int) string {
	c.t.Helper()
	addr, err := c.HostPort(ctx, service, port)
	if err != nil {
		c.t.Fatal(err)
	}
	return addr
}

func (c *cluster) weirJSON(ctx context.Context, v any, args ...string) error {
	return c.WeirJSON(ctx, v, args...)
}

func (c *cluster) leader(ctx context.Context) string { return c.Leader(ctx, "etcd-1") }

func (c *cluster) job(ctx context.Context, id string) (compose.Job, error) { return c.Job(ctx, id) }

// mustRun fails the test unless the job still runs: a kill after the job
// ended would test nothing (a slower machine needs a longer job).
func (c *cluster) mustRun(ctx context.Context, id string) {
	c.t.Helper()
	j, err := c.job(ctx, id)
	if err != nil || j.State != "RUNNING" {
		c.t.Fatalf("job %s should still run before the kill: %q %v", id, j.State, err)
	}
}

// taskManagerOf picks a TaskManager, other than the CLI's, that runs
// subtasks of every job given.
func (c *cluster) taskManagerOf(ctx context.Context, ids ...string) string {
	c.t.Helper()
	count := map[string]int{}
	for _, id := range ids {
		j, err := c.job(ctx, id)
		if err != nil {
			c.t.Fatal(err)
		}
		runs := map[string]bool{}
		for _, v := range j.Vertices {
			for _, s := range v.Subtasks {
				if s.TaskManagerID != "" && s.TaskManagerID != compose.CLIService {
					runs[s.TaskManagerID] = true
				}
			}
		}
		for tm := range runs {
			count[tm]++
		}
	}
	for _, tm := range []string{"taskmanager-1", "taskmanager-2"} {
		if count[tm] == len(ids) {
			return tm
		}
	}
	c.t.Fatalf("no TaskManager outside %s runs subtasks of every job of %v: %v", compose.CLIService, ids, count)
	return ""
}

func (c *cluster) checkpoints(ctx context.Context, id string) (completed int, latest int64, err error) {
	cps, err := c.Checkpoints(ctx, id)
	if err != nil {
		return 0, 0, err
	}
	for _, h := range cps.History {
		if h.Status == "COMPLETED" && h.ID > latest {
			latest = h.ID
		}
	}
	return int(cps.Counts.Completed), latest, nil
}

func (c *cluster) latestCheckpoint(ctx context.Context, id string) int64 {
	c.t.Helper()
	_, latest, err := c.checkpoints(ctx, id)
	if err != nil {
		c.t.Fatal(err)
	}
	return latest
}

func (c *cluster) waitForCheckpoints(ctx context.Context, id string, n int) {
	c.waitFor(ctx, 2*time.Minute, fmt.Sprintf("%d completed checkpoints", n), func() (bool, string) {
		completed, _, err := c.checkpoints(ctx, id)
		if err != nil {
			return false, err.Error()
		}
		return completed >= n, fmt.Sprintf("%d completed", completed)
	})
}

// waitForCheckpointAfter waits for a checkpoint newer than id to complete:
// the job runs again with every subtask.
func (c *cluster) waitForCheckpointAfter(ctx context.Context, jobID string, id int64) {
	c.waitFor(ctx, 2*time.Minute, fmt.Sprintf("a checkpoint after %d", id), func() (bool, string) {
		_, latest, err := c.checkpoints(ctx, jobID)
		if err != nil {
			return false, err.Error()
		}
		return latest > id, fmt.Sprintf("latest %d", latest)
	})
}

func (c *cluster) waitFor(ctx context.Context, limit time.Duration, what string, cond func() (bool, string)) {
	c.t.Helper()
	poll.Until(c.t, limit, time.Second, what, func() (bool, string) {
		if ctx.Err() != nil {
			c.t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
		return cond()
	})
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func getJSON(ctx context.Context, hc *http.Client, u string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	return json.Unmarshal(body, v)
}

// promVector runs an instant query and returns its value per instance.
func promVector(ctx context.Context, prom, query string) (map[string]float64, error) {
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(ctx, http.DefaultClient, prom+"/api/v1/query?query="+url.QueryEscape(query), &r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: status %s", query, r.Status)
	}
	m := map[string]float64{}
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v: %w", query, s.Value, err)
		}
		m[s.Metric["instance"]] = v
	}
	return m, nil
}

// promScalar runs a query expected to return one series.
func promScalar(ctx context.Context, prom, query string) (float64, bool, error) {
	m, err := promVector(ctx, prom, query)
	if err != nil || len(m) != 1 {
		return 0, false, err
	}
	for _, v := range m {
		return v, true, nil
	}
	return 0, false, nil
}

// promTargets returns every active target's health by instance.
func promTargets(ctx context.Context, prom string) (map[string]string, error) {
	var r struct {
		Data struct {
			ActiveTargets []struct {
				Labels    map[string]string `json:"labels"`
				Health    string            `json:"health"`
				LastError string            `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := getJSON(ctx, http.DefaultClient, prom+"/api/v1/targets", &r); err != nil {
		return nil, err
	}
	h := map[string]string{}
	for _, tg := range r.Data.ActiveTargets {
		h[tg.Labels["instance"]] = tg.Health
	}
	return h, nil
}

// checkpointsInS3 fails unless the job's retained checkpoints' _metadata
// objects are in the s3 service's bucket and no Weir container mounts
// anything but the output volume.
func (c *cluster) checkpointsInS3(ctx context.Context, jobID string) {
	c.t.Helper()
	s3, err := s3blob.New(blob.S3Config{Endpoint: "http://" + c.hostPort(ctx, "s3", 7070), Region: "us-east-1",
		AccessKey: "weir", SecretKey: "weir-dev-secret", PathStyle: "path"})
	if err != nil {
		c.t.Fatal(err)
	}
	metadata := 0
	for info, err := range s3.List(ctx, "s3://weir/checkpoints/"+jobID) {
		if err != nil {
			c.t.Fatalf("list the bucket: %v", err)
		}
		if strings.HasSuffix(info.Location, "/_metadata") {
			metadata++
		}
	}
	if metadata == 0 {
		c.t.Fatalf("no checkpoint _metadata of job %s in s3://weir/checkpoints", jobID)
	}
	for _, svc := range []string{"jobmanager-1", "jobmanager-2", "taskmanager-1", "taskmanager-2", "taskmanager-3"} {
		out, err := c.run(ctx, nil, "docker", "inspect", "--format", "{{range .Mounts}}{{.Destination}} {{end}}", c.containerID(ctx, svc))
		if err != nil {
			c.t.Fatal(err)
		}
		mounts := strings.Fields(out)
		slices.Sort(mounts)
		if !slices.Equal(mounts, []string{"/output", "/pki"}) {
			c.t.Fatalf("%s mounts %v; want only /output and the certificates (/pki)", svc, mounts)
		}
	}
}

// refusesStrangers shows the cluster closed: a container on the compose
// network without a certificate the cluster's CA signed can neither
// register as a TaskManager nor submit a job, a CLI with a certificate but
// no token cannot submit, and the REST API answers 401 without a token.
func (c *cluster) refusesStrangers(ctx context.Context, rest string) {
	c.t.Helper()
	network := project + "_default"
	jm := "jobmanager-1:6123"
	// A TaskManager without a certificate never registers: it retries
	// with the JobManager refusing every handshake, which says so. It is
	// the first peer without a certificate, so the first refusal logged
	// is its own.
	if _, err := c.run(ctx, nil, "docker", "run", "-d", "--name", project+"-intruder", "--network", network,
		"--entrypoint", "/usr/local/bin/taskmanager", "weir:dev",
		"--jobmanager", jm, "--id", "intruder", "--advertise-addr", "intruder:6124"); err != nil {
		c.t.Fatalf("start a TaskManager without a certificate: %v", err)
	}
	defer func() { _, _ = c.run(context.Background(), nil, "docker", "rm", "-f", project+"-intruder") }()
	c.waitFor(ctx, time.Minute, "jobmanager-1 to refuse the TaskManager without a certificate", func() (bool, string) {
		// The daemons log to stderr.
		logs, err := exec.CommandContext(ctx, "docker", "logs", c.containerID(ctx, "jobmanager-1")).CombinedOutput()
		return err == nil && strings.Contains(string(logs), "refused at the TLS handshake"), "no refused handshake in jobmanager-1's log yet"
	})
	var tms []struct {
		ID string `json:"id"`
	}
	if err := c.weirJSON(ctx, &tms, "taskmanager", "list"); err != nil {
		c.t.Fatal(err)
	}
	for _, tm := range tms {
		if tm.ID == "intruder" {
			c.t.Fatalf("the TaskManager without a certificate registered: %v", tms)
		}
	}
	// The CLI without certificate or token: refused at the handshake.
	out, err := c.run(ctx, strings.NewReader(jobSpec), "docker", "run", "--rm", "-i", "--network", network,
		"--entrypoint", "/usr/local/bin/weir", "weir:dev", "--jobmanager", jm, "--timeout=5s", "job", "submit", "-f", "-")
	if err == nil {
		c.t.Fatalf("a CLI without a certificate submitted a job: %s", out)
	}
	// A certificate without a token may not submit.
	if out, err := c.run(ctx, strings.NewReader(jobSpec), "docker", "exec", "-i", "-e", "WEIR_TOKEN_FILE=", c.containerID(ctx, cliService),
		"weir", "--timeout=5s", "job", "submit", "-f", "-"); err == nil || !strings.Contains(err.Error(), "wants a token") {
		c.t.Fatalf("submit without a token: %v %s; want it refused for the token", err, out)
	}
	// REST: 401 without a token; health and metrics open.
	for path, want := range map[string]int{"/jobs/overview": http.StatusUnauthorized, "/healthz": http.StatusOK, "/metrics": http.StatusOK} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rest+path, nil)
		if err != nil {
			c.t.Fatal(err)
		}
		resp, err := (&http.Client{Transport: c.tls}).Do(req)
		if err != nil {
			c.t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			c.t.Errorf("GET %s without a token: %s, want %d", path, resp.Status, want)
		}
	}
}

package suite

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/weirproject/weir/bench/internal/harness"
	"github.com/weirproject/weir/internal/nexmark"
	"github.com/weirproject/weir/nexmark/queries"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// N1 runs the Nexmark queries of examples/nexmark (q0 q1 q2 q3 q4 q5 q7
// q8) as bounded jobs of N events, each on the heap and on the
// incremental Pebble backend, on a cluster of one JobManager and one
// TaskManager of 2 slots that is the query's own program (`nexmark -query
// qN taskmanager`, through a wrapper script as G1's). It measures from the
// job RUNNING to FINISHED: wall time T and the CPU time C of the
// JobManager and the TaskManager, and reports events/s (N/T), cores
// (C/T), events/s/core (N/C) and Nexmark's "Cores × Time" (C, in seconds,
// for N events). Beside them, the generator alone: one goroutine of the
// harness generating and encoding the same N events (Generate +
// AppendEncode), the ceiling of the source's own work per core.

const (
	// n1DefaultEvents is N unless -nexmark-events says otherwise; -quick
	// takes n1QuickEvents.
	n1DefaultEvents = 3_000_000
	n1QuickEvents   = 1_000_000
	// n1DefaultSamples runs of each query on each backend give each
	// point, their median (-nexmark-samples; -quick takes 1): one run
	// varies by ±20 % on a shared host.
	n1DefaultSamples = 3
	n1Parallelism    = 2
	n1Checkpoint     = 10 * time.Second
	// n1Poll is how often, at first, the job's state is polled while it
	// runs (n1PollEvery).
	n1Poll = 10 * time.Millisecond
)

// N1 runs only when asked for (BENCH=N1): 48 bounded jobs of 3 M events
// take 15–25 minutes.
func init() { onDemand["N1"] = true }

// n1Backends are the keyed state backends each query runs on, as
// examples/nexmark's -state names them.
var n1Backends = []string{"heap", "pebble-incremental"}

// n1Flink is Flink 1.13's published throughput per core of each query
// (events/s/core, the Nexmark suite's results), and n1Goal the goal on
// the heap run's events/s/core: 5 × Flink's, except q0, q1 and q2, which
// share one goal of 800k (5 × 155k, 158k and 175k are 775k, 790k and
// 875k).
var (
	n1Flink = map[string]float64{"q0": 155e3, "q1": 158e3, "q2": 175e3, "q3": 152e3, "q4": 34.3e3, "q5": 22.1e3, "q7": 12.3e3, "q8": 146e3}
	n1Goal  = map[string]float64{"q0": 800e3, "q1": 800e3, "q2": 800e3, "q3": 760e3, "q4": 171.5e3, "q5": 110.5e3, "q7": 61.5e3, "q8": 730e3}
	// n1Windowed are the window queries whose Pebble run must reach
	// n1PebbleGoal × the heap run's events/s/core.
	n1Windowed   = []string{"q4", "q5", "q7"}
	n1PebbleGoal = 0.5
)

// n1Options are a run's job settings: N events as fast as they go, p=2,
// checkpoints every 10 s (exactly-once, aligned: the default), the
// discarding sink, state on backend.
func n1Options(backend string, events int64) (queries.Options, error) {
	o := queries.Options{Events: events, Rate: 0, Parallelism: n1Parallelism, Checkpoint: n1Checkpoint}
	return o, o.SetState(backend)
}

// n1TaskManager writes, into dir, the executable the query's TaskManager
// is started as: a shell script that execs `nexmark -query q taskmanager`
// (with an empty -out, whatever the environment says: the discarding
// sink) with the flags the harness gives every TaskManager (and --pprof
// when profiling: the program serves pprof on its HTTP address).
// exec keeps the process ID, so /proc CPU time and signals reach the
// program. Its local state (Pebble) goes under dir.
func n1TaskManager(dir, prog, q string, pprof bool) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	extra := ""
	if pprof {
		extra = " --pprof"
	}
	path := filepath.Join(dir, "nexmark-taskmanager")
	return path, os.WriteFile(path, []byte(n1Script(prog, q, dir, extra)), 0o755)
}

func n1Script(prog, q, dir, extra string) string {
	return fmt.Sprintf("#!/bin/sh\nexec '%s' -query %s -out '' taskmanager --state-dir '%s'/state-$$%s \"$@\"\n", prog, q, dir, extra)
}

// n1JobTimeout bounds one job's run: N at 5 k events/s, at least 2
// minutes (q5 on pebble-incremental, the slowest, ran 10 M events at
// 13–17 k events/s on 2 busy cores).
func n1JobTimeout(events int64) time.Duration {
	return max(2*time.Minute, time.Duration(float64(events)/5e3*float64(time.Second)))
}

// n1Result is one bounded job's run.
type n1Result struct {
	Wall, CPU             time.Duration // RUNNING → FINISHED; JobManager + TaskManager
	State                 weirv1.JobState
	Cause                 string
	Restarts              int32
	Completed, FailedCkpt int64 // checkpoints
	// FailedAtEnd are the failed checkpoints the job's end failed: the
	// coordinator shut down, or a subtask had finished, as the job ended.
	FailedAtEnd int64
}

// n1Metrics are a run's numbers for events.
func (r n1Result) metrics(events int64) (perS, cores, perCore, coresTime float64) {
	t, c := r.Wall.Seconds(), r.CPU.Seconds()
	return float64(events) / t, c / t, float64(events) / c, c
}

// n1Submit builds query q for backend and submits it.
func n1Submit(e *Env, c *harness.Cluster, q, backend string, events int64) (string, error) {
	o, err := n1Options(backend, events)
	if err != nil {
		return "", err
	}
	job, err := queries.Build(q, o)
	if err != nil {
		return "", err
	}
	g, err := job.Graph()
	if err != nil {
		return "", err
	}
	r, err := c.Client.SubmitJob(e.Ctx, &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		return "", err
	}
	return r.GetJobId(), nil
}

// n1Wait polls the job until it ended (FINISHED, FAILED or CANCELED),
// cancelling it after timeout.
func n1Wait(e *Env, c *harness.Cluster, job string, timeout time.Duration) (*weirv1.JobInfo, error) {
	start := time.Now()
	var last *weirv1.JobInfo
	var err error
	for {
		var j *weirv1.JobInfo
		if j, err = c.Job(e.Ctx, job); err != nil {
			break
		}
		last = j
		switch j.GetState() {
		case weirv1.JobState_JOB_STATE_FINISHED, weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELED:
			return j, nil
		}
		if time.Since(start) > timeout {
			err = fmt.Errorf("timed out after %v waiting for job %s to finish (it is %s)", timeout, job, j.GetState())
			break
		}
		if err = sleep(e, n1PollEvery(time.Since(start))); err != nil {
			return last, err
		}
	}
	if e.Ctx.Err() == nil {
		if cerr := c.Cancel(e.Ctx, job); cerr != nil {
			e.Logf("cancel %s: %v", job, cerr)
		}
	}
	return last, err
}

// n1PollEvery is how long to wait before polling the job's state again,
// elapsed into its run: 10 ms, then 1/200 of the time elapsed, at most
// 250 ms. The end of T (and of C) is late by at most that, 0.5 % of T (or
// 10 ms), and the JobManager, whose CPU is measured, serves few calls.
func n1PollEvery(elapsed time.Duration) time.Duration {
	return min(max(elapsed/200, n1Poll), 250*time.Millisecond)
}

// n1Run runs query q on backend for events and measures it, RUNNING →
// ended. A job that does not end is an error; one that ends FAILED or
// CANCELED is returned as such.
func n1Run(e *Env, c *harness.Cluster, q, backend string, events int64) (n1Result, error) {
	return n1Measure(e, c, "N1 "+q+" "+backend, events, func() (string, error) { return n1Submit(e, c, q, backend, events) })
}

// n1Measure submits a bounded job of events (submit returns its ID) and
// measures it as n1Run does; what names it in the log. N2 measures its
// SQL jobs with it.
func n1Measure(e *Env, c *harness.Cluster, what string, events int64, submit func() (string, error)) (n1Result, error) {
	var r n1Result
	job, err := submit()
	if err != nil {
		return r, err
	}
	if err := c.WaitRunning(e.Ctx, job, time.Minute); err != nil {
		if errors.Is(err, harness.ErrJobEnded) {
			return r, fmt.Errorf("ended before all its subtasks ran (too few events to measure?): %w", err)
		}
		return r, err
	}
	// clusterCPU (K1's) sums the live processes: a TaskManager that died
	// meanwhile makes the job fail, and the run has no numbers.
	start, cpu0 := time.Now(), clusterCPU(c)
	j, err := n1Wait(e, c, job, n1JobTimeout(events))
	end, cpu1 := time.Now(), clusterCPU(c)
	if err != nil {
		return r, err
	}
	r.Wall, r.CPU = end.Sub(start), cpu1-cpu0
	r.State, r.Cause, r.Restarts = j.GetState(), j.GetFailureCause(), j.GetRestarts()
	if ck, err := n1Checkpoints(e, c, job); err == nil {
		r.Completed, r.FailedCkpt = ck.GetCounts().GetCompleted(), ck.GetCounts().GetFailed()
		for _, cs := range ck.GetHistory() {
			if cs.GetStatus() == weirv1.CheckpointStatus_CHECKPOINT_STATUS_FAILED && n1FailedAtEnd(cs, j.GetEndTimeMs()) {
				r.FailedAtEnd++
			}
		}
	} else {
		e.Logf("%s: checkpoints: %v", what, err)
	}
	return r, nil
}

// n1FailedAtEnd reports whether the failed checkpoint cs failed because the
// job, ending at endMs, ended: a reason only an ending job gives, or a
// failure to trigger (a subtask gone) in its last 2 seconds.
func n1FailedAtEnd(cs *weirv1.CheckpointStats, endMs int64) bool {
	switch cs.GetFailureReason() {
	case weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_COORDINATOR_SHUTDOWN,
		weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED_INPUT_END_OF_STREAM,
		weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED_TASK_CLOSING,
		weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_JOB_NOT_RUNNING,
		weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_NOT_ALL_REQUIRED_TASKS_RUNNING:
		return true
	case weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_TRIGGER_CHECKPOINT_FAILURE:
		return endMs > 0 && cs.GetFailureTimestampMs() >= endMs-2000
	}
	return false
}

// n1Checkpoints is the ended job's checkpoint statistics. Right after the
// job ended, while the JobManager closes its checkpoint coordinator and
// before it kept the coordinator's final statistics, ListCheckpoints
// answers with empty counts and no next_checkpoint (which the live and
// the final statistics both have): that answer is asked again, for up to
// 10 s.
func n1Checkpoints(e *Env, c *harness.Cluster, job string) (*weirv1.ListCheckpointsResponse, error) {
	var ck *weirv1.ListCheckpointsResponse
	err := harness.Poll(e.Ctx, 10*time.Second, 50*time.Millisecond, "job "+job+"'s final checkpoint statistics", func() (bool, error) {
		var err error
		ck, err = c.Client.ListCheckpoints(e.Ctx, &weirv1.ListCheckpointsRequest{JobId: job})
		if err != nil {
			return false, err
		}
		return ck.GetNextCheckpoint() != nil || ck.GetCounts().GetTotal() > 0, nil
	})
	if err != nil && ck != nil && ck.GetCounts() != nil {
		return ck, nil // timed out: take what it says
	}
	return ck, err
}

// n1Generator generates and encodes events 0..n-1 in one goroutine, into
// a reused buffer, and returns the wall and CPU time (this process's: it
// is otherwise idle; the garbage collector's work counts, as it does in a
// TaskManager).
func n1Generator(e *Env, n int64) (wall, cpu time.Duration, err error) {
	runtime.GC()
	var cfg nexmark.Config
	buf := make([]byte, 0, 4096)
	var sink int
	start, cpu0 := time.Now(), harness.SelfCPUTime()
	for i := int64(0); i < n; i++ {
		if i&0xffff == 0 && e.Ctx.Err() != nil {
			return 0, 0, e.Ctx.Err()
		}
		buf = nexmark.AppendEncode(buf[:0], nexmark.Generate(cfg, i))
		sink += len(buf)
	}
	wall, cpu = time.Since(start), harness.SelfCPUTime()-cpu0
	if sink == 0 {
		return 0, 0, fmt.Errorf("generator: no bytes")
	}
	return wall, cpu, nil
}

// N1: the Nexmark queries, events/s per core.
func runN1(e *Env, b *Bench) error {
	prog := filepath.Join(filepath.Dir(e.Bin.TaskManager), "nexmark")
	if _, err := os.Stat(prog); err != nil {
		return fmt.Errorf("%w (build it: make bench, or go build -o bin/ ./examples/nexmark)", err)
	}
	events := e.NexmarkEvents
	if events <= 0 {
		events = n1DefaultEvents
		if e.Quick {
			events = n1QuickEvents
		}
	}
	n := float64(events)
	samples := e.NexmarkSamples
	if samples <= 0 {
		samples = n1DefaultSamples
		if e.Quick {
			samples = 1
		}
	}
	names := queries.Names
	if len(e.NexmarkQueries) > 0 {
		names = nil
		for _, q := range e.NexmarkQueries {
			if !slices.Contains(queries.Names, q) {
				return fmt.Errorf("-nexmark-queries: N1 has no query %q (have %v)", q, queries.Names)
			}
			if !slices.Contains(names, q) {
				names = append(names, q)
			}
		}
	}

	e.Logf("N1: q0 generator alone, %d events in one goroutine", events)
	gwall, gcpu, err := n1Generator(e, events)
	if err != nil {
		return err
	}
	gen := n / gcpu.Seconds()
	b.Add("q0 generator alone (1 goroutine: Generate + AppendEncode)", "events/s/core", true, []float64{gen}).
		With("events_per_s", n/gwall.Seconds()).With("cpu_s", gcpu.Seconds()).With("wall_s", gwall.Seconds()).With("events", n)

	type key struct{ q, backend string }
	res := map[key][]n1Result{}
	// An error (a cluster that does not start, the run interrupted) ends
	// the benchmark, with the points of the queries that ran before.
	var runErr error
	for _, q := range names {
		if runErr = e.Ctx.Err(); runErr != nil {
			break
		}
		if err := n1Query(e, b, prog, q, events, samples, func(backend string, r n1Result) { res[key{q, backend}] = append(res[key{q, backend}], r) }); err != nil {
			runErr = fmt.Errorf("%s: %w", q, err)
			break
		}
	}

	// median is each point's median run (by events/s/core) and its
	// samples; ok is false when no run finished.
	median := func(q, backend string) (n1Result, []float64, bool) {
		var done []n1Result
		for _, r := range res[key{q, backend}] {
			if r.State == weirv1.JobState_JOB_STATE_FINISHED {
				done = append(done, r)
			}
		}
		if len(done) == 0 {
			return n1Result{}, nil, false
		}
		slices.SortFunc(done, func(a, b n1Result) int {
			_, _, x, _ := a.metrics(events)
			_, _, y, _ := b.metrics(events)
			return cmp.Compare(x, y)
		})
		var per []float64
		for _, r := range done {
			_, _, v, _ := r.metrics(events)
			per = append(per, v)
		}
		return done[len(done)/2], per, true
	}
	for _, q := range names {
		for _, backend := range n1Backends {
			r, per, ok := median(q, backend)
			if !ok {
				b.Note("%s %s: no result (the job did not finish: see the problems)", q, backend)
				continue
			}
			if len(per) < samples {
				b.Note("%s %s: %d of %d runs finished", q, backend, len(per), samples)
			}
			perS, cores, _, coresTime := r.metrics(events)
			name := q + " " + backend
			b.Add(name+": events/s/core", "events/s/core", true, per).
				Against("generator alone", gen, "events/s/core").
				With("events_per_s", perS).With("cpu_cores", cores).With("cores_x_time_s", coresTime).
				With("wall_s", r.Wall.Seconds()).With("events", n).
				With("checkpoints_completed", float64(r.Completed)).With("checkpoints_failed", float64(r.FailedCkpt)).
				With("checkpoints_failed_as_job_ended", float64(r.FailedAtEnd))
			b.Add(name+": events/s", "events/s", true, []float64{perS}).With("cpu_cores", cores)
			b.Add(name+": Cores × Time", "core·s", false, []float64{coresTime})
			b.Note("%s (the median run): FINISHED in %.2f s, %.2f cores, %d checkpoints completed (%d failed, %d of them as the job ended)", name, r.Wall.Seconds(), cores, r.Completed, r.FailedCkpt, r.FailedAtEnd)
		}
	}
	for _, q := range names {
		v := math.NaN()
		if r, _, ok := median(q, "heap"); ok {
			_, _, v, _ = r.metrics(events)
		}
		b.Goal(fmt.Sprintf("%s heap events/s/core (~5 × Flink 1.13's %s)", q, fmtNum(n1Flink[q], "")), v, ">=", n1Goal[q], "events/s/core")
		if !slices.Contains(n1Windowed, q) {
			continue
		}
		ratio := math.NaN()
		if hr, _, ok := median(q, "heap"); ok {
			if pr, _, ok := median(q, "pebble-incremental"); ok {
				_, _, h, _ := hr.metrics(events)
				_, _, p, _ := pr.metrics(events)
				ratio = p / h
			}
		}
		b.Goal(q+" pebble-incremental ÷ heap events/s/core", ratio, ">=", n1PebbleGoal, "×")
	}
	b.Note("method: each point is the median of %d runs; %s events per job (rate 0: as fast as they go), every vertex p=%d, checkpoints every %s (exactly-once, aligned), the discarding sink, on 1 JobManager + 1 TaskManager of %d slots that is the query's program (bin/nexmark -query qN taskmanager; a cluster per query, the heap and pebble-incremental jobs one after the other on it); T = job RUNNING (all subtasks) → FINISHED (polled every %s, later every 0.5 %% of the time elapsed, at most 250 ms), C = CPU time (/proc) of the JobManager and the TaskManager over T; events/s = N/T, cores = C/T, events/s/core = N/C, Cores × Time = C (Nexmark's \"Cores * Time(s)\", here for N events); the goals, on the heap run, are 5 × Flink 1.13's published events/s/core (q0, q1 and q2 at one 800k)",
		samples, fmtNum(n, ""), n1Parallelism, n1Checkpoint, n1Parallelism, n1Poll)
	b.Note("our source generates the events in-process (the Nexmark generator inside the source vertex, typed records; the generator alone, in one goroutine of the harness, is the ratio's baseline: the source's own ceiling per core), where Flink's and RisingWave's Nexmark suites read JSON events from Kafka: their per-core numbers include the Kafka consumer and JSON parsing, ours the generation")
	return runErr
}

// n1Query runs query q on every backend on a cluster of its own, and with
// -profile one extra, unmeasured heap job while the TaskManager is
// profiled.
func n1Query(e *Env, b *Bench, prog, q string, events int64, samples int, done func(backend string, r n1Result)) error {
	dir := filepath.Join(e.Work, "n1-"+q)
	tm, err := n1TaskManager(dir, prog, q, e.Profile)
	if err != nil {
		return err
	}
	nbin := e.Bin
	nbin.TaskManager = tm
	clusters := 0
	start := func() (*harness.Cluster, error) {
		// A cluster started again (its TaskManager died) keeps its logs
		// apart from the first's.
		cdir := dir
		if clusters++; clusters > 1 {
			cdir = filepath.Join(dir, fmt.Sprintf("restart-%d", clusters-1))
		}
		e.Logf("starting cluster n1-%s (1 TaskManager × %d slots, %s -query %s taskmanager)", q, n1Parallelism, prog, q)
		c, err := harness.StartCluster(e.Ctx, harness.Config{Dir: cdir, Bin: nbin, TaskManagers: 1, Slots: n1Parallelism})
		if err != nil {
			return nil, err
		}
		if e.Profile {
			// The program serves pprof on its HTTP address (--pprof).
			for _, t := range c.TMs {
				t.Pprof = t.HTTP
			}
		}
		return c, nil
	}
	c, err := start()
	if err != nil {
		return err
	}
	defer func() { e.StopCluster(c) }()
	var heapWall time.Duration
	// The samples alternate backends, so a change of the host's load
	// falls on both.
	for sample := range samples {
		for _, backend := range n1Backends {
			if len(c.LiveTMs()) == 0 {
				// The TaskManager died with the previous job: a new cluster.
				e.StopCluster(c)
				if c, err = start(); err != nil {
					return err
				}
			}
			e.Logf("N1 %s %s: %d events, run %d of %d", q, backend, events, sample+1, samples)
			r, err := n1Run(e, c, q, backend, events)
			if err != nil {
				if e.Ctx.Err() != nil {
					return err
				}
				e.Problem("%s %s: %v\nTaskManager log:\n%s", q, backend, err, n1Tail(c))
				continue
			}
			done(backend, r)
			perS, cores, perCore, _ := r.metrics(events)
			e.Logf("N1 %s %s: %s in %.2f s: %s events/s, %.2f cores, %s events/s/core, %d checkpoints", q, backend, r.State, r.Wall.Seconds(), fmtNum(perS, ""), cores, fmtNum(perCore, ""), r.Completed)
			switch {
			case r.State != weirv1.JobState_JOB_STATE_FINISHED:
				e.Problem("%s %s: job %s: %s\nTaskManager log:\n%s", q, backend, r.State, r.Cause, n1Tail(c))
			case r.Restarts > 0:
				e.Problem("%s %s: job FINISHED after %d restarts (numbers include the recovery)", q, backend, r.Restarts)
			}
			if n := r.FailedCkpt - r.FailedAtEnd; n > 0 {
				e.Problem("%s %s: %d checkpoints failed while the job ran (and %d as it ended)", q, backend, n, r.FailedAtEnd)
			}
			if backend == "heap" {
				heapWall = r.Wall
			}
		}
	}
	if e.Profile && len(c.LiveTMs()) > 0 {
		n1Profile(e, b, c, q, events, heapWall)
	}
	return nil
}

// n1Profile runs one more heap job, unmeasured, and profiles the
// TaskManager over most of it (as long as the measured heap job took, 1
// to 10 s).
func n1Profile(e *Env, b *Bench, c *harness.Cluster, q string, events int64, heapWall time.Duration) {
	job, err := n1Submit(e, c, q, "heap", events)
	if err == nil {
		err = c.WaitRunning(e.Ctx, job, time.Minute)
	}
	if err != nil {
		e.Logf("N1 %s profile run: %v", q, err)
		return
	}
	d := min(max(heapWall*4/5, time.Second), 10*time.Second)
	if heapWall == 0 {
		d = 5 * time.Second
	}
	e.Logf("N1 %s: profiling the TaskManager for %s of an extra heap job", q, d.Round(time.Second))
	profileTMs(e, b, c, q+"-heap", d)
	if _, err := n1Wait(e, c, job, n1JobTimeout(events)); err != nil {
		e.Logf("N1 %s profile run: %v", q, err)
	}
}

// n1Tail is the end of the cluster's TaskManager logs.
func n1Tail(c *harness.Cluster) string {
	var s []string
	for _, t := range c.TMs {
		s = append(s, t.ID+":\n"+t.Tail(3000))
	}
	return strings.Join(s, "\n")
}

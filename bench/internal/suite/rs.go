package suite

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/weirproject/weir/bench/internal/harness"
	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// RS measures rescaling a job with ~1 GiB of keyed Pebble state
// (incremental backend, checkpoints on S3: versitygw on loopback) between
// 2 and 4 stateful subtasks, on 2 TaskManagers × 2 slots with local
// recovery, beside stopping the same job with a savepoint and submitting
// it again from the savepoint at the new parallelism (what a rescale is
// in Flink without the adaptive scheduler).
//
// S3's job, state-load-source (p=2) → hash → random-state (p=2 or 4).
// Each round rewrites 1% of the keys, takes an incremental checkpoint,
// waits for the daemons to be idle,
// then asks for the rescale (RescaleJob: a checkpoint, then every subtask
// redeployed at the new shape from it). Measured from the request: the
// rescale's checkpoint completed (RescaleJob returned), every subtask
// RUNNING in its new attempt (a subtask reports RUNNING once its state is
// restored). During it: the restores' log lines (bytes read from local
// copies and downloaded), the storage gets, and how much of the state
// changed subtask and TaskManager (each old subtask's state size in the
// rescale's checkpoint, spread evenly over its key groups; the new
// subtasks' TaskManagers from GetJob).
const (
	rsDefaultBytes = 1 << 30
	rsQuickBytes   = 128 << 20
)

func init() { onDemand["RS"] = true }

func rsSpec(name string, keys int64, dir string, parallelism int32, restore string) string {
	r := ""
	if restore != "" {
		r = "restore-from: " + strconv.Quote(restore) + "\n"
	}
	return fmt.Sprintf(`name: %s
%scheckpointing: {interval: 0s, mode: exactly-once, timeout: 10m, retained: 1}
restart-strategy: {type: none}
state: {backend: pebble, incremental: true}
vertices:
  - {name: source, operator: state-load-source, parallelism: 2, config: {keys: %d, dir: %s}}
  - {name: state, operator: random-state, parallelism: %d, inputs: [{from: source, partition: hash}], config: {value-bytes: %d}}
`, name, r, keys, strconv.Quote(dir), parallelism, s3ValueBytes)
}

// rsRun is one measured change of parallelism.
type rsRun struct {
	From, To        int32
	Checkpoint      time.Duration // request → the rescale's checkpoint completed (or the savepoint taken)
	Running         time.Duration // request → every subtask running restored
	Deployed        time.Duration // request → every subtask in a new attempt
	Source          time.Duration // request → a new source subtask running (no keyed state to restore)
	Gets            float64       // the TaskManagers' storage get requests
	Uploaded        int64         // the rescale's checkpoint: bytes uploaded
	Sync, Async     time.Duration // the rescale's checkpoint: its slowest subtask's parts
	Placement       string        // the state vertex's subtasks' TaskManagers, before → after
	LocalBytes      int64         // the restores' log lines
	DownloadedBytes int64
	State           int64 // the state vertex's state in the checkpoint restored
	NewSubtask      int64 // of it, key groups whose subtask index changed
	NewTaskManager  int64 // of it, key groups that changed TaskManager
}

func runRS(e *Env, b *Bench) error {
	total := e.StateBytes
	if total <= 0 {
		total = rsDefaultBytes
		if e.Quick {
			total = rsQuickBytes
		}
	}
	keys := total / s3ValueBytes
	changed := max(1, keys/100)
	rounds, stops := 10, 2 // per direction
	if e.Quick {
		rounds, stops = 2, 1
	}
	dir, srv, done, err := stateBenchDir(e, "rs-data") // the cluster's own, "rs", keeps its logs
	if err != nil {
		return err
	}
	defer done()
	ctrl, tmp := filepath.Join(dir, "control"), filepath.Join(dir, "tmp")
	for _, d := range []string{ctrl, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	undo := setEnv("AWS_ENDPOINT_URL", "http://"+srv.addr, "AWS_REGION", s3Region,
		"AWS_ACCESS_KEY_ID", s3AccessKey, "AWS_SECRET_ACCESS_KEY", s3SecretKey,
		"TMPDIR", tmp, "WEIR_LOCAL_RECOVERY", "true")
	c, err := e.Cluster("rs", harness.Config{TaskManagers: 2, Slots: 2, ExtraJM: []string{"--checkpoint-dir", "s3://" + s3Bucket + "/rs",
		// Restoring a canonical savepoint of 1 GiB kept a TaskManager from
		// answering heartbeats for 5 s on this 2-core host: the baseline
		// would fail instead of being measured.
		"--heartbeat-timeout", "60s"}})
	undo()
	if err != nil {
		return err
	}
	defer e.StopCluster(c)
	var gen int64
	s := &s3Side{e: e, name: "rescale", c: c, dir: ctrl, gen: &gen, extra: []int{srv.proc.Pid()}, bench: "RS"}
	if s.job, err = c.Submit(e.Ctx, rsSpec("rs", keys, ctrl, 2, "")); err != nil {
		return err
	}
	if err := c.WaitRunning(e.Ctx, s.job, 10*time.Minute); err != nil {
		return err
	}
	t := time.Now()
	if err := s.load(keys); err != nil {
		return err
	}
	e.Logf("RS: loaded %d keys × %d B in %.1f s", keys, s3ValueBytes, time.Since(t).Seconds())
	if err := s.idle("the first checkpoint"); err != nil {
		return err
	}
	if _, err := s.checkpoint(false); err != nil {
		return fmt.Errorf("first checkpoint: %w", err)
	}
	var live, stopped []rsRun
	p := int32(2)
	step := func(how string, stop, warm bool) error {
		if err := s.update(changed); err != nil {
			return err
		}
		// A periodic checkpoint's place: the rescale's own then uploads
		// only what changed since, not what the last rescale's restore
		// ingested.
		if err := s.idle("the checkpoint"); err != nil {
			return err
		}
		if _, err := s.checkpoint(false); err != nil {
			return err
		}
		if err := s.idle("the " + how); err != nil {
			return err
		}
		to := 6 - p // 2 ↔ 4
		var r rsRun
		var err error
		if stop {
			r, err = rsStopAndResume(s, keys, p, to)
		} else {
			r, err = rsRescale(s, p, to)
		}
		if err != nil {
			return fmt.Errorf("%s %d → %d: %w", how, p, to, err)
		}
		e.Logf("RS %s %d → %d: checkpoint %.0f ms (%.1f MB uploaded, slowest sync %.0f ms, async %.0f ms), all deployed %.0f ms, a source running %.0f ms, all running %.0f ms after the request; state %.1f MB, %.1f MB changed subtask, %.1f MB changed TaskManager; restores: local %.1f MB, downloaded %.1f MB, %.0f storage gets; state subtasks %s",
			how, p, to, s1Millis(r.Checkpoint), float64(r.Uploaded)/mb, s1Millis(r.Sync), s1Millis(r.Async), s1Millis(r.Deployed), s1Millis(r.Source), s1Millis(r.Running), float64(r.State)/mb, float64(r.NewSubtask)/mb, float64(r.NewTaskManager)/mb,
			float64(r.LocalBytes)/mb, float64(r.DownloadedBytes)/mb, r.Gets, r.Placement)
		if warm {
			p = to
			return nil
		}
		if stop {
			stopped = append(stopped, r)
		} else {
			live = append(live, r)
		}
		p = to
		return nil
	}
	// The first deployment spreads nothing by state; one round trip,
	// not measured, puts the subtasks where a rescale keeps them.
	for range 2 {
		if err := step("warm-up rescale", false, true); err != nil {
			return err
		}
	}
	for range rounds {
		for range 2 {
			if err := step("rescale", false, false); err != nil {
				return err
			}
		}
	}
	for range stops {
		for range 2 {
			if err := step("stop-with-savepoint-and-resume", true, false); err != nil {
				return err
			}
		}
	}
	if err := c.Cancel(e.Ctx, s.job); err != nil {
		return fmt.Errorf("cancel: %w", err)
	}

	ms := func(d time.Duration) float64 { return s1Millis(d) }
	col := func(rs []rsRun, from int32, f func(rsRun) float64) []float64 {
		var out []float64
		for _, r := range rs {
			if r.From == from {
				out = append(out, f(r))
			}
		}
		return out
	}
	for _, from := range []int32{2, 4} {
		to := 6 - from
		base := b.Add(fmt.Sprintf("stop-with-savepoint-and-resume %d → %d: request → all subtasks running restored", from, to), "ms", false,
			col(stopped, from, func(r rsRun) float64 { return ms(r.Running) }))
		base.With("request → savepoint taken, ms (median)", median(col(stopped, from, func(r rsRun) float64 { return ms(r.Checkpoint) })))
		pt := b.Add(fmt.Sprintf("rescale %d → %d: request → all subtasks running restored", from, to), "ms", false,
			col(live, from, func(r rsRun) float64 { return ms(r.Running) }))
		pt.Against("stop-with-savepoint-and-resume (same run)", base.Median, "ms")
		b.Add("  request → the rescale's checkpoint completed", "ms", false, col(live, from, func(r rsRun) float64 { return ms(r.Checkpoint) })).
			With("its bytes uploaded, MB (median)", median(col(live, from, func(r rsRun) float64 { return float64(r.Uploaded) / mb }))).
			With("its slowest subtask's async part, ms (median)", median(col(live, from, func(r rsRun) float64 { return ms(r.Async) })))
		b.Add("  request → every subtask deployed in its new attempt", "ms", false, col(live, from, func(r rsRun) float64 { return ms(r.Deployed) }))
		b.Add("  request → a source subtask running (no keyed state)", "ms", false, col(live, from, func(r rsRun) float64 { return ms(r.Source) }))
		d := b.Add("  bytes downloaded by the restores", "MB", false, col(live, from, func(r rsRun) float64 { return float64(r.DownloadedBytes) / mb }))
		d.With("read from local copies, MB (median)", median(col(live, from, func(r rsRun) float64 { return float64(r.LocalBytes) / mb })))
		d.With("TaskManagers' storage gets (median)", median(col(live, from, func(r rsRun) float64 { return r.Gets })))
		d.With("state of the stateful vertex, MB (median)", median(col(live, from, func(r rsRun) float64 { return float64(r.State) / mb })))
		d.With("of it, key groups that changed subtask, MB (median)", median(col(live, from, func(r rsRun) float64 { return float64(r.NewSubtask) / mb })))
		d.With("of it, key groups that changed TaskManager, MB (median)", median(col(live, from, func(r rsRun) float64 { return float64(r.NewTaskManager) / mb })))
		b.Add("  downloaded ÷ state that changed subtask", "×", false, col(live, from, func(r rsRun) float64 {
			return float64(r.DownloadedBytes) / float64(max(1, r.NewSubtask))
		}))
	}
	b.Note("%d MiB of keyed Pebble state (incremental backend; %d keys × %d B random values), job state-load-source (p=2) → hash → random-state (p=2 ↔ 4) on 2 TaskManagers × 2 slots with --local-recovery, JobManager --heartbeat-timeout 60s (the baseline's restore of a canonical savepoint of 1 GiB kept a TaskManager from answering for 5 s); checkpoints to s3://%s/rs on versitygw (posix backend) on loopback, its data in the work directory (same disk)", total>>20, keys, s3ValueBytes, s3Bucket)
	b.Note("%d rescales each way (RescaleJob), then %d stop-with-savepoint-and-resume each way (StopWithSavepoint, then the same spec at the new parallelism submitted with restore-from the savepoint); before each, %d keys (1%%) rewritten, an incremental checkpoint (in a periodic checkpoint's place), and the daemons idle after sync(2); restore progress polled with GetJob every 2 ms; a subtask reports RUNNING once its state is restored", rounds, stops, changed)
	b.Note("state that changed subtask / TaskManager: each old stateful subtask's state size in the checkpoint restored, spread evenly over its key groups, counted for the key groups whose new subtask has another index / runs on another TaskManager; bytes downloaded and read locally are the TaskManagers' restore log lines (downloaded_bytes, local_bytes); one unmeasured round trip 2 → 4 → 2 first, so that the first deployment's placement (which knows no state) does not count")
	return nil
}

// rsRescale rescales the state vertex from → to and measures it.
func rsRescale(s *s3Side, from, to int32) (rsRun, error) {
	e, c := s.e, s.c
	r := rsRun{From: from, To: to}
	old, err := c.Job(e.Ctx, s.job)
	if err != nil {
		return r, err
	}
	watch := watchRestoreLogs(c.LiveTMs())
	m0, err := c.ScrapeTMs(e.Ctx)
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	resp, err := c.Client.RescaleJob(e.Ctx, &weirv1.RescaleJobRequest{JobId: s.job, Parallelism: map[string]int32{"state": to}})
	if err != nil {
		return r, err
	}
	r.Checkpoint = time.Since(t0)
	j, err := rsWaitNewAttempts(s, &r, old, t0)
	if err != nil {
		return r, err
	}
	r.Running = time.Since(t0)
	logs := watch()
	r.LocalBytes, r.DownloadedBytes = logs.local, logs.downloaded
	m1, err := c.ScrapeTMs(e.Ctx)
	if err != nil {
		return r, err
	}
	get := map[string]string{"op": "get"}
	r.Gets = m1.Sum("weir_storage_requests_total", get) - m0.Sum("weir_storage_requests_total", get)
	return r, rsMoved(s, &r, resp.GetCheckpointId(), old, j)
}

// rsStopAndResume stops the job with a savepoint and submits it again from
// the savepoint with the state vertex at parallelism to.
func rsStopAndResume(s *s3Side, keys int64, from, to int32) (rsRun, error) {
	e, c := s.e, s.c
	r := rsRun{From: from, To: to}
	t0 := time.Now()
	sp, err := c.Client.StopWithSavepoint(e.Ctx, &weirv1.StopWithSavepointRequest{JobId: s.job})
	if err != nil {
		return r, err
	}
	r.Checkpoint = time.Since(t0)
	id, err := c.Submit(e.Ctx, rsSpec("rs", keys, s.dir, to, sp.GetExternalPath()))
	if err != nil {
		return r, err
	}
	s.job = id
	if err := c.WaitRunning(e.Ctx, id, 10*time.Minute); err != nil {
		return r, err
	}
	r.Running = time.Since(t0)
	return r, nil
}

// rsWaitNewAttempts polls the job until every subtask runs in an attempt
// newer than any in old, noting in r when they were all deployed and
// when the first source ran.
func rsWaitNewAttempts(s *s3Side, r *rsRun, old *weirv1.JobInfo, t0 time.Time) (*weirv1.JobInfo, error) {
	was := int32(-1)
	for _, v := range old.GetVertices() {
		for _, st := range v.GetSubtasks() {
			was = max(was, st.GetAttempt())
		}
	}
	var out *weirv1.JobInfo
	err := harness.Poll(s.e.Ctx, 10*time.Minute, 2*time.Millisecond, "the rescaled job running", func() (bool, error) {
		j, err := s.c.Job(s.e.Ctx, s.job)
		if err != nil {
			return false, err
		}
		switch j.GetState() {
		case weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELED, weirv1.JobState_JOB_STATE_FINISHED:
			return false, fmt.Errorf("job %s: %s", j.GetState(), j.GetFailureCause())
		}
		now := time.Since(t0)
		deployed, running := true, true
		for _, v := range j.GetVertices() {
			for _, st := range v.GetSubtasks() {
				if st.GetAttempt() <= was {
					deployed = false
				}
				if st.GetAttempt() <= was || st.GetState() != weirv1.ExecutionState_EXECUTION_STATE_RUNNING {
					running = false
				} else if v.GetName() == "source" && r.Source == 0 {
					r.Source = now
				}
			}
		}
		if deployed && r.Deployed == 0 {
			r.Deployed = now
		}
		if !running || j.GetState() != weirv1.JobState_JOB_STATE_RUNNING {
			return false, nil
		}
		out = j
		return true, nil
	})
	return out, err
}

// rsMoved fills in how much of the checkpoint's state changed subtask and
// TaskManager between the attempts of old and of now.
func rsMoved(s *s3Side, r *rsRun, checkpoint int64, old, now *weirv1.JobInfo) error {
	g, err := s.c.Client.GetCheckpoint(s.e.Ctx, &weirv1.GetCheckpointRequest{JobId: s.job, CheckpointId: checkpoint})
	if err != nil {
		return err
	}
	tms := func(j *weirv1.JobInfo) map[int32]string {
		out := map[int32]string{}
		for _, v := range j.GetVertices() {
			if v.GetName() == "state" {
				for _, st := range v.GetSubtasks() {
					out[st.GetIndex()] = st.GetTaskmanagerId()
				}
			}
		}
		return out
	}
	before, after := tms(old), tms(now)
	r.Placement = fmt.Sprintf("%v → %v", before, after)
	maxP := jobgraph.DefaultMaxParallelism // rsSpec sets none
	for _, st := range g.GetSubtasks() {
		r.Uploaded += st.GetCheckpointedSize()
		r.Sync = max(r.Sync, time.Duration(st.GetMetrics().GetSyncDurationMs())*time.Millisecond)
		r.Async = max(r.Async, time.Duration(st.GetMetrics().GetAsyncDurationMs())*time.Millisecond)
		if st.GetVertex() != "state" {
			continue
		}
		r.State += st.GetStateSize()
		was := keygroup.RangeFor(maxP, int(r.From), int(st.GetSubtaskIndex()))
		per := float64(st.GetStateSize()) / float64(was.End-was.Start+1)
		for kg := was.Start; kg <= was.End; kg++ {
			i := int32(keygroup.OperatorIndex(kg, maxP, int(r.To)))
			if i != st.GetSubtaskIndex() {
				r.NewSubtask += int64(per)
			}
			if after[i] != before[st.GetSubtaskIndex()] {
				r.NewTaskManager += int64(per)
			}
		}
	}
	return nil
}

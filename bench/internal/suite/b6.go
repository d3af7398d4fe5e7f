package suite

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/weirproject/weir/bench/internal/harness"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

const (
	b6Keys       = 100_000
	b6ValueBytes = 1000 // × keys ≈ 100 MB of keyed heap state
	b6Rate       = 10_000
)

// recoverySpec: clock-source (p=2, b6Rate records/s per subtask on the
// job's timeline, so a restored source replays and catches up) → partition
// → ballast (p=2, a 1000-byte value per key); 1 s checkpoints; restart at
// once after a failure. With hash the job is one pipelined region; with
// forward each source subtask and its ballast subtask are a region of
// their own.
func recoverySpec(dir string, t0 time.Time, partition string) string {
	return fmt.Sprintf(`name: b6-recovery
checkpointing: {interval: 1s, mode: exactly-once, timeout: 1m, retained: 1}
restart-strategy: {type: fixed-delay, attempts: 1000, delay: 0s}
vertices:
  - {name: source, operator: clock-source, parallelism: 2, config: {rate: %d, keys: %d, t0-ms: %d, dir: %s}}
  - {name: state, operator: ballast, parallelism: 2, inputs: [{from: source, partition: %s}], config: {value-bytes: %d}}
`, b6Rate, b6Keys, t0.UnixMilli(), strconv.Quote(dir), partition, b6ValueBytes)
}

// catchups reads the clock sources' catch-up reports: restored checkpoint
// → subtask → caught-up time.
func catchups(dir string) map[int64][]time.Time {
	out := map[int64][]time.Time{}
	files, _ := filepath.Glob(filepath.Join(dir, "clock-*.catchup"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var id, opened, lag, at int64
			if _, err := fmt.Sscanf(sc.Text(), "%d %d %d %d", &id, &opened, &lag, &at); err == nil {
				out[id] = append(out[id], time.Unix(0, at))
			}
		}
		fh.Close()
	}
	return out
}

// B6: recovery after SIGKILL of a TaskManager, the whole job restarting.
func runB6(e *Env, b *Bench) error { return runRecovery(e, b, false) }

// B6R: the same kill with region failover: the job's two subtask chains
// are regions of their own (forward edge), and only the killed
// TaskManager's region restarts.
func runB6R(e *Env, b *Bench) error { return runRecovery(e, b, true) }

func runRecovery(e *Env, b *Bench, regions bool) error {
	partition, name := "hash", "b6"
	if regions {
		partition, name = "forward", "b6r"
	}
	c, err := e.Cluster(name, harness.Config{TaskManagers: 3, Slots: 2})
	if err != nil {
		return err
	}
	defer e.StopCluster(c)
	rounds := 4
	if e.Quick {
		rounds = 1
	}
	dir := filepath.Join(c.Dir(), "clock")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	job, err := c.Submit(e.Ctx, recoverySpec(dir, time.Now(), partition))
	if err != nil {
		return err
	}
	if err := c.WaitRunning(e.Ctx, job, 30*time.Second); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(9, 9))
	var detect, running, firstCkpt, caught, lost, untouched []float64
	var stateMB []float64
	var restoredFrom int64
	for round := 1; round <= rounds; round++ {
		// Full state in a completed checkpoint, two checkpoints since the
		// last restore.
		var size int64
		err := harness.Poll(e.Ctx, 90*time.Second, 100*time.Millisecond, "a full checkpoint", func() (bool, error) {
			r, err := c.Client.ListCheckpoints(e.Ctx, &weirv1.ListCheckpointsRequest{JobId: job})
			if err != nil {
				return false, err
			}
			lc := r.GetLatestCompleted()
			size = lc.GetStateSize()
			return lc != nil && lc.GetId() >= restoredFrom+2 && size >= b6Keys*b6ValueBytes*9/10, nil
		})
		if err != nil {
			return err
		}
		stateMB = append(stateMB, float64(size)/1e6)
		if err := sleep(e, time.Duration(rng.Int64N(int64(time.Second)))); err != nil {
			return err
		}
		j, err := c.Job(e.Ctx, job)
		if err != nil {
			return err
		}
		if !harness.AllRunning(j, -1) {
			return fmt.Errorf("round %d: job not running before the kill: %s %s", round, j.GetState(), j.GetFailureCause())
		}
		old := map[string]int32{}
		busy := map[string]bool{}
		on := map[string]string{} // subtask → its TaskManager
		for _, v := range j.GetVertices() {
			for _, st := range v.GetSubtasks() {
				key := fmt.Sprintf("%s/%d", v.GetName(), st.GetIndex())
				old[key] = st.GetAttempt()
				on[key] = st.GetTaskmanagerId()
				busy[st.GetTaskmanagerId()] = true
			}
		}
		var victim *harness.TM
		for _, t := range c.LiveTMs() {
			if busy[t.ID] {
				victim = t
				break
			}
		}
		if victim == nil {
			return fmt.Errorf("round %d: no TaskManager runs the job", round)
		}
		restartCount := j.GetRestarts()
		e.Logf("B6 round %d: SIGKILL %s (state %.0f MB)", round, victim.ID, float64(size)/1e6)
		killed := time.Now()
		victim.Kill()

		// restarts: the subtasks that must come back on a new attempt: all
		// of them, or with regions those the victim ran (each chain runs
		// in one slot, so its region is exactly what ran there).
		restarts := map[string]bool{}
		for key, tm := range on {
			restarts[key] = !regions || tm == victim.ID
		}
		kept := 0 // looks at which every other region ran on its old attempt
		looks := 0
		var tDetect, tRunning time.Time
		err = harness.Poll(e.Ctx, 60*time.Second, 2*time.Millisecond, "recovery", func() (bool, error) {
			j, err := c.Job(e.Ctx, job)
			if err != nil {
				return false, err
			}
			switch j.GetState() {
			case weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELED, weirv1.JobState_JOB_STATE_FINISHED:
				return false, fmt.Errorf("job %s: %s", j.GetState(), j.GetFailureCause())
			}
			now := time.Now()
			all := j.GetState() == weirv1.JobState_JOB_STATE_RUNNING
			changed := j.GetState() != weirv1.JobState_JOB_STATE_RUNNING || j.GetRestarts() != restartCount
			others := true
			for _, v := range j.GetVertices() {
				for _, st := range v.GetSubtasks() {
					key := fmt.Sprintf("%s/%d", v.GetName(), st.GetIndex())
					was := old[key]
					running := st.GetState() == weirv1.ExecutionState_EXECUTION_STATE_RUNNING
					if st.GetAttempt() != was || !running {
						changed = true
					}
					if restarts[key] && (st.GetAttempt() <= was || !running) {
						all = false
					}
					if !restarts[key] && (st.GetAttempt() != was || !running) {
						others = false
					}
				}
			}
			looks++
			if others {
				kept++
			}
			if changed && tDetect.IsZero() {
				tDetect = now
			}
			if all {
				tRunning = now
				return true, nil
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		var tCkpt time.Time
		var restored *weirv1.RestoredCheckpoint
		err = harness.Poll(e.Ctx, 60*time.Second, 5*time.Millisecond, "a checkpoint after the restore", func() (bool, error) {
			r, err := c.Client.ListCheckpoints(e.Ctx, &weirv1.ListCheckpointsRequest{JobId: job})
			if err != nil {
				return false, err
			}
			done, rest := r.GetLatestCompleted(), r.GetLatestRestored()
			if done == nil || rest == nil || done.GetId() <= rest.GetId() || done.GetTriggerTimestampMs() < tRunning.UnixMilli() {
				return false, nil
			}
			restored, tCkpt = rest, time.UnixMilli(done.GetLatestAckTimestampMs())
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		restoredFrom = restored.GetId()
		var tCaught time.Time
		err = harness.Poll(e.Ctx, 60*time.Second, 20*time.Millisecond, "the sources to catch up", func() (bool, error) {
			ts := catchups(dir)[restoredFrom]
			if len(ts) < map[bool]int{false: 2, true: 1}[regions] {
				return false, nil
			}
			for _, t := range ts {
				if t.After(tCaught) {
					tCaught = t
				}
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		// What the restore went back to: the restored checkpoint's trigger.
		if r, err := c.Client.GetCheckpoint(e.Ctx, &weirv1.GetCheckpointRequest{JobId: job, CheckpointId: restoredFrom}); err == nil {
			lost = append(lost, float64(killed.Sub(time.UnixMilli(r.GetCheckpoint().GetTriggerTimestampMs())).Milliseconds()))
		}
		ms := func(t time.Time) float64 { return float64(t.Sub(killed)) / float64(time.Millisecond) }
		detect = append(detect, ms(tDetect))
		running = append(running, ms(tRunning))
		firstCkpt = append(firstCkpt, ms(tCkpt))
		caught = append(caught, ms(tCaught))
		untouched = append(untouched, 100*float64(kept)/float64(max(looks, 1)))
		e.Logf("B6 round %d: detected %.0f ms, running %.0f ms, checkpoint %.0f ms, caught up %.0f ms after the kill (restored checkpoint %d)",
			round, ms(tDetect), ms(tRunning), ms(tCkpt), ms(tCaught), restoredFrom)
		// A new spare for the next round, started after the measurement.
		if _, err := c.AddTM(); err != nil {
			return err
		}
		if err := c.WaitTMs(e.Ctx, 3, 30*time.Second); err != nil {
			return err
		}
	}
	if err := c.Cancel(e.Ctx, job); err != nil {
		return err
	}
	const interval = 1000.0
	b.Add("detect (kill → job restarting)", "ms", false, detect).Against("checkpoint interval", interval, "ms")
	p := b.Add("all subtasks running restored (kill → RUNNING)", "ms", false, running).Against("checkpoint interval", interval, "ms")
	b.Add("first checkpoint after the restore completed", "ms", false, firstCkpt).Against("checkpoint interval", interval, "ms")
	b.Add("sources caught up (lag < 10 ms of records)", "ms", false, caught).Against("checkpoint interval", interval, "ms")
	b.Add("  replayed: kill − restored checkpoint's trigger", "ms", false, lost)
	b.Add("  state in the checkpoint", "MB", true, stateMB)
	b.Goal("detect p50", b.Point("detect (kill → job restarting)").Median, "<=", 500, "ms")
	b.Goal("all running from the checkpoint p50", p.Median, "<=", 1000, "ms")
	if regions {
		b.Add("  other region running its old attempt, % of looks during recovery", "%", true, untouched)
		b.Note("region failover: source → forward → ballast, so each of the 2 subtask chains is a pipelined region; only the killed TaskManager's region restarts")
	}
	b.Note("3 TaskManagers × 2 slots, job p=2 (one spare TaskManager takes over; a replacement is started after each round's measurement); restart strategy fixed-delay 0 s; %d kills at random moments; JobManager default heartbeat timeout (5 s); detection is polled with GetJob every 2 ms", rounds)
	return nil
}

package task_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/poll"
)

// waitFor polls cond: back-pressure has no event to wait for, so the test
// looks at the subtasks' back-pressure counters the way a user watches
// the metric.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 30*time.Second, 10*time.Millisecond, what, func() (bool, string) { return cond(), "" })
}

func describeResult(mode string, r ckptResult) string {
	status := "completed"
	if !r.completed {
		status = "failed: " + r.declined
	}
	return fmt.Sprintf("%-16s checkpoint %d %s after %v: max alignment %v, max start delay %v, %d unaligned acks, %d bytes of channel state",
		mode, r.id, status, r.duration.Round(time.Millisecond), r.alignment, r.startDelay, r.unaligned, r.persisted)
}

// Under back-pressure an aligned checkpoint's barriers wait behind every
// queued buffer, so it outlasts a timeout an unaligned checkpoint, whose
// barriers overtake them, easily meets. The job is the running sum with a
// slow stage (500µs per record) before the sink and an unthrottled source,
// plus a second, trickling source (1 record/s) into the sum: its
// barriers reach the sum at once, so an aligned checkpoint holds that
// channel blocked until the other barriers made it through the full
// queues, and the alignment itself is long. The test logs the measured
// durations of each kind.
func TestUnalignedCheckpointUnderBackpressure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job under back-pressure for several seconds")
	}
	for _, remote := range []bool{false, true} {
		name := "local"
		if remote {
			name = "remote"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			vs := runningSumJob(0, 16, 500*time.Microsecond, filepath.Join(dir, "out"))
			vs[1].from = append(vs[1].from, "trickle")
			vs = append(vs, vertex{name: "trickle", operator: "sequence-source", parallelism: 1, config: map[string]any{"count": 0, "keys": 16, "rate": 1}})
			j := startJob(t, vs, dir, jobOptions{remote: remote, capacity: 2})
			waitFor(t, "back-pressure at the source and the sum", func() bool {
				return j.backPressured("source") > 0 && j.backPressured("sum") > 0
			})
			const timeout = time.Second
			var report []string
			aligned := j.checkpoint(1, checkpointOptions("aligned", 0), timeout)
			report = append(report, describeResult("aligned", aligned))
			if aligned.completed {
				t.Errorf("aligned checkpoint completed within %v under back-pressure", timeout)
			}
			unaligned := j.checkpoint(2, checkpointOptions("unaligned", 0), timeout)
			report = append(report, describeResult("unaligned", unaligned))
			if !unaligned.completed {
				t.Errorf("unaligned checkpoint did not complete within %v: %s", timeout, unaligned.declined)
			} else if unaligned.unaligned != j.total || unaligned.persisted == 0 {
				t.Errorf("unaligned checkpoint: %d of %d acks unaligned, %d bytes in flight persisted", unaligned.unaligned, j.total, unaligned.persisted)
			}
			// Without a timeout, for the durations of each kind.
			for i, mode := range []string{"aligned", "unaligned", "aligned-timeout"} {
				r := j.checkpoint(int64(3+i), checkpointOptions(mode, 50*time.Millisecond), time.Minute)
				if !r.completed {
					t.Errorf("%s checkpoint failed: %s", mode, r.declined)
				}
				// Within one process every barrier still waits in an
				// output queue when the 50ms pass, and goes ahead then.
				if mode == "aligned-timeout" && !remote && r.duration >= timeout {
					t.Errorf("aligned checkpoint with a 50ms alignment timeout took %v", r.duration)
				}
				report = append(report, describeResult(mode, r))
			}
			for _, v := range []string{"source", "sum"} {
				if j.metric("weir_task_backpressured_seconds_total", v) <= 0 {
					t.Errorf("%s: weir_task_backpressured_seconds_total is 0 under back-pressure", v)
				}
			}
			if n := j.metric("weir_task_checkpoints_unaligned_total", "slow"); n < 3 {
				t.Errorf("slow: weir_task_checkpoints_unaligned_total = %v after three unaligned checkpoints", n)
			}
			t.Logf("%s channels, back-pressured time: source %v, sum %v, slow %v\n%s", name,
				j.backPressured("source").Round(time.Millisecond), j.backPressured("sum").Round(time.Millisecond),
				j.backPressured("slow").Round(time.Millisecond), strings.Join(report, "\n"))
		})
	}
}

// A job restored from an unaligned checkpoint taken under back-pressure
// (so its channel state holds records in flight on every edge) produces
// exactly the output of an undisturbed run: every running sum once.
func TestRestoreFromUnalignedCheckpoint(t *testing.T) {
	const count, keys = 6000, 16
	refDir := t.TempDir()
	ref := startJob(t, runningSumJob(count, keys, 0, filepath.Join(refDir, "out")), refDir, jobOptions{})
	ref.finish(1, checkpointOptions("aligned", 0), time.Minute)
	want, err := check.ReadCommitted(filepath.Join(refDir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(want, count, keys); err != nil {
		t.Fatalf("undisturbed run: %v", err)
	}
	for _, remote := range []bool{false, true} {
		name := "local"
		if remote {
			name = "remote"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			first := startJob(t, runningSumJob(count, keys, 500*time.Microsecond, out), dir, jobOptions{remote: remote})
			waitFor(t, "back-pressure at the source", func() bool { return first.backPressured("source") > 0 })
			var restored ckptResult
			for id := int64(1); id <= 5 && restored.persisted == 0; id++ {
				r := first.checkpoint(id, checkpointOptions("unaligned", 0), 10*time.Second)
				if r.completed {
					restored = r
				}
			}
			if restored.persisted == 0 {
				t.Fatal("no unaligned checkpoint with channel state completed")
			}
			// The job fails: every subtask is cancelled; what the sinks
			// wrote after the checkpoint is not committed.
			first.stop()
			t.Logf("restoring checkpoint %d: %d bytes of channel state (%s)", restored.id, restored.persisted, describeResult("unaligned", restored))

			second := startJob(t, runningSumJob(count, keys, 0, out), dir, jobOptions{remote: remote, attempt: 2, restore: &restored})
			second.finish(restored.id+1, checkpointOptions("unaligned", 0), time.Minute)
			sameOutput(t, out, want, count, keys)
		})
	}
}

// sameOutput checks a restored run's committed output in out: every
// running sum once, and the same lines as the undisturbed run's want.
func sameOutput(t *testing.T, out string, want []string, count, keys int) {
	t.Helper()
	got, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.RunningSum(got, int64(count), int64(keys)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sortedLines(t, got), sortedLines(t, want)) {
		t.Fatalf("restored run's output (%d lines) differs from the undisturbed run's (%d lines)", len(got), len(want))
	}
}

package task_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
)

// The running-sum job chained (sum → slow → sink run as one subtask each)
// checkpoints and finishes with every sum exactly once, and the chained
// operators keep their own metrics.
func TestChainedJobExactlyOnce(t *testing.T) {
	const count, keys = 6000, 16
	for _, mode := range []string{"aligned", "unaligned"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			j := startJob(t, runningSumJob(count, keys, 0, out), dir, jobOptions{chained: true})
			if j.runs != 4 || j.total != 8 {
				t.Fatalf("%d goroutines for %d subtasks, want 4 for 8 (source, and sum → slow → sink chained)", j.runs, j.total)
			}
			r := j.checkpoint(1, checkpointOptions(mode, 0), 10*time.Second)
			if !r.completed {
				t.Fatalf("checkpoint 1: %s", r.declined)
			}
			if r.final {
				// The sources were done before it: the job ends with it.
				j.awaitDone()
			} else {
				// Read while the subtasks run: their series go when they end.
				for _, v := range []string{"sum", "slow", "sink"} {
					if n := j.metric("weir_task_records_in_total", v); n == 0 {
						t.Errorf("%s: no records in", v)
					}
				}
				j.finish(2, checkpointOptions(mode, 0), time.Minute)
			}
			lines, err := check.ReadCommitted(out)
			if err != nil {
				t.Fatal(err)
			}
			if err := check.RunningSum(lines, count, keys); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// State is addressed per operator, chained or not: a checkpoint of the
// job run unchained, unaligned under back-pressure (records in flight on
// the forward edges, now inside chains), restores into the chained job,
// and a checkpoint of the chained job restores into the unchained one.
func TestRestoreAcrossChaining(t *testing.T) {
	const count, keys = 6000, 16
	refDir := t.TempDir()
	ref := startJob(t, runningSumJob(count, keys, 0, filepath.Join(refDir, "out")), refDir, jobOptions{})
	ref.finish(1, checkpointOptions("aligned", 0), time.Minute)
	want, err := check.ReadCommitted(filepath.Join(refDir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                   string
		firstChained, restored bool
		mode                   string
	}{
		{"unchained unaligned checkpoint into a chained job", false, true, "unaligned"},
		{"chained checkpoint into an unchained job", true, false, "aligned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			first := startJob(t, runningSumJob(count, keys, 500*time.Microsecond, out), dir, jobOptions{chained: tc.firstChained})
			waitFor(t, "back-pressure at the source", func() bool { return first.backPressured("source") > 0 })
			var restored ckptResult
			for id := int64(1); id <= 5 && (restored.id == 0 || tc.mode == "unaligned" && restored.persisted == 0); id++ {
				if r := first.checkpoint(id, checkpointOptions(tc.mode, 0), 10*time.Second); r.completed {
					restored = r
				}
			}
			if restored.id == 0 || tc.mode == "unaligned" && restored.persisted == 0 {
				t.Fatalf("no %s checkpoint (with channel state, if unaligned) completed", tc.mode)
			}
			first.stop()
			t.Logf("restoring checkpoint %d (%s)", restored.id, describeResult(tc.mode, restored))
			second := startJob(t, runningSumJob(count, keys, 0, out), dir, jobOptions{attempt: 2, restore: &restored, chained: tc.restored})
			second.finish(restored.id+1, checkpointOptions("aligned", 0), time.Minute)
			sameOutput(t, out, want, count, keys)
		})
	}
}
